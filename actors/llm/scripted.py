"""A provider for tests: plays given turns in order, and refuses to be left half-used."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from actors.llm.provider import count_tokens
from protocols import LLMRequest, LLMResponse, ScriptedModel, ScriptError, Usage

__all__ = ["ScriptedProvider"]


class ScriptedProvider:
    """Answers each request with the next scripted turn.

    Raises ``ScriptError`` when asked for more turns than scripted, and from :meth:`close`
    when turns remain unused, so a test notices a conversation that went differently.
    """

    name = "scripted"

    def __init__(self, spec: ScriptedModel) -> None:
        self._turns = deque(spec.turns)
        self._lock = asyncio.Lock()

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        return len(self._turns)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Play the next turn."""
        start = time.perf_counter()
        async with self._lock:
            if not self._turns:
                raise ScriptError(f"script for model {request.model!r} has no turns left")
            turn = self._turns.popleft()
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        return LLMResponse(
            text=turn.text,
            tool_calls=turn.tool_calls,
            finish_reason=finish,
            usage=Usage(
                prompt_tokens=count_tokens(request.messages),
                completion_tokens=count_tokens(turn.text),
                calls=1,
            ),
            model=request.model,
            provider=self.name,
            latency_s=time.perf_counter() - start,
        )

    async def close(self) -> None:
        """Fail if turns remain unused."""
        if self._turns:
            left = len(self._turns)
            raise ScriptError(f"{left} scripted turn(s) were never used", remaining=left)
