"""Orchestration features on a real Ray: patterns, re-asked plans, gate, resolution, limits."""

from __future__ import annotations

import uuid

import pytest

from raytroupe import runtime
from raytroupe.protocols import (
    ErrorCode,
    GraphEdge,
    GraphNode,
    GraphSpec,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    ToolCall,
)

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

ROOT_TEAMS = "examples/teams"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _script(*turns: ScriptedTurn) -> ScriptedModel:
    return ScriptedModel(turns=turns)


def _says(*texts: str) -> ScriptedModel:
    return _script(*(ScriptedTurn(text=t) for t in texts))


def _agent(name: str, role: str, model: str, **fields) -> runtime.AgentSpec:
    return runtime.AgentSpec(
        name=name, role=role, model=model, memory=runtime.MemoryPolicy(recall=False), **fields
    )


def test_the_pipeline_example_runs_in_order(rt):
    team = runtime.Team.from_yaml(f"{ROOT_TEAMS}/pipeline.yaml")
    result = rt.submit("Ray actors keep state. Explain Ray actors.", team=team).result(60)
    assert [s.id for s in result.subtasks] == [s.id for s in team.plan]
    assert result.status == "succeeded"
    assert all(s.status == "succeeded" for s in result.subtasks)
    starts = [s.started_at for s in result.subtasks]
    assert starts == sorted(starts)  # each step waited for the one before


def test_an_invalid_plan_is_asked_again_with_its_errors(rt):
    good = '{"subtasks": [{"id": "s1", "role": "worker", "instructions": "Say ok."}]}'
    planner = _name("planner")
    team = runtime.Team(
        name=_name("reask"),
        planning="model",  # the planner model's plan, asked for again
        planner_model=planner,
        models={planner: _says("not json at all", good, "all done")},
        agents=[_agent(_name("w"), "worker", "offline")],
    )
    result = rt.submit("Say ok.", team=team).result(60)
    assert result.status == "succeeded", result.error
    assert [s.instructions for s in result.subtasks] == ["Say ok."]


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
}


def test_redundant_answers_are_resolved_by_majority(rt):
    models = {
        "red-a": _says('{"answer": 42}'),
        "red-b": _says('{"answer": 42.0}'),
        "red-c": _says('{"answer": 41}'),
    }
    step = PlannedSubtask(
        id="s1",
        role="solver",
        instructions="Answer as JSON.",
        output_schema=SCHEMA,
        redundancy=3,
        strategy="majority",
    )
    team = runtime.Team(
        name=_name("redundant"),
        planner_model="offline",
        models=models,
        plan=[step],
        agents=[_agent(_name(m), "solver", m) for m in models],
    )
    result = rt.submit("What is six times seven?", team=team).result(60)
    (sub,) = result.subtasks
    assert result.status == "succeeded", result.error
    assert sub.output in {'{"answer": 42}', '{"answer": 42.0}'}
    assert sub.resolution.votes == {"answer 42": 2, "answer 41": 1}
    assert len({c.agent for c in sub.resolution.candidates}) == 3


def test_the_gate_sends_a_bad_output_back(rt):
    model = _name("gated")
    step = PlannedSubtask(
        id="s1", role="solver", instructions="Answer as JSON.", output_schema=SCHEMA
    )
    team = runtime.Team(
        name=_name("gate"),
        planner_model="offline",
        models={model: _says("forty-two", '{"answer": 42}')},
        plan=[step],
        agents=[_agent(_name("solver"), "solver", model)],
    )
    (sub,) = rt.submit("What is six times seven?", team=team).result(60).subtasks
    assert (sub.output, sub.gate_retries) == ('{"answer": 42}', 1)


def test_an_agent_repeating_a_tool_call_is_stopped(rt):
    same = ToolCall(call_id="c", tool="calculator", arguments={"expression": "1+1"})
    model = _name("repeat")
    team = runtime.Team(
        name=_name("stuck"),
        planner_model="offline",
        # the third call is not run; asked for its answer, the model calls a fourth time
        models={model: _script(*(ScriptedTurn(tool_calls=(same,)) for _ in range(4)))},
        agents=[
            _agent(
                _name("looper"), "worker", model, tools=["calculator"], max_repeated_tool_calls=3
            )
        ],
    )
    job = rt.submit("Add.", team=team)
    try:
        job.result(60)
    except runtime.JobFailed as exc:
        (sub,) = exc.detail["result"].subtasks
    assert sub.stop_reason == "repeated_tool_call"
    assert sub.error.code is ErrorCode.REPEATED_TOOL_CALL
    assert sub.tool_calls == 2  # the third identical call was not run


