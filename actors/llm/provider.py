"""The provider interface every model backend implements."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Protocol

from raytroupe.protocols import ChatMessage, LLMDelta, LLMRequest, LLMResponse

__all__ = ["DeltaSink", "LLMProvider", "word_tokens"]

DeltaSink = Callable[[LLMDelta], Awaitable[None]]
"""Where a streaming provider hands each delta, as it arrives."""


class LLMProvider(Protocol):
    """A model backend bound to one deployment. ``complete`` may be called concurrently.

    A provider makes exactly one attempt per call: retries, fallbacks, rate limits and
    budgets belong to the pool (SDK clients are built with ``max_retries=0``).
    """

    name: str
    """Provider name reported in ``LLMResponse.provider``."""

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        """Answer ``request``; with ``request.stream``, hand every delta to ``on_delta``.

        The response carries the provider's model name, text, tool calls with parsed
        arguments (``{}`` when empty), a normalized finish reason and usage (cost is left at
        0; the pool prices it).

        Raises:
            ModelError: one of its typed subclasses (``RateLimited`` with
                ``detail['retry_after_s']``, ``ModelTimeout``, ``Overloaded``,
                ``ProviderUnavailable``, ``StreamInterrupted``, ``ContextTooLong``,
                ``AuthFailed``, ``BadRequest``, ``ContentFiltered``).
        """
        ...

    async def close(self) -> None:
        """Release resources. Raises ``ScriptError`` if a scripted provider has turns left."""
        ...


def word_tokens(messages: tuple[ChatMessage, ...] | str) -> int:
    """Words, one token each: the usage offline and scripted providers report.

    Cheap on every call of the shared pool. It is not a count to fit a context window by:
    that is :func:`raytroupe.actors.llm.tokens.count_tokens`, a real tokenizer's.
    """
    if isinstance(messages, str):
        return _words_in(messages)
    return sum(_words_in(m.text) for m in messages)


@functools.lru_cache(maxsize=256)
def _words_in(text: str) -> int:
    # cached: the subtasks of a job all carry its text, which would be split once per call
    return len(text.split())
