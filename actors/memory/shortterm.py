"""Short-term memory: conversation windows (a job's working memory: :mod:`.notes`).

Windows are trimmed by tokens (the offline tokenizer's counts, :mod:`actors.llm.tokens`) and
never separate a tool call from its results.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.llm.tokens import message_tokens
from protocols import ChatMessage

__all__ = ["turns", "window"]


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


def window(messages: Sequence[ChatMessage], max_tokens: int) -> list[ChatMessage]:
    """The newest messages that fit in ``max_tokens``, whole units only.

    System messages at the start are always kept (they are the agent's instructions); then
    units are taken from the newest back while they fit. A single unit larger than the
    budget is kept anyway when it is the newest: an answer needs its latest context.
    """
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    kept: list[list[ChatMessage]] = []
    budget = max_tokens - sum(message_tokens(m) for m in messages[:head])
    for unit in reversed(turns(messages[head:])):
        cost = sum(message_tokens(m) for m in unit)
        if cost > budget and kept:
            break
        kept.append(unit)
        budget -= cost
    return list(messages[:head]) + [m for unit in reversed(kept) for m in unit]
