"""Running a skill: its team, its requests, and the gate loop every execution mode shares.

An execution mode *produces* an answer (:data:`Produce`); :func:`gated` checks each answer
with the skill's quality gate and sends a failing one back with its problems, at most
``quality_gate.max_retries`` times:

- ``react``: one subtask on the skill's agent (``skill.<name>.<version>``, its prompt as
  the agent's instructions, its tools, model and step limit); a retry is a new subtask
  (``answer-r1``, ...) given the rejected answer and the problems;
- ``direct``: one model call (purpose ``skill``: the prompt as the system message, the
  request as the user's, the output schema as ``response_format``); a retry continues the
  conversation with the problems;
- ``team:<name>``: the registered team's plan or graph, aggregated as usual; a retry asks
  the team's planner model to revise the answer (the team does not run again).

Recalled lessons (:mod:`raytroupe.actors.skills.reflect`) go before the request in a react agent's
subtask, and in a system message after the prompt of a direct skill's call and, for a team
skill, of its planner's, aggregator's and reviser's calls (the planner writes the agents'
instructions).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from raytroupe.actors.answer_gate import gate_feedback
from raytroupe.actors.skills.gate import Ask, check_answer
from raytroupe.protocols import (
    AgentSpec,
    Budget,
    ChatMessage,
    InvalidInput,
    LLMRequest,
    Plan,
    PlannedSubtask,
    SubtaskResult,
    TeamSpec,
)
from raytroupe.protocols.prompts import lessons_text, request_text
from raytroupe.protocols.quality import QualityReport
from raytroupe.protocols.safe_schema import safe_validator
from raytroupe.protocols.skill import SkillSpec, compose_prompt

__all__ = [
    "ANSWER",
    "SKILL_ROLE",
    "Gated",
    "Produce",
    "check_input",
    "direct_request",
    "gated",
    "react_plan",
    "request_text",
    "revise_request",
    "skill_agent",
    "skill_team",
    "with_lessons",
]

SKILL_ROLE: Final = "skill"
"""The role of a react skill's agent."""
ANSWER: Final = "answer"
"""The id of a react skill's subtask (its retries: ``answer-r1``, ...)."""

Produce = Callable[[int, str | None, str | None], Awaitable[tuple[str, list[SubtaskResult]]]]
"""(attempt, rejected answer, the gate's feedback) -> (answer, the subtasks it took)."""


@dataclass(frozen=True)
class Gated:
    """What a skill's run came to: the last answer, every subtask, the gate's report.

    ``report`` is None when the last attempt produced no answer (a failed subtask); then
    ``subtasks[-1]`` says why.
    """

    answer: str
    subtasks: list[SubtaskResult]
    report: QualityReport | None


def skill_agent(skill: SkillSpec) -> str:
    """The name of a react skill's agent: one per version, so a job keeps its version's."""
    return f"skill.{skill.name}.{skill.version}"


def skill_team(skill: SkillSpec) -> TeamSpec:
    """The team a skill job runs under: one agent holding the skill (used by react only)."""
    agent = AgentSpec(
        name=skill_agent(skill),
        role=SKILL_ROLE,
        instructions=compose_prompt(skill),
        model=skill.llm.alias,
        tools=tuple(t.name for t in skill.tools),
        max_turns=skill.max_steps,
        memory=skill.memory,
    )
    return TeamSpec(
        name=f"skill.{skill.name}",
        agents=(agent,),
        planner_model=skill.llm.alias,
        max_parallel=1,
        max_subtasks=1 + skill.quality_gate.max_retries,
        gate_retries=0,
    )


