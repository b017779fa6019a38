"""A provider for tests: plays given turns in order, and refuses to be left half-used.

With a ``context_window`` it refuses a prompt that does not fit, as a real provider does:
its tokenizer is the offline one of :mod:`raytroupe.actors.llm.tokens`, so its counts are exact.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from raytroupe.actors.llm.provider import DeltaSink, word_tokens
from raytroupe.actors.llm.tokens import prompt_tokens
from raytroupe.protocols import (
    ContextTooLong,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    ScriptedModel,
    ScriptError,
    Usage,
)
from raytroupe.protocols.errors import error_class

__all__ = ["ScriptedProvider"]


class ScriptedProvider:
    """Answers each request with the next scripted turn.

    Raises ``ScriptError`` when asked for more turns than scripted, and from :meth:`close`
    when turns remain unused, so a test notices a conversation that went differently.
    ``ContextTooLong`` when the spec has a ``context_window`` that the prompt (messages and
    tool schemas) and its ``max_tokens`` exceed: no turn is played then.
    """

    name = "scripted"

    def __init__(self, spec: ScriptedModel) -> None:
        self._turns = deque(spec.turns)
        self._window = spec.context_window
        self._lock = asyncio.Lock()

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        return len(self._turns)

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        """Play the next turn (raising its error, if it has one)."""
        start = time.perf_counter()
        self._check_window(request)
        async with self._lock:
            if not self._turns:
                raise ScriptError(f"script for model {request.model!r} has no turns left")
            turn = self._turns.popleft()
        if turn.error is not None:
            detail = {} if turn.retry_after_s is None else {"retry_after_s": turn.retry_after_s}
            raise error_class(turn.error)(f"scripted {turn.error.value}", **detail)
        if request.stream and on_delta is not None and turn.text:
            await on_delta(LLMDelta(text=turn.text))
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        prompt = word_tokens(request.messages) if turn.prompt_tokens is None else turn.prompt_tokens
        completion = (
            word_tokens(turn.text) if turn.completion_tokens is None else turn.completion_tokens
        )
        return LLMResponse(
            text=turn.text,
            tool_calls=turn.tool_calls,
            finish_reason=finish,
            usage=Usage(prompt_tokens=prompt, completion_tokens=completion, calls=1),
            model=request.model,
            provider=self.name,
            latency_s=time.perf_counter() - start,
        )

    def _check_window(self, request: LLMRequest) -> None:
        """Refuse a request that does not fit the window, as OpenAI's API does.

        Raises:
            ContextTooLong: the prompt and the answer's ``max_tokens`` exceed the window.
        """
        if self._window is None:
            return
        prompt = prompt_tokens(request.messages, request.tools)
        wanted = prompt + (request.max_tokens or 0)
        if wanted > self._window:
            raise ContextTooLong(
                f"this model's context window is {self._window} tokens; the request asks for "
                f"{wanted} ({prompt} in the prompt, {request.max_tokens or 0} for the answer)",
                prompt_tokens=prompt,
                context_window=self._window,
            )

    async def close(self) -> None:
        """Fail if turns remain unused."""
        if self._turns:
            left = len(self._turns)
            raise ScriptError(f"{left} scripted turn(s) were never used", remaining=left)
