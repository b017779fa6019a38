"""Keeping an agent's conversation within its model's context window.

Before each model call the agent checks that its conversation, with what else the call
carries (the answer's budget, the tool schemas, recalled memories: the *reserved* tokens),
fits the window. When it does not, :func:`plan_cut` says which turns go::

    the system messages (the agent's instructions)   kept
    the opening user turn (the task)                 kept
    the summary of turns cut earlier, if any         folded into the new summary
    the turns since                                  the oldest cut; the newest always kept

A turn is a unit of :func:`turns`: an assistant message asking for
tools together with its calls' results, which no provider takes apart. Turns are cut until
the rest takes :data:`TRIM_TO` of the room, not merely until it fits, so that the next turns
fit without a summary each.

What is cut is summarized by the agent's model (:func:`summary_prompt`) and replaced by one
message after the task (:func:`summary_message`); a later cut folds that summary into its
own, so a conversation holds one summary however long it runs. When no summary can be made,
or it does not fit, :func:`dropped_note` says how many turns were left out instead.

Every count is an upper bound of the provider's
(:func:`raytroupe.actors.llm.tokens.upper_bound`): a conversation that fits here fits there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from raytroupe.actors.llm.tokens import (
    MESSAGE_TOKENS,
    REQUEST_TOKENS,
    SAFETY_FACTOR,
    count_tokens,
    message_tokens,
    messages_tokens,
    truncate,
    upper_bound,
)
from raytroupe.protocols import ChatMessage

__all__ = [
    "ANSWER_TOKENS",
    "SUMMARY_PREFIX",
    "SUMMARY_TOKENS",
    "TRIM_TO",
    "Cut",
    "dropped_note",
    "plan_cut",
    "reserved_tokens",
    "summary_message",
    "summary_prompt",
    "turns",
]

ANSWER_TOKENS: Final = 1024
"""Tokens kept free for the model's answer when its request sets no ``max_tokens`` (at most
a quarter of the window)."""

SUMMARY_TOKENS: Final = 384
"""The ``max_tokens`` of a summary, and the room a cut keeps for it."""

TRIM_TO: Final = 0.6
"""The share of the room a conversation is cut down to (the rest: the next turns)."""

SUMMARY_PREFIX: Final = "Summary of earlier turns: "
"""How the message that stands for the cut turns starts."""

SUMMARIZER: Final = (
    "You keep the notes of an agent whose conversation grew too long. Summarize the turns "
    "below in a few sentences, for the agent to go on from: keep every fact, name and number "
    "it may need, which tools it called with what, and what they returned. A line starting "
    "'summary:' summarizes turns before those: fold it in."
)
"""The system message of a summary request."""

_ELLIPSIS: Final = " …"


def turns(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """Group messages into units that must be kept or dropped together.

    An assistant message with tool calls and the tool results that follow it are one unit;
    every other message is a unit of its own.
    """
    units: list[list[ChatMessage]] = []
    for message in messages:
        if message.role == "tool" and units and units[-1][0].tool_calls:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def reserved_tokens(
    *, window: int, answer: int | None, tools: int, recalled: Sequence[ChatMessage]
) -> int:
    """The tokens a model call needs besides the conversation's messages, bounded.

    Args:
        window: the model's context window.
        answer: the request's ``max_tokens``; None: :data:`ANSWER_TOKENS`, or a quarter of a
            window too small for that to leave room.
        tools: the tokens of the tool schemas offered
            (``raytroupe.actors.llm.tokens.tools_tokens``).
        recalled: the memories recalled into the prompt.
    """
    answer = answer or min(ANSWER_TOKENS, window // 4)
    return answer + upper_bound(tools + messages_tokens(recalled) + REQUEST_TOKENS)


@dataclass(frozen=True)
class Cut:
    """Which turns of a conversation go, and what the rest is (see :func:`plan_cut`)."""

    head: tuple[ChatMessage, ...]
    """The system messages and the opening user turn: kept."""
    earlier: ChatMessage | None
    """The summary of an earlier cut, folded into this one's."""
    cut: tuple[tuple[ChatMessage, ...], ...]
    """The turns that go, oldest first (never empty)."""
    kept: tuple[ChatMessage, ...]
    """The turns that stay (the newest at least)."""
    room: int
    """Tokens the conversation may take: the window less the reserved tokens."""
    before: int
    """Tokens the conversation took before the cut (bounded)."""

    @property
    def tool_calls(self) -> int:
        """How many tool calls the cut turns made."""
        return sum(len(m.tool_calls) for unit in self.cut for m in unit)

    def fits(self, replacement: ChatMessage) -> bool:
        """Whether the conversation fits its room with ``replacement`` for the cut turns."""
        return upper_bound(messages_tokens(self.apply(replacement))) <= self.room

    def apply(self, replacement: ChatMessage) -> list[ChatMessage]:
        """The conversation after the cut, ``replacement`` standing for the cut turns."""
        return [*self.head, replacement, *self.kept]


