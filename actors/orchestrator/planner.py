"""Planning and aggregation requests, and turning a planner's answer into a valid ``Plan``.

:func:`make_plan` asks the planner model for a plan and, if its answer is not a plan the team
may run, asks once more with the validation errors; a team with a declarative ``plan`` is not
asked at all (see :mod:`raytroupe.actors.orchestrator.plan_checks`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from raytroupe.actors.answer_gate import checked_gate, gate_feedback
from raytroupe.actors.orchestrator.plan_checks import (
    check_plan,
    declared_plan,
    describe_errors,
    role_problem,
    size_problem,
)
from raytroupe.actors.orchestrator.plan_repair import repair_plan
from raytroupe.actors.orchestrator.sizing import assembled, sized_plan, tool_repairs
from raytroupe.protocols import (
    ChatMessage,
    LLMRequest,
    LLMResponse,
    ModelError,
    Plan,
    PlanError,
    PlannedSubtask,
    QualityGateFailed,
    SubtaskResult,
    TeamSpec,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.prompts import RESULTS_HEADING, asked, job_prompt, plan_schema

__all__ = [
    "aggregate_request",
    "make_plan",
    "parse_plan",
    "plan_request",
    "reask_request",
    "role_descriptions",
]

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]
"""Sends one request to the model and returns its answer (raising ``TroupeError``s)."""

_PLANNER = (
    "You are the planner of a team of agents. First decide whether the user's task needs "
    "splitting at all: a task that asks one thing is one subtask, given whole to one agent. "
    "Otherwise give one subtask per independent part of the task, never more subtasks than "
    "it has parts; they run in parallel unless one needs another's result. Give work that "
    "needs a tool (arithmetic needs the calculator) to a role whose agents have that tool. "
    "Give each subtask an id, the role of the agent that should do it, clear instructions, "
    "and the ids it depends on. Give an output_schema (the JSON Schema its output must "
    "satisfy) only when a program or a later subtask must read the output as data; an "
    "answer a person or the final summary reads needs none. Use at most {max_subtasks} "
    "subtasks. Answer with JSON only."
)
_REASK = (
    "That answer is not a valid plan:\n{errors}\n"
    "Answer again with the whole corrected plan, as JSON only."
)
_AGGREGATOR = (
    "You answer the user's task from the results of its subtasks. Answer what the task asks, "
    "in the order it asks it; do not repeat the task's background text or its questions. "
    "Keep every fact of the results the answer needs. Where results disagree, say so."
)
_ANSWER_IN_DETAIL = 2000
"""Characters of a rejected answer kept in a ``PlanError``'s detail."""


def role_descriptions(team: TeamSpec) -> dict[str, str]:
    """Per role: which agents hold it and which tools they have, for the planner."""
    described = {}
    for role in team.roles:
        agents = [a for a in team.agents if a.role == role]
        tools = sorted({t for a in agents for t in a.tools})
        described[role] = (
            f"agents: {', '.join(a.name for a in agents)}; tools: {', '.join(tools) or 'none'}"
        )
    return described


def plan_request(task: str, team: TeamSpec) -> LLMRequest:
    """The request that asks the team's planner model for a plan."""
    described = role_descriptions(team)
    roles = "; ".join(f"{r} ({d})" for r, d in described.items())
    system = _PLANNER.format(max_subtasks=team.max_subtasks)
    return LLMRequest(
        model=team.planner_model,
        purpose="plan",
        messages=(
            ChatMessage(role="system", content=f"{system} Available roles: {roles}."),
            ChatMessage(role="user", content=task),
        ),
        response_format=plan_schema(described, team.max_subtasks),
        temperature=0.0,
    )


def reask_request(request: LLMRequest, answer: str, error: PlanError) -> LLMRequest:
    """``request`` again, followed by the rejected ``answer`` and why it was rejected."""
    errors = error.detail.get("errors") or [error.message]
    listed = "\n".join(f"- {e}" for e in errors)
    return request.model_copy(
        update={
            "messages": (
                *request.messages,
                ChatMessage(role="assistant", content=answer if answer.strip() else "(empty)"),
                ChatMessage(role="user", content=_REASK.format(errors=listed)),
            )
        }
    )


