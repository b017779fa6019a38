"""Jobs sized by their text: the plan, the role each part goes to, the answer assembled."""

import asyncio
import json

from raytroupe.actors.orchestrator.planner import aggregate, make_plan
from raytroupe.actors.orchestrator.sizing import (
    assembled,
    needed_tools,
    role_for,
    sized_plan,
    tool_repairs,
)
from raytroupe.protocols import (
    AgentSpec,
    LLMRequest,
    LLMResponse,
    Plan,
    PlannedSubtask,
    SubtaskResult,
    TeamSpec,
    Usage,
)
from raytroupe.protocols.job_context import History, JobContext, Turn


def team(**fields) -> TeamSpec:
    """An analyst with the calculator first, then researchers and writers with no tools."""
    agents = (
        AgentSpec(name="alan", role="analyst", tools=("calculator",)),
        AgentSpec(name="ada", role="researcher"),
        AgentSpec(name="wendy", role="writer"),
    )
    return TeamSpec(**{"name": "t", "agents": agents, **fields})


def plain_team() -> TeamSpec:
    agents = (AgentSpec(name="ada", role="researcher"), AgentSpec(name="wendy", role="writer"))
    return TeamSpec(name="p", agents=agents)


QUESTIONS = (
    "Notes: a pen costs 3 dollars. Ray began at Berkeley.\n"
    "1. What is 14 * 3?\n"
    "2. Where did Ray begin?\n"
    "3. What is the total cost of 5 pens at 3 dollars each?"
)


def asked_for(task: str) -> JobContext:
    """The context of a job asked ``task``, with nothing beside it."""
    return JobContext(request=task)


def result(sid: str, output: str, status: str = "succeeded") -> SubtaskResult:
    return SubtaskResult(id=sid, role="researcher", instructions="x", status=status, output=output)


# -- sized_plan -----------------------------------------------------------------------------


def test_a_task_of_one_part_is_one_subtask_on_the_first_role_without_tools():
    plan = sized_plan(asked_for("Describe the Eiffel Tower."), team())
    (only,) = plan.subtasks
    assert (only.id, only.role, only.instructions) == (
        "s1",
        "researcher",
        "Describe the Eiffel Tower.",
    )
    assert only.context is None  # the job's task is its context: said once
    assert plan.sizing == "one"
    assert (plan.fallback, plan.repairs) == (None, ())


def test_a_task_of_one_part_that_needs_arithmetic_goes_to_the_calculator_role():
    (only,) = sized_plan(asked_for("What is 17 * 23 + 4?"), team()).subtasks
    assert only.role == "analyst"


def test_work_needing_no_tool_goes_to_the_first_role_when_every_role_has_tools():
    agents = (AgentSpec(name="c", role="calc", tools=("calculator",)),
              AgentSpec(name="d", role="calc2", tools=("calculator",)))  # fmt: skip
    tooled = TeamSpec(name="x", agents=agents)
    assert sized_plan(asked_for("Describe the tower."), tooled).subtasks[0].role == "calc"


def test_arithmetic_in_a_team_without_the_calculator_goes_to_its_first_role():
    assert needed_tools("What is 17 * 23?", plain_team()) == frozenset()
    assert role_for("What is 17 * 23?", plain_team()) == "researcher"


def test_the_history_beside_a_task_of_one_part_does_not_route_it_to_the_calculator():
    earlier = History(
        turns=(
            Turn(role="user", text="What is 17 * 23?"),
            Turn(role="assistant", text="391"),
        )
    )
    context = JobContext(request="Write a haiku about autumn.", history=earlier)
    (only,) = sized_plan(context, team()).subtasks
    assert (only.role, only.instructions) == ("researcher", "Write a haiku about autumn.")
    assert only.context is None  # its agent is given the whole context, the history in it


