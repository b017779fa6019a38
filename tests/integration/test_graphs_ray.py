"""Graph jobs on a real Ray: shared state, concurrent branches, subgraphs, an orchestrator
killed mid-graph and while a graph waits for a person, and a fork from a checkpoint.

The session's journal is a real PostgreSQL: checkpoints outlive the orchestrator's process.
"""

from __future__ import annotations

import importlib.util
import time

import pytest

from raytroupe import runtime
from raytroupe.protocols import (
    AgentSpec,
    ErrorCode,
    InvalidInput,
    JobFailed,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
)
from raytroupe.protocols.graph import GraphSpec
from tests.support.graph_specs import CHAIN, NESTED, PAUSED
from tests.support.http_api import USER_KEY
from tests.support.restarts import kill_and_wait_for_restart, until_status

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system


def _scripted(*texts: str) -> ScriptedModel:
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def _team(name: str, graph: dict, models: dict, **fields) -> TeamSpec:
    """One agent per role, each on its own model (a scripted one plays each answer once)."""
    agents = tuple(
        AgentSpec(name=f"{name}-{role}", role=role, model=f"{name}-{role}",
                  memory=runtime.MemoryPolicy(recall=False))
        for role in models
    )  # fmt: skip
    return TeamSpec(
        name=name, planner_model="offline", agents=agents,
        models={f"{name}-{role}": spec for role, spec in models.items()},
        graph=GraphSpec.model_validate(graph), **fields,
    )  # fmt: skip


def _wait_for(job, kind: str, timeout: float = 60.0, **data):
    for event in job.events(timeout=timeout):
        if event.type == kind and all(event.data.get(k) == v for k, v in data.items()):
            return event
    raise AssertionError(f"no {kind} event with {data}")


def test_the_review_loop_writer_revises_its_own_draft_from_the_reviewers_notes(rt):
    team = runtime.Team.from_yaml("examples/teams/review_loop.yaml").spec()
    team = team.model_copy(update={
        "name": "ray-review",
        "models": {"w": _scripted("A first draft.", "A shorter draft."),
                   "r": _scripted("Too long: cut it.", "approved")},
        "agents": tuple(a.model_copy(update={"name": f"ray-{a.name}",
                                             "model": "w" if a.role == "writer" else "r"})
                        for a in team.agents),
    })  # fmt: skip
    result = rt.submit("a haiku about actors", team=team).result(timeout=120)
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "review.2", "draft.3", "review.4"]
    revising = result.subtasks[2].instructions
    assert "Your current draft (empty at first): A first draft." in revising
    assert "Too long: cut it." in revising
    assert result.answer == "A shorter draft."
    assert result.state["notes"] == ["Too long: cut it.", "approved"]


def test_a_fan_out_runs_its_branches_at_once_and_the_join_sees_them_all(rt):
    graph = {
        "start": ["left", "right"],
        "answer": "summary",
        "state": {"json_schema": {"type": "object", "properties": {
            "parts": {"type": "array", "items": {"type": "string"}},
            "summary": {"type": "string"}}}, "reducers": {"parts": "append"}},
        "nodes": [
            {"id": "left", "role": "left", "writes": ["parts"], "instructions": "Left of {task}."},
            {"id": "right", "role": "right", "writes": ["parts"],
             "instructions": "Right of {task}."},
            {"id": "join", "role": "joiner", "join": "all", "writes": ["summary"],
             "instructions": "Join {state.parts}"},
        ],
        "edges": [{"source": "left", "target": "join"}, {"source": "right", "target": "join"}],
    }  # fmt: skip
    slow = runtime.OfflineModel(latency_s=2.0)
    team = _team("fanout", graph, {"left": slow, "right": slow, "joiner": _scripted("both")},
                 max_parallel=2)  # fmt: skip
    result = rt.submit("the river", team=team).result(timeout=120)
    assert result.status == "succeeded", result.error
    left, right, joined = (next(s for s in result.subtasks if s.id == i)
                           for i in ("left.1", "right.1", "join.2"))  # fmt: skip
    # the two 2-second branches overlapped: each started before the other finished
    assert left.started_at < right.finished_at
    assert right.started_at < left.finished_at
    assert joined.started_at >= max(left.finished_at, right.finished_at)
    assert len(result.state["parts"]) == 2
    assert result.answer == "both"


