"""Kill drills on a real Ray: the orchestrator, an agent and the router die mid-job."""

from __future__ import annotations

import time
import uuid

import pytest
import ray

from raytroupe import runtime
from tests.support.inline import agent_actor, agent_name, idle_agents_kept, inline_role
from tests.support.ledger import TOOL_NAME, runs_by_token
from tests.support.restarts import after_restart, kill_and_wait_for_restart
from tests.support.wire_model import ToolCall as WireCall
from tests.support.wire_server import Reply, WireServer

# system tier: actors killed mid-job: the reliability drills that share the session's Ray
pytestmark = pytest.mark.system

LATENCY_S = 1.0


@pytest.fixture(scope="module", autouse=True)
def agents_kept(rt):
    """The drills kill and inspect agents after their jobs have ended: once, on a loaded
    machine, after the session's idle stop had stopped one for good under the test."""
    with idle_agents_kept(rt):
        yield


def _slow_team(name: str, agents: int = 2, max_parallel: int = 2) -> runtime.Team:
    return runtime.Team(
        name=name,
        planner_model="offline",
        max_parallel=max_parallel,
        models={f"{name}-slow": runtime.OfflineModel(latency_s=LATENCY_S)},
        agents=[
            runtime.AgentSpec(name=f"{name}-{i}", role="worker", model=f"{name}-slow",
                              memory=runtime.MemoryPolicy(recall=False))
            for i in range(agents)
        ],
    )  # fmt: skip


def _wait_for(job, kind: str, count: int, timeout: float = 60.0) -> list:
    seen = []
    for event in job.events(timeout=timeout):
        if event.type == kind:
            seen.append(event)
            if len(seen) >= count:
                return seen
    raise AssertionError(f"only {len(seen)} {kind} events")


def test_a_killed_orchestrator_resumes_its_job_without_rerunning_finished_subtasks(rt):
    job = rt.submit("Tasks:\n- alpha.\n- beta.\n- gamma.\n- delta.", team=_slow_team("phoenix"))
    finished = _wait_for(job, "subtask_finished", 2)
    done_before = {e.subtask_id for e in finished}
    killed_at = time.time()
    ray.kill(rt.client.handles.orchestrators.of(job.job_id), no_restart=False)  # its shard

    result = job.result(timeout=120)

    assert result.status == "succeeded", result.error
    assert len(result.subtasks) == 4
    for sub in result.subtasks:
        if sub.id in done_before:  # taken from the journal, not run again
            assert sub.finished_at < killed_at
            assert sub.attempt == 1
        else:
            assert sub.finished_at > killed_at
    assert rt.job(job.job_id).status() == "succeeded"


def test_a_reader_resuming_after_its_last_event_across_an_orchestrator_kill_misses_nothing(rt):
    job = rt.submit("Tasks:\n- one.\n- two.\n- three.\n- four.", team=_slow_team("lastid"))
    seen = []
    for event in job.events(timeout=60):  # the reader goes away after two subtasks
        seen.append(event)
        if sum(e.type == "subtask_finished" for e in seen) == 2:
            break
    kill_and_wait_for_restart(rt.client.handles.orchestrators.of(job.job_id))

    rest = list(rt.events(job.job_id, after=seen[-1].seq, timeout=120))  # Last-Event-ID
    whole = list(rt.events(job.job_id, timeout=30))

    assert rest[-1].type == "job_succeeded"
    assert whole == seen + rest  # one log: nothing renumbered, lost or given twice
    assert [e.seq for e in whole] == list(range(1, len(whole) + 1))
    assert [e.type for e in whole].count("job_submitted") == 1


def test_a_killed_agent_has_its_subtask_dispatched_again(rt):
    team = _slow_team("lazarus", agents=1, max_parallel=1)
    job = rt.submit("- one.\n- two.", team=team)
    _wait_for(job, "subtask_started", 1)
    ray.kill(rt.actor(agent_actor("lazarus-0")), no_restart=False)

    result = job.result(timeout=120)

    assert result.status == "succeeded", result.error
    # dispatched again; a second delivery may still find the agent restarting (Ray brings it
    # back in about a second), and each failed delivery is one dead letter, with its reason
    attempts = max(s.attempt for s in result.subtasks)
    assert attempts >= 2
    letters = [
        d for d in rt.dead_letters(limit=1000) if d.message and d.message.job_id == job.job_id
    ]
    assert [d.reason.value for d in letters] == ["recipient_unavailable"] * (attempts - 1)