def parse_plan(text: str, team: TeamSpec) -> Plan:
    """Validate a planner's answer.

    A JSON object is read as it is or from a fenced code block (```json ... ```).

    Raises:
        PlanError: not JSON, not a DAG of valid subtasks (an ``output_schema`` that is not a
            JSON Schema included), too many subtasks, or a role the team lacks;
            ``detail['errors']`` lists every problem found, ``detail['answer']`` the answer.
    """
    answer = text[:_ANSWER_IN_DETAIL]
    try:
        data = json.loads(_unfenced(text))
    except json.JSONDecodeError as e:
        errors = [f"the answer is not JSON: {e}"]
        raise PlanError(f"planner answer is not JSON: {e}", errors=errors, answer=answer) from None
    data, repairs = repair_plan(data, team)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as e:
        errors = describe_errors(e.errors(include_url=False)[:20]) + _raw_problems(data, team)
        raise PlanError(
            f"planner answer is not a valid plan: {'; '.join(errors)}", errors=errors, answer=answer
        ) from None
    try:
        plan = check_plan(plan, team)
    except PlanError as e:
        raise PlanError(e.message, **e.detail, answer=answer) from None
    plan, moved = tool_repairs(plan, team)
    repairs += moved
    return plan.model_copy(update={"repairs": tuple(repairs)}) if repairs else plan


async def make_plan(context: JobContext, team: TeamSpec, ask: Ask) -> Plan:
    """The job's plan: the team's declarative plan, else sized, else the planner model's.

    The planner model reads the job's whole prompt (``prompts.job_prompt``); a declared
    plan's ``{task}``, a sized plan and the fallback take what was asked, and each agent
    sees the rest of the context beside its subtask.

    A team with ``planning: auto`` has the task sized by its text (:mod:`.sizing`): no model
    is asked. With ``planning: model`` the planner model is.

    What can be fixed for certain in an answer is fixed first (:mod:`.plan_repair`; the
    fixes are on ``plan.repairs``). The planner is asked once more, with its rejected answer
    and the exact problems, when its first answer is still not a plan the team may run. When
    the second is not either, one agent takes the whole task (``plan.fallback`` says why),
    unless the team turned ``plan_fallback`` off.

    Raises:
        PlanError: the declarative plan is invalid, or neither answer was a valid plan and the
            team has no fallback, or the second request failed; ``detail['attempts']`` holds
            each attempt's errors and answer.
        TroupeError: the first request failed, or the second one for a reason other than the
            model (budget, delivery).
    """
    declared = declared_plan(asked(context), team)
    if declared is not None:
        return declared
    if team.planning == "auto":
        return sized_plan(context, team)
    request = plan_request(job_prompt(context), team)
    response = await ask(request)
    try:
        return parse_plan(response.text, team)
    except PlanError as e:
        first = e
    try:
        response = await ask(reask_request(request, response.text, first))
        return parse_plan(response.text, team)
    except PlanError as second:
        failed = _failed(first, second)
        if not team.plan_fallback:
            raise failed from None
        return fallback_plan(asked(context), team, failed)
    except ModelError as broken:
        raise _failed(first, None, broken) from None


def fallback_plan(task: str, team: TeamSpec, why: PlanError) -> Plan:
    """The last resort: the first agent's role takes the whole task as one subtask."""
    whole = PlannedSubtask(id="whole-task", role=team.agents[0].role, instructions=task)
    return Plan(subtasks=(whole,), fallback=why.message[:_ANSWER_IN_DETAIL])


def aggregate_request(task: str, results: list[SubtaskResult], team: TeamSpec) -> LLMRequest:
    """The request that asks the planner model to combine subtask results into one answer."""
    lines = "\n".join(f"- {r.instructions}: {r.output.strip()}" for r in results)
    return LLMRequest(
        model=team.planner_model,
        purpose="aggregate",
        messages=(
            ChatMessage(role="system", content=_AGGREGATOR),
            ChatMessage(role="user", content=f"Task:\n{task}\n\n{RESULTS_HEADING}\n{lines}"),
        ),
        temperature=0.0,
    )