def test_a_subgraph_node_runs_its_own_graph_on_ray(rt):
    team = _team("nested", NESTED, {"outer": _scripted("hello"), "inner": _scripted("HELLO")})
    result = rt.submit("say hello", team=team).result(timeout=120)
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["write.1", "loud.2.upper.1"]
    assert result.answer == "HELLO"


def test_a_killed_orchestrator_resumes_the_graph_without_running_a_finished_node_again(rt):
    """Nodes one and three have one scripted answer each: a second run of either fails the
    job (the count); node two is slow, so the kill lands while it runs."""
    team = _team("phoenix-graph", CHAIN, {
        "first": _scripted("ONE"), "middle": runtime.OfflineModel(latency_s=3.0),
        "last": _scripted("THREE"),
    })  # fmt: skip
    job = rt.submit("count", team=team)
    _wait_for(job, "graph_step", step=1)
    killed_at = time.time()
    kill_and_wait_for_restart(rt.client.handles.orchestrators.of(job.job_id))

    result = job.result(timeout=120)

    assert result.status == "succeeded", result.error
    by_id = {s.id: s for s in result.subtasks}
    assert sorted(by_id) == ["one.1", "three.3", "two.2"]
    assert by_id["one.1"].finished_at < killed_at  # from the journal, not run again
    assert by_id["three.3"].finished_at > killed_at
    assert result.state["log"][0] == "ONE"
    assert result.state["log"][-1] == "THREE"
    points = rt.job(job.job_id).checkpoints()
    assert [p.step for p in points] == [0, 1, 2, 3]


def test_an_interrupt_survives_an_orchestrator_kill_and_is_resumed_over_http(rt, api):
    """Each role has one scripted answer: neither node may run twice across the kill."""
    name = "paused-graph"
    team = _team(name, PAUSED, {"writer": _scripted("draft v1"), "editor": _scripted("v2")})
    job = rt.submit("a notice", team=team, tenant="acme")
    handle = rt.job(job.job_id)
    until_status(handle.status, "awaiting_input")
    kill_and_wait_for_restart(rt.client.handles.orchestrators.of(job.job_id))
    until_status(handle.status, "awaiting_input")  # resumed from its checkpoint, waiting again

    with api.client(USER_KEY) as client:
        listed = client.get(f"/v1/jobs/{job.job_id}/checkpoints")
        assert listed.status_code == 200, listed.text
        paused = listed.json()[-1]
        assert paused["interrupt"]["id"] == "2/publish/before"
        assert paused["state"] == {"text": "draft v1"}
        bad = client.post(f"/v1/jobs/{job.job_id}/resume", json={"state": {"text": 7}})
        assert bad.status_code in (400, 422), bad.text
        response = client.post(f"/v1/jobs/{job.job_id}/resume", json={"value": "approved"})
        assert response.status_code == 200, response.text
        again = client.post(f"/v1/jobs/{job.job_id}/resume", json={"value": "twice"})
        assert again.status_code == 409, again.text

    result = handle.result(timeout=120)
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "publish.2"]
    assert result.subtasks[-1].instructions == "Publish draft v1: approved"
    assert result.state == {"text": "v2", "verdict": "approved"}


def test_another_tenant_can_neither_see_nor_resume_a_paused_graph(rt, api):
    from tests.support.http_api import OTHER_KEY  # noqa: PLC0415

    team = _team("private-graph", PAUSED, {"writer": _scripted("mine"), "editor": _scripted("x")})
    job = rt.submit("secret", team=team, tenant="acme")
    handle = rt.job(job.job_id)
    until_status(handle.status, "awaiting_input")
    with api.client(OTHER_KEY) as client:
        assert client.get(f"/v1/jobs/{job.job_id}/checkpoints").status_code == 404
        response = client.post(f"/v1/jobs/{job.job_id}/resume", json={"value": "hijack"})
        assert response.status_code == 404
        forked = client.post(f"/v1/jobs/{job.job_id}/fork", json={"step": 1})
        assert forked.status_code == 404
    assert handle.status() == "awaiting_input"
    assert handle.cancel()