def check_input(skill: SkillSpec, data: Any) -> None:
    """Check a structured request against the skill's input schema.

    Raises:
        InvalidInput: no input where the schema wants one, or input failing it;
            ``detail['fields']`` names each failing path, ``detail['problems']`` says why.
    """
    if skill.input_schema is None:
        return
    if data is None:
        raise InvalidInput(
            f"skill {skill.name!r} takes a JSON input (its input_schema): send it as 'input'",
            field="input",
            fields=["input"],
        )
    errors = sorted(
        safe_validator(skill.input_schema).iter_errors(data),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    if errors:
        fields = ["/".join(str(p) for p in e.absolute_path) or "<root>" for e in errors]
        problems = [f"at {f}: {e.message}" for f, e in zip(fields, errors, strict=True)]
        raise InvalidInput(
            f"the input does not fit skill {skill.name!r}'s input_schema: {'; '.join(problems)}",
            field="input",
            fields=fields,
            problems=problems,
        )


def _retry_note(previous: str | None, feedback: str | None) -> str:
    if previous is None or feedback is None:
        return ""
    return f"\n\nYour previous answer:\n{previous}\n\n{feedback}"


def react_plan(
    request: str,
    attempt: int,
    previous: str | None,
    feedback: str | None,
    lessons: tuple[str, ...] = (),
) -> Plan:
    """The one-subtask plan of a react attempt (lessons, if any, first)."""
    told = f"{lessons_text(lessons)}\n\n{request}" if lessons else request
    sub = PlannedSubtask(
        id=ANSWER if attempt == 0 else f"{ANSWER}-r{attempt}",
        role=SKILL_ROLE,
        instructions=told + _retry_note(previous, feedback),
    )
    return Plan(subtasks=(sub,))


def _call(skill: SkillSpec, messages: tuple[ChatMessage, ...], budget: Budget | None) -> LLMRequest:
    return LLMRequest(
        model=skill.llm.alias,
        purpose="skill",
        messages=messages,
        response_format=skill.output_schema,
        temperature=skill.llm.temperature,
        max_tokens=skill.llm.max_tokens,
        budget=budget,
    )


def with_lessons(request: LLMRequest, lessons: tuple[str, ...]) -> LLMRequest:
    """``request`` with the lessons as a system message after its leading system ones."""
    if not lessons:
        return request
    messages = request.messages
    at = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    told = ChatMessage(role="system", content=lessons_text(lessons))
    return request.model_copy(update={"messages": (*messages[:at], told, *messages[at:])})


def direct_request(
    skill: SkillSpec,
    request: str,
    history: tuple[ChatMessage, ...] = (),
    budget: Budget | None = None,
    lessons: tuple[str, ...] = (),
) -> LLMRequest:
    """A direct skill's call: its prompt (and lessons), the request, rejected answers."""
    messages = (
        ChatMessage(role="system", content=compose_prompt(skill)),
        ChatMessage(role="user", content=request),
        *history,
    )
    return with_lessons(_call(skill, messages, budget), lessons)


def revise_request(skill: SkillSpec, request: str, previous: str, feedback: str,
                   budget: Budget | None = None) -> LLMRequest:  # fmt: skip
    """Ask for a team's rejected answer to be revised (the team does not run again)."""
    text = f"Request:\n{request}\n\nAnswer to revise:\n{previous}\n\n{feedback}"
    messages = (
        ChatMessage(role="system", content=compose_prompt(skill)),
        ChatMessage(role="user", content=text),
    )
    return _call(skill, messages, budget)


async def gated(
    skill: SkillSpec, request: str, produce: Produce, ask: Ask, *, budget: Budget | None = None
) -> Gated:
    """Produce answers until one passes the gate or the retries run out.

    Raises:
        TroupeError: what producing or judging raised (model errors, budget, cancellation).
    """
    subtasks: list[SubtaskResult] = []
    previous: str | None = None
    feedback: str | None = None
    report: QualityReport | None = None
    answer = ""
    for attempt in range(skill.quality_gate.max_retries + 1):
        answer, taken = await produce(attempt, previous, feedback)
        subtasks += taken
        if taken and taken[-1].status != "succeeded":
            return Gated(answer, subtasks, None)
        report = await check_answer(skill, answer, request, ask, budget=budget)
        report = report.model_copy(update={"retries": attempt})
        if report.passed:
            break
        previous, feedback = answer, gate_feedback(report.problems, schema=skill.output_schema)
    return Gated(answer, subtasks, report)
