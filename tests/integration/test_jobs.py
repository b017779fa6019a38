"""Jobs end to end on a real local Ray: planning, parallel dispatch, aggregation, events."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import ScriptedTurn, ToolCall

ROOT = Path(__file__).resolve().parents[2]

RESEARCH_TASK = """\
Ray is a framework for scaling Python programs from a laptop to a cluster.
Actors in Ray are stateful workers, each living in its own process.
Ray Serve exposes Python code over HTTP with autoscaling replicas.
Questions:
1. What are Ray actors?
2. What does Ray Serve do?
3. What is Ray?
4. What is 17 * 23 + 4?
"""


def _research_team() -> runtime.Team:
    return runtime.Team.from_yaml(ROOT / "examples" / "teams" / "research.yaml")


def test_job_with_four_subtasks_across_agents_completes(rt):
    job = rt.submit(RESEARCH_TASK, team=_research_team())
    result = job.result(timeout=120)

    assert result.status == "succeeded"
    assert result.job_id == job.job_id
    assert [s.id for s in result.subtasks] == ["s1", "s2", "s3", "s4"]
    assert [s.instructions for s in result.subtasks] == [
        "What are Ray actors?",
        "What does Ray Serve do?",
        "What is Ray?",
        "What is 17 * 23 + 4?",
    ]
    assert all(s.status == "succeeded" for s in result.subtasks)
    agents = {s.agent for s in result.subtasks}
    assert len(agents) >= 2
    assert agents <= {"ada", "grace", "alan"}
    by_id = {s.id: s for s in result.subtasks}
    assert (
        by_id["s1"].output == "Actors in Ray are stateful workers, each living in its own process."
    )
    assert by_id["s4"].agent == "alan"
    assert by_id["s4"].role == "analyst"
    assert by_id["s4"].tool_calls == 1
    assert by_id["s4"].output == "17 * 23 + 4 = 395"
    for sub in result.subtasks:
        assert sub.providers == ("offline",)
        assert sub.started_at is not None
        assert sub.finished_at is not None
        assert sub.started_at <= sub.finished_at
    # the four questions sized by their text, their answers assembled in the order asked: 4
    # subtasks (one of them two turns), no planner call, no aggregation call
    assert result.answer == "\n".join(f"{n}. {s.output}" for n, s in enumerate(result.subtasks, 1))
    assert result.usage.calls == 5
    assert result.usage.total_tokens > 0
    assert result.timings.total_s >= result.timings.dispatch_s > 0


def test_subtasks_run_concurrently(rt):
    items = "Tasks:\n" + "\n".join(f"- Write note number {i}." for i in range(8))
    team = runtime.Team(
        name="parallel",
        models={"slow-0.5": runtime.OfflineModel(latency_s=0.5)},
        planner_model="offline",
        agents=[
            runtime.AgentSpec(name="par-a", role="worker", model="slow-0.5"),
            runtime.AgentSpec(name="par-b", role="worker", model="slow-0.5"),
        ],
    )
    result = rt.submit(items, team=team).result(timeout=120)

    assert result.status == "succeeded"
    assert len(result.subtasks) == 8
    spans = [(s.started_at, s.finished_at) for s in result.subtasks]
    assert all(start is not None and end is not None for start, end in spans)
    points = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, step in points:
        running += step
        most = max(most, running)
    # two agents, each working on up to four subtasks at once: eight could overlap
    assert most >= 4, f"at most {most} subtasks overlapped: {spans}"
    assert {s.agent for s in result.subtasks} == {"par-a", "par-b"}


def test_events_arrive_in_order_and_end_the_stream(rt):
    job = rt.submit("Tasks:\n- Say alpha.\n- Say beta.", team=_research_team())
    events = list(job.events(timeout=120))

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "job_submitted"
    assert events[-1].type == "job_succeeded"
    assert [e.type for e in events].count("subtask_finished") == 2
    assert {e.job_id for e in events} == {job.job_id}
    assert job.status() == "succeeded"


def test_scripted_provider_answers_through_ray_and_is_used_up(rt):
    team = runtime.Team(
        name="scripted",
        planner_model="offline",
        models={
            "script-calc": runtime.ScriptedModel(
                turns=[
                    ScriptedTurn(
                        tool_calls=(
                            ToolCall(
                                call_id="c1", tool="calculator", arguments={"expression": "6*7"}
                            ),
                        )
                    ),
                    ScriptedTurn(text="The answer is 42."),
                ]
            )
        },
        agents=[
            runtime.AgentSpec(
                name="scripted-1", role="solver", model="script-calc", tools=["calculator"]
            )
        ],
    )
    result = rt.submit("Compute six times seven.", team=team).result(timeout=60)

    (sub,) = result.subtasks
    assert sub.output == "The answer is 42."
    assert sub.providers == ("scripted",)
    assert (sub.turns, sub.tool_calls) == (2, 1)
    # every scripted turn was played: removing the alias does not complain
    ray.get(rt.actor("llm/0").remove.remote("script-calc"))


def test_failed_subtask_fails_the_job_with_a_typed_error(rt):
    team = runtime.Team(
        name="looping",
        planner_model="offline",
        models={
            "script-loop": runtime.ScriptedModel(
                turns=[
                    ScriptedTurn(
                        tool_calls=(
                            ToolCall(
                                call_id=f"c{i}", tool="calculator", arguments={"expression": "1+1"}
                            ),
                        )
                    )
                    for i in range(2)
                ]
            )
        },
        agents=[
            runtime.AgentSpec(
                name="looper", role="solver", model="script-loop", tools=["calculator"], max_turns=2
            )
        ],
    )
    job = rt.submit("Add one and one.", team=team)
    with pytest.raises(runtime.JobFailed) as info:
        job.result(timeout=60)

    result = info.value.detail["result"]
    assert result.status == "failed"
    assert result.error.code == "job_failed"
    (sub,) = result.subtasks
    assert sub.status == "failed"
    assert sub.stop_reason == "max_turns", sub.error
    assert sub.error.code == "max_turns"


def test_unknown_job_is_a_typed_error(rt):
    with pytest.raises(runtime.JobNotFound):
        rt.job("job-does-not-exist")


def test_example_driver_joins_the_running_ray(rt):
    """The README's example, run as a second driver, joins this session's Ray.

    Through ``RAY_ADDRESS`` (as ``ray job submit`` and cluster drivers do): on a machine with
    several Rays, Ray's own discovery refuses to guess.
    """
    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "research_team.py"), "--latency", "0"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": address},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "status: succeeded" in done.stdout
    assert "17 * 23 + 4 = 395" in done.stdout
    assert "Started a local Ray instance" not in done.stderr


def test_a_job_on_ray_carries_its_trace(rt):
    result = rt.submit("- What is 2 + 2?\n- Say done.", team=_research_team()).result(timeout=60)

    kinds = [s.kind for s in result.trace]
    assert kinds[0] == "job"
    assert {"plan", "subtask", "attempt", "model_call", "tool_call", "aggregate"} <= set(kinds)
    ids = {s.span_id for s in result.trace}
    assert all(s.parent_id in ids for s in result.trace[1:])
    assert len({s.trace_id for s in result.trace}) == 1
    calls = [s for s in result.trace if s.kind == "model_call"]
    assert all(s.attributes["provider"] == "offline" for s in calls)
    assert '"spans"' in result.trace_json()
