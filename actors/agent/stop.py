"""The stop conditions of an agent's loop besides a final answer and ``max_turns``.

One :class:`StopConditions` watches one subtask's loop. Each check returns a :class:`Stop` (the
``TaskResult.stop_reason`` and the error to report; the subtask fails) or ``None`` to go on:

``deadline``
    Before each model call: the clock is past the earlier of ``TaskRequest.deadline`` and the
    envelope's ``deadline``. Error code ``deadline_exceeded``.
``budget``
    After a model call that asked for tools, before they run: the usage of the subtask's model
    calls so far is over ``AgentSpec.max_tokens_per_task`` tokens or
    ``max_cost_per_task_usd`` dollars. A final answer is kept even if its call crossed a
    limit: it is already paid for, and nothing more would be spent. Code ``budget_exceeded``.
``repeated_tool_call``
    Before each tool call: it is identical (tool name and arguments; call ids do not count) to
    the ``max_repeated_tool_calls - 1`` calls right before it, in this turn or earlier ones.
    That call is not run. Code ``repeated_tool_call``.
``stagnation``
    After a turn's tools ran: ``stagnation_turns`` turns in a row were stale. A turn (a model
    call that asked for tools) is stale when every result its tools returned had been seen
    before in this subtask (same tool, same text as the model sees it), or when its text is not
    empty and repeats the previous turn's text. Code ``stagnation``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from raytroupe.protocols import AgentSpec, ErrorCode, ErrorPayload, ToolCall, Usage

__all__ = ["Reason", "Stop", "StopConditions"]


Reason = Literal["budget", "deadline", "repeated_tool_call", "stagnation"]
"""The ``TaskResult.stop_reason`` values a limit can give."""


@dataclass(frozen=True)
class Stop:
    """Why a loop must end now, as its ``stop_reason`` and the error it fails with."""

    reason: Reason
    error: ErrorPayload


def _stop(reason: Reason, code: ErrorCode, message: str) -> Stop:
    return Stop(reason, ErrorPayload(code=code, message=message))


class StopConditions:
    """The stop conditions of one subtask's loop, and what they have seen so far.

    Args:
        spec: the agent's limits.
        clock: the current UNIX time.
        deadlines: UNIX times (or None) after which no model call may start; the earliest counts.
    """

    def __init__(
        self, spec: AgentSpec, clock: Callable[[], float], *deadlines: float | None
    ) -> None:
        self._spec = spec
        self._clock = clock
        self._deadline = min((d for d in deadlines if d is not None), default=None)
        self._last_call = ""
        self._repeats = 0
        self._seen: set[tuple[str, str]] = set()
        self._last_text = ""
        self._stale = 0

    def before_model_call(self) -> Stop | None:
        """Stop if the deadline has passed."""
        if self._deadline is None:
            return None
        late = self._clock() - self._deadline
        if late <= 0:
            return None
        return _stop("deadline", ErrorCode.DEADLINE_EXCEEDED, f"deadline passed {late:.3f} s ago")

    def after_model_call(self, usage: Usage) -> Stop | None:
        """Stop if ``usage`` (the subtask's so far) is over the agent's token or cost limit."""
        tokens, usd = self._spec.max_tokens_per_task, self._spec.max_cost_per_task_usd
        if tokens is not None and usage.total_tokens > tokens:
            message = f"{usage.total_tokens} tokens used; the subtask may use {tokens}"
            return _stop("budget", ErrorCode.BUDGET_EXCEEDED, message)
        if usd is not None and usage.cost_usd > usd:
            message = f"${usage.cost_usd:.6f} spent; the subtask may spend ${usd:.6f}"
            return _stop("budget", ErrorCode.BUDGET_EXCEEDED, message)
        return None

    def before_tool_call(self, call: ToolCall) -> Stop | None:
        """Stop, instead of running ``call``, if it repeats the calls before it too often."""
        key = json.dumps([call.tool, call.arguments], sort_keys=True, default=str)
        self._repeats = self._repeats + 1 if key == self._last_call else 1
        self._last_call = key
        limit = self._spec.max_repeated_tool_calls
        if self._repeats < limit:
            return None
        message = f"the model asked for the same {call.tool!r} call {limit} times in a row"
        return _stop("repeated_tool_call", ErrorCode.REPEATED_TOOL_CALL, message)

    def after_turn(self, text: str, results: Sequence[tuple[str, str]]) -> Stop | None:
        """Stop if this turn (its text, its ``(tool, result text)`` pairs) ends a stagnant run."""
        text = text.strip()
        stale = set(results) <= self._seen or (text != "" and text == self._last_text)
        self._seen.update(results)
        self._last_text = text
        self._stale = self._stale + 1 if stale else 0
        limit = self._spec.stagnation_turns
        if limit is None or self._stale < limit:
            return None
        message = f"{limit} turns in a row brought no new tool results or repeated their text"
        return _stop("stagnation", ErrorCode.STAGNATION, message)
