"""Between the agent's model calls: what opens a subtask, what the model is told, what is kept.

The agent runs the loop (``raytroupe.actors.agent.react``); this module holds its state
(:class:`Loop`) and the decisions it makes on each turn's text, none of which needs the actor:

- the opening turns (:func:`system_prompt`, :func:`task_content`, :func:`render_task`);
- the next call's ``tool_choice`` and the wrap-up turn (:func:`next_tool_choice`,
  :func:`one_more_turn`, :data:`WRAP_UP`);
- an answer's text read for calls written in it (:func:`calls_in_text`), checked before it is
  taken (:func:`what_to_tell`: an unreadable call, the arithmetic check of
  ``raytroupe.actors.agent.checks``), and the answer kept (:func:`final_answer`);
- how tool results are shown to the model (:func:`tool_text`, :func:`handoff_result`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from raytroupe.actors.agent.checks import Calculation, next_correction, taken_answer
from raytroupe.actors.agent.stop import Stop, StopConditions
from raytroupe.actors.agent.written_calls import (
    Unreadable,
    WrittenCalls,
    answer_of,
    described_calculation,
    read_written_calls,
)
from raytroupe.protocols import (
    AgentSpec,
    ChatMessage,
    ContentPart,
    Handoff,
    LLMRequest,
    LLMResponse,
    Span,
    TaskRequest,
    TextPart,
    ToolResult,
    ToolSpec,
    Usage,
    as_written,
    unscoped,
)
from raytroupe.protocols.guardrails import GuardrailDecision
from raytroupe.protocols.prompts import asked, job_prompt

__all__ = [
    "HANDOFF_TOOL",
    "NOT_RUN",
    "UNREADABLE_CALL",
    "WRAP_UP",
    "Loop",
    "calls_in_text",
    "final_answer",
    "handoff_result",
    "next_tool_choice",
    "one_more_turn",
    "render_task",
    "run_of",
    "system_prompt",
    "task_content",
    "tool_text",
    "what_to_tell",
    "write_again",
]


def render_task(request: TaskRequest) -> str:
    """The user turn that opens a subtask: instructions, then the job's context and inputs.

    The job's context is what it was asked (for one part of a sized task, what the parts
    share) and what it is shown beside it (``prompts.job_prompt``); what the instructions
    already say is not said again.
    """
    parts = [request.instructions.strip()]
    context = request.job
    if asked(context).strip() == parts[0]:  # said once is enough
        context = context.model_copy(update={"request": "", "files": ()})
    shown = job_prompt(context).strip()
    if shown:
        parts.append(f"Context:\n{shown}")
    if request.inputs:
        lines = "\n".join(f"[{k}] {v.strip()}" for k, v in request.inputs.items())
        parts.append(f"Results of earlier subtasks:\n{lines}")
    return "\n\n".join(parts)


_LONGEST_PLACE_ID: Final = 150
"""A subtask id longer than this is named by its digest in a model call's place."""

_NOT_ASKED: Final = frozenset({"budget", "stream", "retry_partial_stream", "replay"})
"""Fields of a request that do not change what the model is asked."""

UNREADABLE_CALL: Final = frozenset({"tool_format", "tool_arguments"})
"""``ModelError`` reasons of a tool call the provider could not read (the model may fix it)."""


def write_again(problem: str) -> str:
    """What a model that wrote an unreadable tool call is told."""
    return (
        f"Your tool call could not be read: {problem}\nCall the tool again with valid JSON "
        'arguments, e.g. {"name": "<tool>", "arguments": {...}}, or answer without a tool.'
    )


WRAP_UP: Final = (
    "This is your last turn: give your final answer now, from what the tools returned above, "
    "without calling a tool."
)
"""Said before an agent's last allowed model call, once it has called tools: small models
otherwise call again (often with the result as the argument) until the turns run out."""


NOT_RUN: Final = "Not run: you asked for this very call before; its result is above."

HANDOFF_TOOL: Final = "handoff"
"""The name of the tool that passes the subtask to another agent (the sandbox's ``HANDOFF``,
``raytroupe.actors.tools.delegation``): named here so that agents need not import the tools'
runners to know it."""