def plan_cut(
    messages: Sequence[ChatMessage],
    *,
    window: int,
    reserved: int,
    summary: ChatMessage | None = None,
) -> Cut | None:
    """What to cut from ``messages`` so that they fit ``window`` less ``reserved`` tokens.

    Args:
        messages: the conversation: system messages, the task, then the turns.
        window: the model's context window, in tokens.
        reserved: what the call needs besides the conversation (:func:`reserved_tokens`).
        summary: the message an earlier cut left (found by identity, right after the task).

    Returns:
        None when the conversation fits, or when nothing may be cut (there is no turn but
        the newest, which stays whether it fits or not).
    """
    room = window - reserved
    before = upper_bound(messages_tokens(messages))
    if before <= room:
        return None
    head, earlier, units = _parts(messages, summary)
    if len(units) < 2:  # noqa: PLR2004 - the newest stays: nothing older to cut
        return None
    target = int(room * TRIM_TO)
    spent = messages_tokens(head) + _summary_room() + messages_tokens(units[-1])
    keep = 1
    for unit in reversed(units[:-1]):
        cost = messages_tokens(unit)
        if upper_bound(spent + cost) > target:
            break
        spent += cost
        keep += 1
    kept = tuple(m for unit in units[-keep:] for m in unit)
    cut = tuple(tuple(unit) for unit in units[:-keep])
    return Cut(head=head, earlier=earlier, cut=cut, kept=kept, room=room, before=before)


def _parts(
    messages: Sequence[ChatMessage], summary: ChatMessage | None
) -> tuple[tuple[ChatMessage, ...], ChatMessage | None, list[list[ChatMessage]]]:
    """The head (system messages and the task), the earlier summary, the turns since."""
    start = 0
    while start < len(messages) and messages[start].role == "system":
        start += 1
    end = min(start + 1, len(messages))  # the task
    rest = messages[end:]
    earlier = rest[0] if rest and summary is not None and rest[0] is summary else None
    return tuple(messages[:end]), earlier, turns(rest[1:] if earlier else rest)


def _summary_room() -> int:
    """The tokens a summary message may take."""
    return SUMMARY_TOKENS + count_tokens(SUMMARY_PREFIX) + MESSAGE_TOKENS


def summary_prompt(cut: Cut, window: int) -> tuple[ChatMessage, ...]:
    """The messages asking for a summary of ``cut``'s turns (and its earlier summary).

    The turns are written one line per message (``role: text``), long lines shortened
    evenly, so that the request and its answer of :data:`SUMMARY_TOKENS` fit ``window``.
    """
    system = ChatMessage(role="system", content=SUMMARIZER)
    budget = int((window - SUMMARY_TOKENS) / SAFETY_FACTOR)
    budget -= message_tokens(system) + MESSAGE_TOKENS + REQUEST_TOKENS
    text = "\n".join(_shortened(_lines(cut), max(budget, 0)))
    return system, ChatMessage(role="user", content=text)


def _lines(cut: Cut) -> list[str]:
    """``cut``'s earlier summary and turns, a line per message (whitespace collapsed)."""
    lines = []
    if cut.earlier is not None:
        lines.append(f"summary: {_flat(cut.earlier.text.removeprefix(SUMMARY_PREFIX))}")
    for unit in cut.cut:
        names = {c.call_id: c.tool for m in unit for c in m.tool_calls}
        for message in unit:
            if message.role == "tool":
                name = names.get(message.tool_call_id or "")
                label = f"tool {name}" if name else "tool"
                lines.append(f"{label}: {_flat(message.text)}")
                continue
            if message.text:
                lines.append(f"{message.role}: {_flat(message.text)}")
            lines.extend(
                f"{message.role}: called {c.tool} with {json.dumps(c.arguments)}"
                for c in message.tool_calls
            )
    return lines


def _flat(text: str) -> str:
    return " ".join(text.split())


def _shortened(lines: list[str], budget: int) -> list[str]:
    """``lines`` within ``budget`` tokens, line breaks included.

    The longest are cut to one length and marked, shorter ones kept whole. A line is never
    cut below its mark, so that more lines than a quarter of the budget would still not fit
    (the summary then fails, and :func:`dropped_note` stands for the turns).
    """
    costs = [count_tokens(line) + 1 for line in lines]  # + its line break
    if sum(costs) <= budget:
        return lines
    cap = _cap(costs, budget)
    room = max(cap - 1 - count_tokens(_ELLIPSIS), 0)
    return [
        truncate(line, room) + _ELLIPSIS if cost > cap else line
        for line, cost in zip(lines, costs, strict=True)
    ]


def _cap(costs: list[int], budget: int) -> int:
    """The largest cost such that every line cut to it leaves the lines within ``budget``."""
    left = budget
    for done, cost in enumerate(sorted(costs)):
        share = left // (len(costs) - done)
        if cost > share:
            return share
        left -= cost
    return max(costs)  # pragma: no cover - only reached when everything fits


def summary_message(cut: Cut, text: str) -> ChatMessage | None:
    """The message standing for ``cut``'s turns, summarized as ``text``.

    None if it does not fit the room, or ``text`` is empty.
    """
    text = _flat(text)
    if not text:
        return None
    message = ChatMessage(role="user", content=SUMMARY_PREFIX + text)
    return message if cut.fits(message) else None


def dropped_note(cut: Cut) -> ChatMessage:
    """What stands for ``cut``'s turns when they could not be summarized.

    It says how many turns were dropped, after the earlier summary when that still fits
    (else the note says that it went too).
    """
    count = len(cut.cut)
    dropped = f"{count} earlier turn{'s' if count > 1 else ''}"
    were = "were" if count > 1 else "was"
    if cut.earlier is not None:
        kept = ChatMessage(
            role="user",
            content=f"{_flat(cut.earlier.text)}\n\nThen {dropped} {were} dropped, unsummarized, "
            "to fit the context window.",
        )
        if cut.fits(kept):
            return kept
        dropped += " (and the summary of the turns before)"
        were = "were"
    return ChatMessage(role="user", content=f"{dropped} {were} dropped to fit the context window.")
