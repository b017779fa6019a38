"""The provider interface every model backend implements."""

from __future__ import annotations

from typing import Protocol

from protocols import ChatMessage, LLMRequest, LLMResponse

__all__ = ["LLMProvider", "count_tokens"]


class LLMProvider(Protocol):
    """A model backend. ``complete`` may be called concurrently."""

    name: str
    """Provider name reported in ``LLMResponse.provider``."""

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request``.

        Raises:
            ModelError: the backend failed or answered unusably.
        """
        ...

    async def close(self) -> None:
        """Release resources. Raises ``ScriptError`` if a scripted provider has turns left."""
        ...


def count_tokens(messages: tuple[ChatMessage, ...] | str) -> int:
    """Whitespace-token count: what offline and scripted providers report as usage."""
    if isinstance(messages, str):
        return len(messages.split())
    return sum(len(m.content.split()) for m in messages)