def test_listed_questions_are_one_subtask_each_routed_by_what_each_needs():
    plan = sized_plan(asked_for(QUESTIONS), team())
    assert plan.sizing == "parts"
    assert [(s.id, s.role, s.instructions) for s in plan.subtasks] == [
        ("s1", "analyst", "What is 14 * 3?"),
        ("s2", "researcher", "Where did Ray begin?"),
        ("s3", "analyst", "What is the total cost of 5 pens at 3 dollars each?"),
    ]
    shared = "Notes: a pen costs 3 dollars. Ray began at Berkeley."
    # written out in full, the first needs none of the notes (a small model read them for
    # numbers instead of computing); the others get them
    assert [s.context for s in plan.subtasks] == ["", shared, shared]
    assert all(s.depends_on == () for s in plan.subtasks)


def test_more_parts_than_max_subtasks_make_one_subtask_of_the_whole_task():
    plan = sized_plan(asked_for(QUESTIONS), team(max_subtasks=2))
    (only,) = plan.subtasks
    assert (only.id, only.instructions, plan.sizing) == ("s1", QUESTIONS, "one")
    assert only.role == "analyst"  # the whole task holds arithmetic
    assert len(sized_plan(asked_for(QUESTIONS), team(max_subtasks=3)).subtasks) == 3


def test_make_plan_sizes_an_auto_team_without_asking_the_model():
    asked: list[LLMRequest] = []

    async def ask(request: LLMRequest) -> LLMResponse:
        asked.append(request)
        raise AssertionError("the planner model was asked")

    plan = asyncio.run(make_plan(asked_for(QUESTIONS), team(), ask))
    assert plan == sized_plan(asked_for(QUESTIONS), team())
    assert asked == []


# -- assembled ------------------------------------------------------------------------------


def test_the_answer_of_one_part_is_its_subtasks_output():
    plan = sized_plan(asked_for("Describe the tower."), team())
    assert (
        assembled("Describe the tower.", plan, [result("s1", "  It is tall.\n")]) == "It is tall."
    )


def test_the_answers_of_parts_are_assembled_under_their_markers_in_the_order_asked():
    plan = sized_plan(asked_for(QUESTIONS), team())
    results = [result("s3", "15 dollars"), result("s1", " 42 "), result("s2", "Berkeley")]
    assert assembled(QUESTIONS, plan, results) == "1. 42\n2. Berkeley\n3. 15 dollars"


def test_parts_assembled_against_another_task_are_numbered():
    plan = sized_plan(asked_for(QUESTIONS), team())
    results = [result("s1", "42"), result("s2", "Berkeley")]  # s3 has no result
    assert assembled("another task", plan, results) == "1. 42\n2. Berkeley\n3. "


# -- tool_repairs ---------------------------------------------------------------------------


def test_arithmetic_given_to_a_role_without_the_calculator_is_moved_and_noted():
    plan = Plan(subtasks=(
        PlannedSubtask(id="maths", role="writer", instructions="Compute 17 * 23 + 4"),
        PlannedSubtask(id="words", role="writer", instructions="Describe the tower",
                       depends_on=("maths",)),
    ))  # fmt: skip
    repaired, notes = tool_repairs(plan, team())
    assert [(s.id, s.role) for s in repaired.subtasks] == [
        ("maths", "analyst"),
        ("words", "writer"),
    ]
    assert repaired.subtasks[1].depends_on == ("maths",)
    assert notes == ["subtask 'maths' needs calculator: moved from role 'writer' to 'analyst'"]


def test_a_plan_is_left_as_it_is_when_it_needs_no_move_or_no_role_has_the_calculator():
    right = Plan(subtasks=(PlannedSubtask(id="a", role="analyst", instructions="What is 3 x 4?"),))
    assert tool_repairs(right, team()) == (right, [])
    nowhere = Plan(subtasks=(PlannedSubtask(id="a", role="writer", instructions="What is 3 x 4?"),))
    assert tool_repairs(nowhere, plain_team()) == (nowhere, [])


