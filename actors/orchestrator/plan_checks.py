"""Checking plans against a team, and the team's declarative (fixed) plan.

A plan a team may run is a DAG of subtasks (``Plan`` checks that), no larger than
``TeamSpec.max_subtasks``, whose roles are all roles of the team. Whether the plan came from
the planner model or from the team's YAML, it is checked the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from raytroupe.protocols import Plan, PlanError, PlannedSubtask, TeamSpec

__all__ = [
    "TASK_FIELD",
    "check_plan",
    "declared_plan",
    "describe_errors",
    "plan_problems",
    "role_problem",
    "size_problem",
]

TASK_FIELD = "{task}"
"""Stands for the job's task in the instructions of a declarative plan."""


def describe_errors(errors: Iterable[ErrorDetails]) -> list[str]:
    """Pydantic's errors as ``where: what`` lines (``subtasks.1.role: Field required``).

    A list that is too short only because items inside it failed is left out: the items'
    errors say why.
    """
    errors = list(errors)
    inner = [tuple(err["loc"]) for err in errors]
    described = []
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "too_short" and any(i[: len(loc)] == loc and i != loc for i in inner):
            continue
        where = ".".join(str(p) for p in err["loc"])
        what = err["msg"].removeprefix("Value error, ")
        described.append(f"{where}: {what}" if where else what)
    return described


def size_problem(count: int, team: TeamSpec) -> list[str]:
    """The problem with a plan of ``count`` subtasks for ``team``, if it is too large."""
    if count > team.max_subtasks:
        return [f"the plan has {count} subtasks; at most {team.max_subtasks} are allowed"]
    return []


def role_problem(where: str, role: str, team: TeamSpec) -> list[str]:
    """The problem with ``role`` at ``where`` if ``team`` lacks it."""
    if role in team.roles:
        return []
    return [f"{where}: role {role!r} is not a role of the team ({', '.join(team.roles)})"]


def plan_problems(subtasks: Iterable[PlannedSubtask], team: TeamSpec) -> list[str]:
    """Why ``subtasks`` is not a plan ``team`` may run: size and roles (empty if none)."""
    subtasks = tuple(subtasks)
    problems = size_problem(len(subtasks), team)
    for s in subtasks:
        problems += role_problem(f"subtask {s.id!r}", s.role, team)
    return problems


def check_plan(plan: Plan, team: TeamSpec) -> Plan:
    """``plan``, if ``team`` may run it.

    Raises:
        PlanError: too many subtasks, or a role the team lacks; ``detail['errors']`` lists
            every problem.
    """
    problems = plan_problems(plan.subtasks, team)
    if problems:
        unknown = sorted({s.role for s in plan.subtasks} - set(team.roles))
        raise PlanError(f"invalid plan: {'; '.join(problems)}", errors=problems, roles=unknown)
    return plan


def declared_plan(task: str, team: TeamSpec) -> Plan | None:
    """The team's declarative plan for ``task`` (``{task}`` filled in), or None if it has none.

    Raises:
        PlanError: the declared subtasks are not a plan the team may run (not a DAG, too many,
            unknown roles, an invalid output schema); ``detail['errors']`` lists why.
    """
    if team.plan is None:
        return None
    problems = plan_problems(team.plan, team)
    subtasks = [
        s.model_dump() | {"instructions": s.instructions.replace(TASK_FIELD, task)}
        for s in team.plan
    ]
    try:
        plan = Plan.model_validate({"subtasks": subtasks})
    except ValidationError as e:
        problems += describe_errors(e.errors(include_url=False))
    if problems:
        raise PlanError(
            f"the team's declared plan is invalid: {'; '.join(problems)}", errors=problems
        )
    return plan