def test_handoff_and_manager_patterns(rt):
    boss, helper = _name("boss"), _name("helper")
    handoff = ToolCall(
        call_id="h", tool="handoff", arguments={"agent": helper, "instructions": "Finish this."}
    )
    delegate = ToolCall(
        call_id="d", tool="delegate", arguments={"agent": helper, "instructions": "Help me."}
    )
    models = {
        f"{boss}-m": _script(
            ScriptedTurn(tool_calls=(delegate,)),
            ScriptedTurn(text="merged"),
            ScriptedTurn(tool_calls=(handoff,)),
        ),
        f"{helper}-m": _says("helped", "finished by the helper"),
    }
    team = runtime.Team(
        name=_name("patterns"),
        planner_model="offline",
        models=models,
        plan=[PlannedSubtask(id="s1", role="lead", instructions="{task}")],
        agents=[
            _agent(boss, "lead", f"{boss}-m", tools=["delegate", "handoff"]),
            _agent(helper, "aide", f"{helper}-m"),
        ],
    )
    managed = rt.submit("Manage it.", team=team).result(60)
    assert (managed.subtasks[0].output, managed.subtasks[0].tool_calls) == ("merged", 1)
    handed = rt.submit("Hand it off.", team=team).result(60)
    (sub,) = handed.subtasks
    assert (sub.output, sub.stop_reason) == ("finished by the helper", "handoff")


def test_a_graph_loops_on_ray_until_approved(rt):
    graph = GraphSpec(
        start="draft",
        max_steps=6,
        nodes=(
            GraphNode(id="draft", role="writer", instructions="Draft: {task}"),
            GraphNode(id="review", role="reviewer", instructions="Review it."),
        ),
        edges=(
            GraphEdge(source="draft", target="review"),
            GraphEdge(source="review", target="draft", when="^revise"),
            GraphEdge(source="review", target="end"),
        ),
    )
    writer, reviewer = _name("writer"), _name("reviewer")
    team = runtime.Team(
        name=_name("graph"),
        planner_model="offline",
        models={writer: _says("v1", "v2"), reviewer: _says("revise: longer", "approved")},
        graph=graph,
        agents=[_agent(writer, "writer", writer), _agent(reviewer, "reviewer", reviewer)],
    )
    result = rt.submit("a poem", team=team).result(60)
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "review.2", "draft.3", "review.4"]
    assert result.answer == "approved"


def test_a_job_without_a_team_is_routed_on_ray_with_minilm(rt):
    teams = {
        "billing": runtime.Team(
            name=_name("billing"), agents=[_agent(_name("payer"), "clerk", "offline")]
        ),
        "engineering": runtime.Team(
            name=_name("eng"), agents=[_agent(_name("fixer"), "dev", "offline")]
        ),
    }
    routing = runtime.IntentConfig(
        targets={
            "billing": "billing: invoices, refunds, payments",
            "engineering": "engineering: bugs, outages, deployments",
        },
    )
    job = rt.submit("I was billed twice this month", teams=teams, intent=routing)
    result = job.result(60)
    assert (result.route.target, result.route.method) == ("billing", "similarity")
    assert result.team == teams["billing"].name


def test_a_subtask_deadline_on_ray(rt):
    slow = _name("slow")
    team = runtime.Team(
        name=_name("deadline"),
        planner_model="offline",
        subtask_timeout_s=0.3,
        models={slow: runtime.OfflineModel(latency_s=30.0)},
        agents=[_agent(_name("sleeper"), "worker", slow)],
    )
    job = rt.submit("Say something.", team=team)
    try:
        job.result(60)
    except runtime.JobFailed as exc:
        (sub,) = exc.detail["result"].subtasks
    assert sub.error.code is ErrorCode.DEADLINE_EXCEEDED
    assert sub.attempt == 3