def test_a_planner_models_plan_is_repaired_onto_the_calculator_role():
    answer = json.dumps(
        {"subtasks": [{"id": "s1", "role": "writer", "instructions": "What is 15% of 80?"}]}
    )

    async def ask(request: LLMRequest) -> LLMResponse:
        return LLMResponse(text=answer, model="m", provider="test", usage=Usage(calls=1))

    plan = asyncio.run(make_plan(asked_for("What is 15% of 80?"), team(planning="model"), ask))
    assert plan.subtasks[0].role == "analyst"
    assert plan.repairs == ("subtask 's1' needs calculator: moved from role 'writer' to 'analyst'",)
    assert plan.sizing is None


# -- aggregate ------------------------------------------------------------------------------


class Model:
    """An aggregating model answering from a list; every request it is asked is kept."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[LLMRequest] = []

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.asked.append(request)
        return LLMResponse(text=self.answers.pop(0), model="m", provider="test", usage=Usage())


def test_a_sized_plans_answer_is_assembled_without_a_model_call():
    plan = sized_plan(asked_for(QUESTIONS), team())
    results = [result("s1", "42"), result("s2", "Berkeley"), result("s3", "15")]
    model = Model("the model's answer")
    answer = asyncio.run(
        aggregate(asked_for(QUESTIONS), results, team(), model, tenant="t", plan=plan)
    )
    assert answer == "1. 42\n2. Berkeley\n3. 15"
    assert model.asked == []


def test_a_plan_not_sized_is_aggregated_by_the_model():
    plan = sized_plan(asked_for(QUESTIONS), team()).model_copy(update={"sizing": None})
    results = [result("s1", "42"), result("s2", "Berkeley"), result("s3", "15")]
    model = Model("the model's answer")
    answer = asyncio.run(
        aggregate(asked_for(QUESTIONS), results, team(), model, tenant="t", plan=plan)
    )
    assert answer == "the model's answer"
    assert [r.purpose for r in model.asked] == ["aggregate"]


def test_an_assembled_answer_failing_the_teams_schema_is_aggregated_by_the_model():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    checked = team(output_schema=schema)
    plan = sized_plan(asked_for("How many pens do 15 dollars buy at 3 dollars each?"), checked)
    model = Model('{"n": 5}')
    answer = asyncio.run(
        aggregate(asked_for(plan.subtasks[0].instructions), [result("s1", "Five pens.")],
                  checked, model, tenant="t", plan=plan)
    )  # fmt: skip
    assert answer == '{"n": 5}'
    assert [r.purpose for r in model.asked] == ["aggregate"]
    # an assembled answer that passes is the answer: no call
    model = Model("unused")
    answer = asyncio.run(
        aggregate(asked_for(plan.subtasks[0].instructions), [result("s1", '{"n": 5}')],
                  checked, model, tenant="t", plan=plan)
    )  # fmt: skip
    assert (answer, model.asked) == ('{"n": 5}', [])


def test_an_assembled_answer_missing_a_required_field_is_aggregated_by_the_model():
    checked = team(required=("n",))
    plan = sized_plan(asked_for("Describe the tower."), checked)
    model = Model('{"n": "tall"}')
    answer = asyncio.run(
        aggregate(asked_for("Describe the tower."), [result("s1", "It is tall.")], checked, model,
                  tenant="t", plan=plan)
    )  # fmt: skip
    assert answer == '{"n": "tall"}'
    assert len(model.asked) == 1


def test_a_blank_assembled_answer_is_aggregated_by_the_model():
    plan = sized_plan(asked_for("Describe the tower."), team())
    model = Model("It is tall.")
    answer = asyncio.run(
        aggregate(
            asked_for("Describe the tower."),
            [result("s1", "  ")],
            team(),
            model,
            tenant="t",
            plan=plan,
        )
    )
    assert answer == "It is tall."
    assert len(model.asked) == 1
