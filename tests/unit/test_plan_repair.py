"""What small models write, made usable: plan repair, the last-resort plan, the wanted shape."""

import json

import pytest
from wiring import run

from raytroupe.actors.orchestrator.plan_repair import repair_plan
from raytroupe.actors.orchestrator.planner import make_plan, parse_plan
from raytroupe.protocols import LLMResponse, ModelError, Plan, PlanError, TeamSpec, Usage
from raytroupe.protocols.job_context import JobContext


def _team(*roles, **fields):
    """A team of ``roles`` whose jobs the planner model plans (what these tests repair)."""
    agents = [{"name": f"a{k}", "role": role} for k, role in enumerate(roles)]
    return TeamSpec.model_validate({"name": "t", "agents": agents, "planning": "model", **fields})


def _sub(sid, role="writer", deps=(), **fields):
    return {"id": sid, "role": role, "instructions": f"do {sid}", "depends_on": list(deps)} | fields


def _deps(plan):
    return {s.id: s.depends_on for s in plan.subtasks}


def test_a_dependency_cycle_is_broken_without_asking_again():
    """The 0.5B model's failure in the issue: a cycle. Walking in order, depth first, the
    edge that closes it is dropped; the same answer always gives the same plan."""
    team = _team("writer")
    answer = json.dumps({"subtasks": [_sub("a", deps=["c"]), _sub("b", deps=["a"]),
                                      _sub("c", deps=["b"])]})  # fmt: skip
    plan = parse_plan(answer, team)
    assert _deps(plan) == {"a": ("c",), "b": (), "c": ("b",)}  # a -> c -> b -> (a): cut there
    assert plan.repairs == ("subtask 'b': dropped its dependency on 'a' (a cycle)",)
    assert parse_plan(answer, team) == plan


def test_unknown_and_self_dependencies_are_dropped():
    team = _team("writer")
    answer = json.dumps([_sub("a", deps=["a", "ghost"]), _sub("b", deps="a")])
    plan = parse_plan(answer, team)
    assert _deps(plan) == {"a": (), "b": ("a",)}
    assert plan.repairs == (
        "took the answer's list as the plan's subtasks",
        "subtask 'a': dropped its dependency on itself",
        "subtask 'a': dropped 'ghost', which is no subtask",
    )


def test_ids_and_roles_are_fixed_only_where_they_can_mean_one_thing():
    team = _team("writer", "analyst")
    answer = json.dumps({"subtasks": [
        {"role": " Writer ", "instructions": "one"},
        {"id": "s1", "role": "ANALYST", "instructions": "two"},
        {"id": "s1", "role": "writer", "instructions": "three", "depends_on": ["s1"]},
    ]})  # fmt: skip
    plan = parse_plan(answer, team)
    assert [(s.id, s.role) for s in plan.subtasks] == [
        ("s1", "writer"), ("s1-2", "analyst"), ("s1-3", "writer")]  # fmt: skip
    assert "subtask 1 had no id: named it 's1'" in plan.repairs
    assert "subtask 3 repeated the id 's1': renamed it 's1-3'" in plan.repairs
    assert _deps(plan)["s1-3"] == ("s1",)
    # an unknown role in a team of several cannot be guessed: the planner is told exactly
    with pytest.raises(PlanError) as caught:
        parse_plan(json.dumps([_sub("a", role="poet")]), team)
    assert caught.value.detail["errors"] == [
        "subtask 'a': role 'poet' is not a role of the team (writer, analyst)"
    ]
    # with one role there is nothing else it could mean
    assert parse_plan(json.dumps([_sub("a", role="poet")]), _team("writer")).subtasks[0].role == (
        "writer"
    )


