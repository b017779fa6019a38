"""Short-term memory: conversation windows and per-job working memory.

Windows are trimmed by tokens and never separate a tool call from its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocols import ChatMessage

__all__ = ["WorkingMemory", "turns", "window"]


def _tokens(message: ChatMessage) -> int:
    calls = sum(len(str(c.arguments).split()) + 1 for c in message.tool_calls)
    return len(message.text.split()) + calls + 4


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
    budget = max_tokens - sum(_tokens(m) for m in messages[:head])
    for unit in reversed(turns(messages[head:])):
        cost = sum(_tokens(m) for m in unit)
        if cost > budget and kept:
            break
        kept.append(unit)
        budget -= cost
    return list(messages[:head]) + [m for unit in reversed(kept) for m in unit]


class WorkingMemory:
    """Per-job key/value scratch, visible to the job's agents, dropped when the job ends."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}
        self._kept: set[str] = set()

    def put(self, job_id: str, key: str, value: Any) -> None:
        """Set ``key`` for the job."""
        self._jobs.setdefault(job_id, {})[key] = value

    def get(self, job_id: str, key: str, default: Any = None) -> Any:
        """The value of ``key`` for the job, or ``default``."""
        return self._jobs.get(job_id, {}).get(key, default)

    def items(self, job_id: str) -> dict[str, Any]:
        """Everything the job keeps."""
        return dict(self._jobs.get(job_id, {}))

    def end(self, job_id: str, *, keep: bool = False) -> bool:
        """The job ended: drop its memory unless ``keep``; True if something was dropped."""
        if keep:
            self._kept.add(job_id)
            return False
        return self._jobs.pop(job_id, None) is not None