def next_tool_choice(
    loop: Loop, tools: tuple[ToolSpec, ...], max_turns: int
) -> Literal["auto", "none", "required"]:
    """The next call's ``tool_choice``: ``none`` when the loop wraps up, else ``auto``.

    The loop wraps up (then :data:`WRAP_UP` is said) on the last allowed turn after tool
    calls, or on the turn after a repeated call: no tool is offered, for the answer the model
    has rather than no answer at all. (Not ``required`` after the arithmetic check: llama.cpp
    held to a tool call's grammar was seen writing on to the answer's token limit.)
    """
    last = bool(tools) and loop.tool_calls > 0 and loop.turns == max_turns - 1
    if last or loop.wrapping:
        loop.messages.append(ChatMessage(role="user", content=WRAP_UP))
        return "none"
    return "auto"


def one_more_turn(loop: Loop, stop: Stop | None, max_turns: int) -> Stop | None:
    """``stop``, unless it is a first repeated call with a turn left: then a wrap-up turn."""
    if stop is None or stop.reason != "repeated_tool_call" or loop.wrapping:
        return stop
    if loop.turns >= max_turns:
        return stop
    loop.wrapping = True
    return None


def system_prompt(spec: AgentSpec, tenant: str, *, named: bool = True) -> str:
    """Who the agent is and what it was told: "You are alan, an analyst. <instructions>".

    Its name is the one its team's author wrote (an inline team's, without ``tenant``'s
    scope), the one its teammates know it by. ``named=False``: the same without the name
    ("You are an analyst. ..."), what any agent of that role and spec is told.
    """
    article = "an" if spec.role[:1].lower() in "aeiou" else "a"
    name = f"{unscoped(spec.name, tenant)}, " if named else ""
    return f"You are {name}{article} {spec.role}. {spec.instructions}".strip()


def task_content(request: TaskRequest) -> str | tuple[ContentPart, ...]:
    """The opening user turn: text, or text and the job's images."""
    if not request.images:
        return render_task(request)
    return (TextPart(text=render_task(request)), *request.images)


@dataclass
class Loop:
    """The state of one subtask's loop."""

    messages: list[ChatMessage]
    limits: StopConditions
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    tool_calls: int = 0
    providers: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    """One per model and tool call, unparented (the orchestrator places them)."""
    handed_off: str | None = None
    """The answer of the agent this one handed the subtask to, once it has."""
    wrapping: bool = False
    """The model repeated a call: its next turn asks for the answer, with no tool offered."""
    tools_tokens: int = 0
    """What the schemas of the tools offered take of the context window."""
    served_window: int | None = None
    """The context window of the deployment that answered last (None: not known)."""
    summary: ChatMessage | None = None
    """The message standing for the turns cut to fit the window, once some were."""
    calls_cut: int = 0
    """Tool calls of the turns cut: numbering written calls goes on after them."""
    calculated: list[Calculation] = field(default_factory=list)
    """The calculator's calls, oldest first."""
    corrections: int = 0
    """Corrective turns of ``raytroupe.actors.agent.checks`` had."""
    corrected: str | None = None
    """The answer the last corrective turn was about."""
    calls: int = 0
    """Model calls asked so far, summaries included."""
    guardrails: list[GuardrailDecision] = field(default_factory=list)
    """What the job's guardrails redacted in this subtask's tool calls and results."""
    role_prompt: tuple[str, str] | None = None
    """The agent's system turn, and the same without its name: a call's place holds the
    latter, so that a teammate of the same role and spec given the subtask again (its
    agent died with the word that it took it) reaches the same places, and replays them."""

    def window(self, spec: AgentSpec) -> int | None:
        """The context window to keep within: the spec's or the deployment's, the smaller."""
        known = [w for w in (spec.context_window, self.served_window) if w is not None]
        return min(known, default=None)

    def placed(
        self, task_id: str, asked: LLMRequest, recalled: Sequence[ChatMessage] = ()
    ) -> LLMRequest:
        """The next model call: ``asked``, named by its place in the run, ``recalled`` shown.

        What was recalled is shown after the system turn; the place (``LLMRequest.replay``)
        is the call's number in the subtask's run and the conversation it continues: a run of
        the subtask from its first turn (its agent died) that reaches the same conversation
        is given the answer kept for it (``raytroupe.actors.llm.replay``), whatever memories
        are recalled beside it now; a run that went another way makes the call.
        """
        self.calls += 1
        if len(task_id) > _LONGEST_PLACE_ID:  # a place is at most 200 characters
            task_id = hashlib.sha256(task_id.encode()).hexdigest()
        conversation = _as_any_teammate(asked, self.role_prompt).model_dump_json(
            exclude=set(_NOT_ASKED)
        )
        digest = hashlib.sha256(conversation.encode()).hexdigest()[:32]
        messages = (*asked.messages[:1], *recalled, *asked.messages[1:])
        return asked.model_copy(
            update={"messages": messages, "replay": f"{task_id}/{self.calls}/{digest}"}
        )

    def answered(self, answer: LLMResponse) -> None:
        """Book a model call's usage and the window of the deployment that made it."""
        self.usage += answer.usage
        if answer.context_window is not None:
            self.served_window = answer.context_window