@pytest.mark.parametrize("killed", ["agent", "orchestrator"])
def test_a_subtask_cut_short_resumes_at_the_turn_it_reached(rt, tmp_path, killed):
    """A subtask of 4 model calls, in its second tool call (after turn 2) when its agent (one
    of two of its role) or the job's orchestrator shard is killed. The subtask, dispatched
    again to that agent (restarted, or still running it), goes on where it was: turns 1 and
    2 are not asked again (replayed from the pool's record and the tools' results after an
    agent's death), the model server sees 4 calls in all, the side effect ran once, and the
    ledger and the usage report count each call once."""
    name = f"resume-{killed[:5]}-{uuid.uuid4().hex[:6]}"
    ledger, token = tmp_path / "effects.log", f"tok-{name}"
    tokens = {"prompt_tokens": 10, "completion_tokens": 2}

    def tool(name, **arguments):
        return Reply(tool_calls=(WireCall(name, arguments),), **tokens)

    with WireServer() as wire:
        wire.script(
            tool(TOOL_NAME, ledger=str(ledger), token=token),
            tool("python", code="import time; time.sleep(6); print('slept')"),
            tool("python", code="print(6 * 7)"),
            Reply(text="Done: 42.", **tokens),
        )
        model = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="m")
        team = runtime.Team(
            name=name,
            planner_model="offline",
            models={f"{name}-m": model},
            agents=[runtime.AgentSpec(name=f"{name}-{n}", role="worker", model=f"{name}-m",
                                      tools=[TOOL_NAME, "python"],
                                      memory=runtime.MemoryPolicy(recall=False))
                    for n in ("a", "b")],
        )  # fmt: skip
        job = rt.submit("Record the token, then compute 6 * 7.", team=team)
        assert wire.wait_for_requests(2, timeout_s=90)  # the agent is in its 6 s tool call
        time.sleep(1.0)
        system = wire.requests[1].body["messages"][0]["content"]  # "You are <name>, ..."
        (agent,) = [a.name for a in team.agents if system.startswith(f"You are {a.name},")]
        if killed == "agent":
            ray.kill(rt.actor(agent_actor(agent)), no_restart=False)
        else:
            ray.kill(rt.client.handles.orchestrators.of(job.job_id), no_restart=False)

        result = job.result(timeout=180)
        calls = [r.body["messages"] for r in wire.requests]

    assert result.status == "succeeded", result.error
    (sub,) = result.subtasks
    assert sub.agent == agent  # to the agent that had it: not its idle teammate
    assert sub.output == "Done: 42."
    assert len(calls) == 4  # turns 1 and 2 were not asked again
    # the third call, the first after the kill, went on with the conversation as it stood
    assert [m["role"] for m in calls[2]] == ["system", "user", *["assistant", "tool"] * 2]
    shown = [m["content"] for m in calls[2] if m["role"] == "tool"]
    assert shown == [f"recorded {token}", '{"stdout": "slept\\n", "stderr": "", "exit_code": 0}']
    assert runs_by_token(ledger) == {token: 1}
    assert (sub.turns, sub.usage.calls, sub.usage.total_tokens) == (4, 4, 48)
    rows = rt.usage(job.job_id)
    assert sum(r.calls for r in rows) == 4
    assert sum(r.prompt_tokens + r.completion_tokens for r in rows) == 48
    spent = ray.get(rt.actor("llm/0").spent.remote(f"job:{job.job_id}"))
    assert spent.tokens == 48  # billed once per call
    replayed = sum(bool(s.attributes.get("replayed")) for s in result.trace)
    if killed == "agent":  # its run again replayed turns 1 and 2
        assert sub.attempt >= 2
        assert replayed == 2
    else:  # the run under way was joined (nothing to replay), or, when it had ended before
        # the restarted shard dispatched the subtask again (a slow restart), run again with
        # every call given from the record: never a call made twice (4 calls, billed once)
        assert replayed in (0, 4), replayed


def test_a_restarted_router_rebuilds_its_registry(rt):
    team = _slow_team("rebuild", agents=1)
    rt.submit("- warm up.", team=team).result(timeout=60)
    before = rt.router_stats().registered
    kill_and_wait_for_restart(rt.actor("router/0"))  # the stats below are the new one's

    after = after_restart(rt.actor("router/0").stats.remote).registered
    rebuilt = agent_name("rebuild-0")
    assert after.keys() >= {"llm-0", "orchestrator", "memory", "tools-0", rebuilt}
    assert after[rebuilt] == before[rebuilt] == [inline_role("rebuild", "worker")]
    # and it routes: an agent reaches the pool, the orchestrator reaches the agent
    result = rt.submit("- once more.", team=team).result(timeout=60)
    assert result.status == "succeeded"


def test_restarted_agents_and_pool_come_back_as_last_configured(rt):
    """A restart re-runs ``__init__`` with the creation arguments; what was configured since
    (a hot-updated spec, router roles, a team's model aliases) is kept in Ray's KV store."""
    team = _slow_team("revenant", agents=1, max_parallel=1)
    assert rt.submit("- one.", team=team).result(timeout=120).status == "succeeded"
    updated = team.model_copy(
        update={"agents": (team.agents[0].model_copy(update={"instructions": "Be brief."}),)}
    )
    assert rt.submit("- two.", team=updated).result(timeout=120).status == "succeeded"
    agent, llm = rt.actor(agent_actor("revenant-0")), rt.actor("llm/0")

    kill_and_wait_for_restart(agent)
    kill_and_wait_for_restart(llm)

    assert ray.get(agent.spec.remote()).instructions == "Be brief."  # not the creation spec
    assert ray.get(agent.registration.remote()) == [inline_role("revenant", "worker")]
    assert "revenant-slow" in ray.get(llm.models.remote())  # the team's alias
    result = rt.submit("- three.", team=updated).result(timeout=120)
    assert result.status == "succeeded", result.error