def test_a_plan_too_long_keeps_its_first_subtasks_and_the_model_cannot_write_our_notes():
    team = _team("writer", max_subtasks=2)
    answer = {"subtasks": [_sub("a"), _sub("b", deps=["c"]), _sub("c")],
              "fallback": "injected", "repairs": ["injected"]}  # fmt: skip
    plan = parse_plan(json.dumps(answer), team)
    assert [s.id for s in plan.subtasks] == ["a", "b"]
    assert _deps(plan)["b"] == ()
    assert plan.fallback is None
    assert plan.repairs == (
        "kept the first 2 of 3 subtasks (the team's limit)",
        "subtask 'b': dropped 'c', which is no subtask",
    )


def test_a_long_cycle_is_broken_without_recursion():
    n = 1024
    chain = [_sub(f"s{i}", deps=[f"s{(i + 1) % n}"]) for i in range(n)]
    data, repairs = repair_plan({"subtasks": chain}, _team("writer", max_subtasks=n))
    assert repairs == [f"subtask 's{n - 1}': dropped its dependency on 's0' (a cycle)"]
    Plan.model_validate(data)  # a DAG


class _Planner:
    """A planner model answering from a list (ModelError instances are raised)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, request):
        self.asked.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return LLMResponse(text=answer, model="m", provider="test", usage=Usage(calls=1))


def test_two_unusable_answers_end_in_one_agent_taking_the_whole_task():
    team = _team("writer", "analyst")
    planner = _Planner("not json", '{"subtasks": [{"id": "x", "role": "poet"}]}')
    plan = run(make_plan(JobContext(request="Write the report."), team, planner))
    (whole,) = plan.subtasks
    assert (whole.id, whole.role, whole.instructions) == ("whole-task", "writer",
                                                          "Write the report.")  # fmt: skip
    assert plan.fallback.startswith("the planner gave no valid plan in 2 attempt(s)")
    assert len(planner.asked) == 2
    strict = team.model_copy(update={"plan_fallback": False})
    with pytest.raises(PlanError, match="no valid plan in 2 attempt"):
        run(make_plan(JobContext(request="Write the report."), strict, _Planner("no", "still no")))
    # a model that fails is not a malformed plan: the job fails with the model's error
    with pytest.raises(PlanError, match="asking again failed"):
        run(
            make_plan(
                JobContext(request="Write the report."), team, _Planner("no", ModelError("down"))
            )
        )


@pytest.mark.parametrize(
    ("schema", "example"),
    [
        ({"type": "number"}, "0"),
        ({"type": "integer", "minimum": 3}, "3"),
        ({"type": "object", "properties": {"total": {"type": "number"},
          "currency": {"enum": ["EUR", "USD"]}}, "required": ["total", "currency"]},
         '{"total": 0, "currency": "EUR"}'),
        ({"type": "array", "items": {"type": "string"}, "minItems": 2}, '["...", "..."]'),
        ({"$defs": {"n": {"type": "boolean"}}, "type": "object",
          "properties": {"ok": {"$ref": "#/$defs/n"}}}, '{"ok": true}'),
        ({"type": "string", "pattern": "^[0-9]+$"}, None),  # no example it accepts: none shown
    ],
)  # fmt: skip
def test_a_rejected_output_is_shown_the_exact_shape_wanted(schema, example):
    """A small model answered prose where a number was wanted (the issue's arithmetic case):
    the gate's feedback now carries an answer of the wanted shape, checked against the schema."""
    from raytroupe.actors.answer_gate import gate_feedback, schema_example  # noqa: PLC0415

    assert schema_example(schema) == example
    feedback = gate_feedback(["not JSON"], schema=schema)
    if example is None:
        assert "this shape" not in feedback
    else:
        assert f"nothing before or after it:\n{example}\n" in feedback


def test_the_planner_is_told_when_an_output_schema_is_wanted():
    from raytroupe.actors.orchestrator.planner import plan_request  # noqa: PLC0415

    system = plan_request("What is 17 * 23 + 4?", _team("writer")).messages[0].text
    assert "only when a program or a later subtask must read the output as data" in system
