"""Planning: re-asking the planner once, plan size limits, output schemas, declarative plans."""

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError
from wiring import Tap, build_troupe, run

from raytroupe.actors.orchestrator.plan_checks import declared_plan
from raytroupe.actors.orchestrator.planner import make_plan, parse_plan, plan_request, reask_request
from raytroupe.protocols import (
    AgentSpec,
    ConfigError,
    ErrorCode,
    LLMRequest,
    LLMResponse,
    PlanError,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TaskRequest,
    TeamSpec,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.job_order import JobOrder
from raytroupe.protocols.prompts import plan_schema
from raytroupe.runtime import Team
from tests.support.inline import written

PIPELINE = Path(__file__).parents[2] / "examples" / "teams" / "pipeline.yaml"

GOOD_PLAN = json.dumps(
    {
        "subtasks": [
            {"id": "s1", "role": "researcher", "instructions": "Find the fact"},
            {"id": "s2", "role": "writer", "instructions": "Write it up", "depends_on": ["s1"]},
        ]
    }
)
CYCLIC_PLAN = json.dumps(
    {
        "subtasks": [
            {"id": "a", "role": "researcher", "instructions": "x", "depends_on": ["b"]},
            {"id": "b", "role": "researcher", "instructions": "y", "depends_on": ["a"]},
        ]
    }
)


def scripted(*texts: str) -> ScriptedModel:
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def two_roles(planner: ScriptedModel | None = None, **fields) -> TeamSpec:
    """A researcher (model ``r``) and a writer (model ``w``), planned by ``planner``.

    Planned by the model (``planning="model"``) unless told otherwise: these tests are the
    planner model's (a declared plan is used whatever ``planning`` says).
    """
    fields.setdefault("planning", "model")
    models = {"r": scripted("fact: 42"), "w": scripted("report on 42")}
    if planner is not None:
        models["planner"] = planner
        fields.setdefault("planner_model", "planner")
    return TeamSpec(
        agents=(
            AgentSpec(name="rita", role="researcher", model="r"),
            AgentSpec(name="wendy", role="writer", model="w"),
        ),
        models=models,
        **fields,
    )


def subtasks(n: int, role: str = "researcher") -> str:
    return json.dumps(
        {"subtasks": [{"id": f"s{i}", "role": role, "instructions": "do"} for i in range(n)]}
    )


def plan_requests(troupe) -> list[LLMRequest]:
    return [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "plan"]


def tapped_agents(taps: dict[str, Tap]):
    def wrap(name, agent):
        taps[written(name)] = Tap(agent)  # by the name the team wrote
        return taps[written(name)]

    return wrap


# -- re-asking the planner ------------------------------------------------------------------


def test_a_bad_answer_is_re_asked_once_with_its_errors_and_the_second_answer_is_used():
    async def main():
        troupe = await build_troupe()
        bad = '{"subtasks": [{"id": "s1", "role": "ghost"}]}'
        team = two_roles(scripted(bad, GOOD_PLAN, "final answer"))
        result = await troupe.run("Research and write", team)
        assert result.status == "succeeded", result.error
        assert [s.id for s in result.subtasks] == ["s1", "s2"]
        assert result.answer == "final answer"
        assert result.usage.calls == 2 + 2 + 1  # two plan requests, two subtasks, aggregate
        first, second = plan_requests(troupe)
        assert second.messages[: len(first.messages)] == first.messages
        answered, errors = second.messages[len(first.messages) :]
        assert (answered.role, answered.content) == ("assistant", bad)
        assert errors.role == "user"
        assert "subtasks.0.instructions: Field required" in errors.text
        assert "subtasks.0.role: role 'ghost' is not a role of the team" in errors.text
        assert second.response_format == first.response_format
        assert (second.model, second.purpose) == ("planner", "plan")
        await troupe.pool.remove("planner")  # every scripted turn was played

    run(main())


def test_an_answer_that_is_not_json_is_re_asked_with_the_decode_error():
    async def main():
        troupe = await build_troupe()
        team = two_roles(scripted("Sure! Here is my plan.", GOOD_PLAN, "final answer"))
        result = await troupe.run("Research and write", team)
        assert result.status == "succeeded", result.error
        _, second = plan_requests(troupe)
        assert second.messages[-2].content == "Sure! Here is my plan."
        assert (
            "- the answer is not JSON: Expecting value: line 1 column 1" in second.messages[-1].text
        )

    run(main())


GHOST_PLAN = json.dumps({"subtasks": [{"id": "a", "role": "ghost", "instructions": "x"}]})
GHOST_ERROR = "subtask 'a': role 'ghost' is not a role of the team (researcher, writer)"


def test_two_bad_answers_fail_the_job_with_plan_and_both_attempts_errors_without_fallback():
    async def main():
        troupe = await build_troupe()
        team = two_roles(scripted("not a plan", GHOST_PLAN), plan_fallback=False)
        result = await troupe.run("anything", team)
        assert (result.status, result.error.code) == ("failed", ErrorCode.PLAN)
        assert result.subtasks == ()
        message = result.error.message
        assert "2 attempt(s)" in message
        assert "attempt 1: the answer is not JSON" in message
        assert f"attempt 2: {GHOST_ERROR}" in message
        first, second = result.error.detail["attempts"]
        assert first["answer"] == "not a plan"
        assert first["errors"][0].startswith("the answer is not JSON")
        assert second == {"errors": [GHOST_ERROR], "answer": GHOST_PLAN}
        assert len(plan_requests(troupe)) == 2
        events = await troupe.orchestrator.events(result.job_id)
        assert [e.type for e in events] == ["job_submitted", "job_failed"]

    run(main())


def test_two_bad_answers_leave_the_whole_task_to_one_agent_recorded_on_the_result():
    async def main():
        troupe = await build_troupe()
        team = two_roles(scripted("not a plan", GHOST_PLAN, "The answer is 42."))
        result = await troupe.run("What is the answer?", team)
        assert result.status == "succeeded", result.error
        (whole,) = result.subtasks
        assert (whole.id, whole.role, whole.agent, whole.output) == (
            "whole-task", "researcher", "rita", "fact: 42")  # fmt: skip
        assert whole.instructions == "What is the answer?"
        assert result.answer == "The answer is 42."
        (span,) = [s for s in result.trace if s.kind == "plan"]
        assert span.attributes["fallback"].startswith("the planner gave no valid plan in 2")
        assert GHOST_ERROR in span.attributes["fallback"]
        events = await troupe.orchestrator.events(result.job_id)
        (ready,) = [e for e in events if e.type == "plan_ready"]
        assert ready.data["fallback"] == span.attributes["fallback"]

    run(main())


def test_a_cyclic_plan_is_repaired_without_asking_again():
    async def main():
        troupe = await build_troupe()
        cyclic = json.dumps({"subtasks": [
            {"id": "a", "role": "researcher", "instructions": "x", "depends_on": ["b"]},
            {"id": "b", "role": "writer", "instructions": "y", "depends_on": ["a"]},
        ]})  # fmt: skip
        team = two_roles(scripted(cyclic, "done"))
        result = await troupe.run("anything", team)
        assert result.status == "succeeded", result.error
        assert len(plan_requests(troupe)) == 1
        assert {s.id: s.depends_on for s in result.subtasks} == {"a": ("b",), "b": ()}
        (span,) = [s for s in result.trace if s.kind == "plan"]
        assert span.attributes["repairs"] == "subtask 'b': dropped its dependency on 'a' (a cycle)"

    run(main())


def test_a_failing_re_ask_still_fails_the_job_with_plan_and_the_first_errors():
    async def main():
        troupe = await build_troupe()
        team = two_roles(scripted("not a plan"))  # no second turn: the re-ask raises ScriptError
        result = await troupe.run("anything", team)
        assert (result.status, result.error.code) == ("failed", ErrorCode.PLAN)
        assert "attempt 1: the answer is not JSON" in result.error.message
        assert "asking again failed (script)" in result.error.message
        assert result.error.detail["reask_error"]["code"] == "script"
        assert len(result.error.detail["attempts"]) == 1

    run(main())


def test_make_plan_asks_once_when_the_first_answer_is_good():
    asked: list[LLMRequest] = []

    async def ask(request: LLMRequest) -> LLMResponse:
        asked.append(request)
        return LLMResponse(text=GOOD_PLAN, model=request.model, provider="test")

    plan = run(make_plan(JobContext(request="task"), two_roles(), ask))
    assert [s.id for s in plan.subtasks] == ["s1", "s2"]
    assert asked == [plan_request("task", two_roles())]


def test_reask_request_lists_every_error_and_keeps_an_empty_answer_visible():
    request = plan_request("task", two_roles())
    error = PlanError("bad", errors=["first problem", "second problem"])
    again = reask_request(request, "  ", error)
    assert again.messages[-2].content == "(empty)"
    assert "- first problem\n- second problem" in again.messages[-1].text


def test_a_fenced_json_answer_is_read():
    plan = parse_plan(f"```json\n{GOOD_PLAN}\n```", two_roles())
    assert [s.id for s in plan.subtasks] == ["s1", "s2"]


# -- size limits ----------------------------------------------------------------------------


def test_a_plan_over_max_subtasks_keeps_its_first_subtasks():
    team = two_roles(max_subtasks=3)
    assert parse_plan(subtasks(3), team).repairs == ()
    plan = parse_plan(subtasks(4), team)
    assert [s.id for s in plan.subtasks] == ["s0", "s1", "s2"]
    assert plan.repairs == ("kept the first 3 of 4 subtasks (the team's limit)",)


def test_an_oversized_plan_that_is_also_malformed_is_cut_and_its_problems_reported():
    answer = json.dumps({"subtasks": [{"id": f"s{i}", "role": "ghost"} for i in range(3)]})
    with pytest.raises(PlanError) as caught:
        parse_plan(answer, two_roles(max_subtasks=2))
    errors = caught.value.detail["errors"]
    assert not any("at most 2 are allowed" in e for e in errors)
    assert sum("role 'ghost'" in e for e in errors) == 2
    assert sum("instructions: Field required" in e for e in errors) == 2


def test_a_job_whose_plan_is_too_large_runs_its_first_subtasks():
    async def main():
        troupe = await build_troupe()
        team = two_roles(scripted(subtasks(5), "done"), max_subtasks=1)
        result = await troupe.run("anything", team)
        assert result.status == "succeeded", result.error
        assert [s.id for s in result.subtasks] == ["s0"]
        [request] = plan_requests(troupe)
        assert request.response_format["properties"]["subtasks"]["maxItems"] == 1
        assert "at most 1 subtasks" in request.messages[0].text

    run(main())


@pytest.mark.parametrize("limit", [0, 1025])
def test_max_subtasks_is_bounded(limit):
    with pytest.raises(ValueError, match="max_subtasks"):
        two_roles(max_subtasks=limit)


def test_the_default_limit_is_32():
    team = two_roles()
    assert team.max_subtasks == 32
    assert len(parse_plan(subtasks(32), team).subtasks) == 32
    assert len(parse_plan(subtasks(33), team).subtasks) == 32


# -- output schemas -------------------------------------------------------------------------


def test_an_output_schema_is_carried_in_the_plan():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    answer = json.dumps(
        {"subtasks": [{"id": "s1", "role": "writer", "instructions": "x", "output_schema": schema}]}
    )
    [subtask] = parse_plan(answer, two_roles()).subtasks
    assert subtask.output_schema == schema


def test_an_invalid_output_schema_in_a_plan_is_a_plan_error():
    answer = json.dumps(
        {
            "subtasks": [
                {"id": "s1", "role": "writer", "instructions": "x", "output_schema": {"type": 5}}
            ]
        }
    )
    with pytest.raises(PlanError) as caught:
        parse_plan(answer, two_roles())
    [error] = caught.value.detail["errors"]
    assert error.startswith("subtasks.0.output_schema: output_schema is not a valid JSON Schema")


def test_plan_schema_allows_an_optional_output_schema_and_limits_size():
    schema = plan_schema({"writer": "writes"}, max_subtasks=2)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    item = {"id": "s1", "role": "writer", "instructions": "x"}
    assert validator.is_valid({"subtasks": [item]})
    assert validator.is_valid({"subtasks": [item | {"output_schema": {"type": "string"}}]})
    assert not validator.is_valid({"subtasks": [item | {"output_schema": "string"}]})
    assert not validator.is_valid({"subtasks": [item, item, item]})


# -- declarative plans ----------------------------------------------------------------------


def declared_team(*steps: PlannedSubtask) -> TeamSpec:
    return two_roles(plan=steps)


RESEARCH = PlannedSubtask(id="s1", role="researcher", instructions="Find facts for: {task}")
WRITE = PlannedSubtask(
    id="s2", role="writer", instructions="Write up {task} from s1", depends_on=("s1",)
)


def test_a_declarative_plan_runs_without_asking_the_planner():
    async def main():
        taps: dict[str, Tap] = {}
        troupe = await build_troupe(wrap=tapped_agents(taps))
        result = await troupe.run("the answer to everything", declared_team(RESEARCH, WRITE))
        assert result.status == "succeeded", result.error
        assert plan_requests(troupe) == []
        assert [r.purpose for r in troupe.llm.payloads(LLMRequest)] == [
            "work",
            "work",
            "aggregate",
        ]
        [research] = taps["rita"].payloads(TaskRequest)
        assert research.instructions == "Find facts for: the answer to everything"
        assert result.subtasks[1].instructions == "Write up the answer to everything from s1"
        events = await troupe.orchestrator.events(result.job_id)
        [ready] = [e for e in events if e.type == "plan_ready"]
        assert ready.data["subtasks"][0]["instructions"] == research.instructions

    run(main())


def test_declarative_dependencies_run_in_order_with_inputs_passed():
    async def main():
        taps: dict[str, Tap] = {}
        troupe = await build_troupe(wrap=tapped_agents(taps))
        result = await troupe.run("Research and write", declared_team(WRITE, RESEARCH))
        assert result.status == "succeeded", result.error
        by_id = {s.id: s for s in result.subtasks}
        assert by_id["s1"].finished_at <= by_id["s2"].started_at
        [request] = taps["wendy"].payloads(TaskRequest)
        assert request.inputs == {"s1": "fact: 42"}
        assert by_id["s2"].output == "report on 42"

    run(main())


INVALID_PLANS = [
    ((RESEARCH.model_copy(update={"role": "ghost"}),), "role 'ghost'"),
    ((RESEARCH.model_copy(update={"depends_on": ("s2",)}), WRITE), "dependency cycle among"),
    ((RESEARCH, RESEARCH), "subtask ids are not unique"),
    ((), "at least 1 item"),
]


@pytest.mark.parametrize(("steps", "problem"), INVALID_PLANS)
def test_an_invalid_declarative_plan_is_refused_when_the_team_is_made(steps, problem):
    with pytest.raises(ValidationError, match=re.escape(problem)):
        two_roles(plan=steps)


@pytest.mark.parametrize(("steps", "problem"), INVALID_PLANS)
def test_an_invalid_declarative_plan_that_got_past_the_door_fails_the_job_with_plan(steps, problem):
    """A team built without validation (``model_construct``) is still checked at run time."""

    async def main():
        troupe = await build_troupe()
        valid = two_roles()
        team = TeamSpec.model_construct(**{**dict(valid), "plan": steps, "models": {}})
        order = JobOrder.model_construct(task="anything", team=team)  # unchecked, as the team
        job_id = await troupe.desk.submit(order)
        result = await troupe.orchestrator.wait(job_id, 10)
        assert (result.status, result.error.code) == ("failed", ErrorCode.PLAN)
        assert problem in result.error.message
        assert result.error.message.startswith("the team's declared plan is invalid")
        assert plan_requests(troupe) == []

    run(main())


def test_a_declarative_plan_over_max_subtasks_is_rejected():
    team = declared_team(RESEARCH, WRITE).model_copy(update={"max_subtasks": 1})
    with pytest.raises(PlanError) as caught:
        declared_plan("t", team)
    assert caught.value.detail["errors"] == ["the plan has 2 subtasks; at most 1 are allowed"]


def test_an_invalid_output_schema_in_a_declarative_plan_is_a_plan_error():
    broken = RESEARCH.model_copy(update={"output_schema": {"type": "no-such-type"}})
    with pytest.raises(PlanError) as caught:
        declared_plan("t", declared_team(broken))
    [error] = caught.value.detail["errors"]
    assert "subtasks.0.output_schema: output_schema is not a valid JSON Schema" in error


def test_an_invalid_output_schema_in_a_team_file_is_a_config_error():
    data = {
        "agents": [{"name": "ada", "role": "researcher"}],
        "plan": [
            {"id": "s1", "role": "researcher", "instructions": "x", "output_schema": {"type": 5}}
        ],
    }
    with pytest.raises(ConfigError, match="output_schema is not a valid JSON Schema"):
        Team.from_dict(data)


def test_a_team_without_a_plan_has_no_declared_plan():
    assert declared_plan("t", two_roles()) is None


# -- the example pipeline -------------------------------------------------------------------


def test_the_pipeline_example_loads_and_its_plan_is_valid():
    team = Team.from_yaml(PIPELINE)
    assert team.name == "pipeline"
    assert {a.model for a in team.agents} == {"offline"}
    plan = declared_plan("Explain Ray actors.", team.spec())
    assert plan is not None
    assert [(s.id, s.role, s.depends_on) for s in plan.subtasks] == [
        ("research", "researcher", ()),
        ("draft", "drafter", ("research",)),
        ("review", "reviewer", ("draft",)),
    ]
    assert "Explain Ray actors." in plan.subtasks[0].instructions


def test_the_pipeline_example_runs_step_by_step_offline():
    async def main():
        taps: dict[str, Tap] = {}
        troupe = await build_troupe(wrap=tapped_agents(taps))
        task = "Ray actors are stateful workers. Each actor lives in its own process."
        result = await troupe.run(task, Team.from_yaml(PIPELINE).spec())
        assert result.status == "succeeded", result.error
        assert plan_requests(troupe) == []
        research, draft, review = result.subtasks
        assert research.finished_at <= draft.started_at
        assert draft.finished_at <= review.started_at
        [drafting] = taps["dora"].payloads(TaskRequest)
        assert drafting.inputs == {"research": research.output}
        [reviewing] = taps["rex"].payloads(TaskRequest)
        assert reviewing.inputs == {"draft": draft.output}

    run(main())