def test_a_fork_starts_from_a_checkpoint_with_an_edited_state(rt):
    team = _team("forked-graph", CHAIN, {
        "first": _scripted("ONE"), "middle": _scripted("TWO", "TWO again"),
        "last": _scripted("THREE", "THREE again"),
    })  # fmt: skip
    original = rt.submit("count", team=team)
    first = original.result(timeout=120)
    assert first.status == "succeeded", first.error

    fork = original.fork(1, state={"log": ["what if"]})
    forked = fork.result(timeout=120)

    assert forked.status == "succeeded", forked.error
    assert [s.id for s in forked.subtasks] == ["two.2", "three.3"]  # node one not run again
    assert forked.state["log"] == ["what if", "TWO again", "THREE again"]
    assert forked.subtasks[0].instructions == 'two: ["what if"]'
    assert first.state["log"] == ["ONE", "TWO", "THREE"]
    points = fork.checkpoints()
    assert points[0].step == 1
    assert points[0].state == {"log": ["what if"]}


def test_a_graph_step_limit_fails_typed_naming_the_node(rt):
    graph = {
        "start": "spin",
        "max_steps": 3,
        "state": {"json_schema": {"type": "object", "properties": {
            "n": {"type": "array", "items": {"type": "string"}}}}, "reducers": {"n": "append"}},
        "nodes": [{"id": "spin", "role": "w", "writes": ["n"], "instructions": "again"}],
        "edges": [{"source": "spin", "target": "spin"}],
    }  # fmt: skip
    team = _team("spinner", graph, {"w": _scripted("1", "2", "3")})
    with pytest.raises(JobFailed) as failed:
        rt.submit("spin", team=team).result(timeout=120)
    result = failed.value.detail["result"]
    assert result.status == "failed"
    assert result.error.code is ErrorCode.ITERATION_LIMIT
    assert result.error.detail["node"] == "spin"


def test_a_graph_jobs_input_is_its_first_state_and_bad_input_is_refused_at_the_door(rt):
    graph = {
        "start": "plan",
        "answer": "found",
        "state": {"json_schema": {"type": "object", "properties": {
            "topics": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            "found": {"type": "array", "items": {"type": "string"}}}},
            "reducers": {"found": "append"}},
        "nodes": [
            {"id": "plan", "role": "lead", "writes": [], "instructions": "Plan {task}"},
            {"id": "look", "role": "worker", "writes": ["found"], "instructions": "Look up {item}"},
        ],
        "edges": [{"source": "plan", "target": "look", "map": "topics"}],
    }  # fmt: skip
    team = _team("mapped", graph, {"lead": _scripted("ok"), "worker": runtime.OfflineModel()})
    with pytest.raises(InvalidInput, match="first state is invalid"):
        rt.submit("too many", team=team, input={"topics": ["a", "b", "c", "d", "e"]})
    result = rt.submit("ray", team=team, input={"topics": ["actors", "tasks"]}).result(timeout=120)
    assert result.status == "succeeded", result.error
    assert sorted(s.instructions for s in result.subtasks[1:]) == [
        "Look up actors",
        "Look up tasks",
    ]
    assert len(result.state["found"]) == 2


def test_the_example_graph_runs_offline_with_a_map_a_join_an_interrupt_and_a_fork(rt):
    """examples/graph_team.py's demo, on the session's Ray (the script starts its own)."""
    spec = importlib.util.spec_from_file_location("graph_team", "examples/graph_team.py")
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    said: list[str] = []
    example.demo(rt, said.append)
    assert said[:3] == [
        "paused at 3/report/before; findings so far:",
        "  - [source] Ray actors are stateful workers: each one keeps its state between calls.",
        "  - [source] Ray tasks are stateless functions scheduled on any node of the cluster.",
    ]
    assert "status: succeeded" in said
    assert [line for line in said if line.startswith("  step")] == [
        "  step 0: next research", "  step 1: next investigate, investigate",
        "  step 2: next report", "  step 3: next (end)"]  # fmt: skip
    assert said[-1] == (
        'findings: ["[source] Ray Serve exposes Python deployments over HTTP with autoscaling '
        'replicas."]'
    )


def test_a_tenant_may_not_name_another_jobs_budget_account_over_http(rt, api):
    """budget.account makes a job's model calls draw on another job's budget: the
    orchestrator sets it for a graph's child jobs, never a caller."""
    team = {"name": "thief", "agents": [{"name": "t0", "role": "r", "model": "default"}]}
    with api.client(USER_KEY) as client:
        response = client.post("/v1/jobs", json={
            "task": "spend", "team": team, "budget": {"tokens": 10, "account": "job-victim"},
        })  # fmt: skip
        assert response.status_code in (400, 422), response.text
        assert "orchestrator's to set" in response.text