def run_of(request: TaskRequest) -> str:
    """The name of ``request``'s run, which its calls' places start with.

    The subtask's id, and the candidate's number when it is one of several: each candidate
    is a run of its own, whichever agent of the role runs it.
    """
    return request.task_id if not request.candidate else f"{request.task_id}#{request.candidate}"


def _as_any_teammate(asked: LLMRequest, role_prompt: tuple[str, str] | None) -> LLMRequest:
    """``asked`` with its system turn not naming the agent (see ``Loop.role_prompt``)."""
    if role_prompt is None or not asked.messages or asked.messages[0].content != role_prompt[0]:
        return asked
    anonymous = asked.messages[0].model_copy(update={"content": role_prompt[1]})
    return asked.model_copy(update={"messages": (anonymous, *asked.messages[1:])})


def calls_in_text(
    loop: Loop, tools: tuple[ToolSpec, ...], text: str
) -> WrittenCalls | Unreadable | None:
    """The calls ``text`` writes instead of making them (None: it is an answer).

    Before the subtask's first calculator call, also one it describes in prose
    (``written_calls.described_calculation``).
    """
    index = loop.calls_cut + sum(len(m.tool_calls) for m in loop.messages)
    names = {t.name for t in tools}
    written = read_written_calls(text, names, first_index=index)
    if written is not None or "calculator" not in names or loop.calculated:
        return written
    described = described_calculation(text, call_id=f"call_{index}")
    return None if described is None else WrittenCalls(text="", calls=(described,))


def final_answer(loop: Loop, request: TaskRequest, text: str, bound: Any) -> str:
    """The final answer ``text`` as the subtask keeps it (``checks.taken_answer``)."""
    source = f"{request.instructions}\n{asked(request.job)}"
    output, fixed = taken_answer(text, loop.corrected, source)
    if fixed:
        bound.info("working_recomputed", steps=[s.expression for s in fixed])
    return answer_of(output)


def what_to_tell(  # noqa: PLR0917 - private, the loop's state
    loop: Loop,
    request: TaskRequest,
    tools: tuple[ToolSpec, ...],
    text: str,
    written: WrittenCalls | Unreadable | None,
    turns: int,
    bound: Any,
) -> str | None:
    """What the model is told before its answer is taken (None: it is taken as it is).

    A tool call it wrote that cannot be read: to write it again. A final answer that should
    show the calculator's result and does not, or whose written working has a wrong step
    (``raytroupe.actors.agent.checks.next_correction``): to check it, when two turns are left for
    that (a calculator call and the answer); after the first, only for slips in new working.
    """
    if isinstance(written, Unreadable):
        bound.info("tool_call_unreadable", problem=written.problem)
        return write_again(written.problem)
    if written is not None or loop.wrapping or turns - loop.turns < 2:  # noqa: PLR2004
        return None
    names = {t.name for t in tools}
    told = next_correction(
        request.instructions,
        names,
        loop.calculated,
        text,
        asked(request.job),
        loop.corrections,
        loop.corrected,
    )
    if told is not None:
        loop.corrected = text
        loop.corrections += 1
        bound.info("answer_corrected", told=told[:80])
    return told


def handoff_result(handoff: Handoff) -> ToolResult:
    """What the model is shown of a subtask it handed off: the other agent's answer."""
    return ToolResult(
        call_id=handoff.call_id,
        tool=HANDOFF_TOOL,
        ok=True,
        data={"agent": handoff.to_agent, "output": handoff.output},
    )


def tool_text(result: ToolResult, tenant: str) -> str:
    """What the model is shown of a tool's result: its data, or ``ERROR:`` and why.

    The runtime's reasons name agents as the team's author wrote them (without ``tenant``'s
    scope), as the model knows them.
    """
    if result.ok:
        return result.data if isinstance(result.data, str) else json.dumps(result.data)
    message = result.error.message if result.error else "failed"
    return f"ERROR: {as_written(message, tenant)}"