def _failed(
    first: PlanError, second: PlanError | None, broken: ModelError | None = None
) -> PlanError:
    """Both attempts' errors as one ``PlanError``."""
    attempts = [_attempt(first)]
    summary = f"attempt 1: {_errors_text(first)}"
    if second is not None:
        attempts.append(_attempt(second))
        summary += f"; attempt 2: {_errors_text(second)}"
    elif broken is not None:
        summary += f"; asking again failed ({broken.code.value}): {broken.message}"
    return PlanError(
        f"the planner gave no valid plan in {len(attempts)} attempt(s): {summary}",
        attempts=attempts,
        **(
            {"reask_error": {"code": broken.code.value, "message": broken.message}}
            if broken
            else {}
        ),
    )


def _attempt(error: PlanError) -> dict[str, Any]:
    return {
        "errors": list(error.detail.get("errors") or [error.message]),
        "answer": error.detail.get("answer", ""),
    }


def _errors_text(error: PlanError) -> str:
    return "; ".join(error.detail.get("errors") or [error.message])


def _unfenced(text: str) -> str:
    """The body of a fenced code block that is the whole answer, else the answer."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3]
    return text


def _raw_problems(data: Any, team: TeamSpec) -> list[str]:
    """Size and role problems of an answer that did not validate, where they can be seen."""
    subtasks = data.get("subtasks") if isinstance(data, dict) else None
    if not isinstance(subtasks, list):
        return []
    problems = size_problem(len(subtasks), team)
    for i, s in enumerate(subtasks):
        role = s.get("role") if isinstance(s, dict) else None
        if isinstance(role, str):
            problems += role_problem(f"subtasks.{i}.role", role, team)
    return problems


def joined(results: list[SubtaskResult]) -> str:
    """The subtasks' outputs, one per line: the answer when the model aggregated to nothing."""
    return "\n".join(
        f"- {r.instructions}: {r.output.strip()}"
        for r in results
        if r.status == "succeeded" and r.output.strip()
    )


async def aggregate(
    context: JobContext,
    results: list[SubtaskResult],
    team: TeamSpec,
    ask: Callable[[LLMRequest], Awaitable[LLMResponse]],
    *,
    tenant: str,
    plan: Plan | None = None,
) -> str:
    """``tenant``'s job's answer; one failing the team's output schema is asked for again.

    A sized ``plan``'s answer is its subtasks' answers assembled (:func:`.sizing.assembled`),
    with no model call, unless it fails the team's output schema or required fields: then
    the model aggregates, as for any plan. A blank answer (a small model's, seen) is replaced
    by the subtasks' outputs, joined.

    Raises:
        QualityGateFailed: the answer still fails after ``team.gate_retries`` retries.
    """
    if plan is not None and plan.sizing is not None:
        answer = assembled(asked(context), plan, results)
        checked = team.output_schema is not None or bool(team.required)
        if answer.strip() and not (
            checked and await checked_gate(answer, team.output_schema, team.required, tenant=tenant)
        ):
            return answer
    request = aggregate_request(job_prompt(context), results, team)
    problems: list[str] = []
    for _ in range(team.gate_retries + 1):
        answer = (await ask(request)).text
        if team.output_schema is None and not team.required:
            return answer if answer.strip() else joined(results)
        problems = await checked_gate(answer, team.output_schema, team.required, tenant=tenant)
        if not problems:
            return answer
        feedback = gate_feedback(problems, schema=team.output_schema)
        retry = (ChatMessage(role="assistant", content=answer),
                 ChatMessage(role="user", content=feedback))  # fmt: skip
        request = request.model_copy(update={"messages": (*request.messages, *retry)})
    raise QualityGateFailed(
        f"the job's answer failed its checks: {'; '.join(problems[:5])}", problems=problems
    )
