"""Anthropic messages through the official ``anthropic`` SDK.

One HTTP request per call (``max_retries=0``): the pool owns retries. System messages become
the ``system`` parameter; tool results become ``tool_result`` blocks of a user turn. A
``response_format`` is asked for in the system prompt (Anthropic's own structured outputs
refuse many JSON Schema keywords, such as ``maxItems``), so the answer is JSON text.
``temperature`` is not sent: the messages API of SDK 2.x takes no sampling parameters.

Prompt caching (``AnthropicModel.prompt_cache``): the last tool, the system prompt and the
last message's last block are cache breakpoints, so each turn of an agent's loop reads the
turns before it from the cache. Extended thinking (``LLMRequest.reasoning``): a budget of
thinking tokens on top of the answer's ``max_tokens``; the thinking blocks of an answer come
back as ``Thought`` objects, sent back with that assistant turn as the API requires for tool use.
Thinking is not asked for with ``tool_choice`` 'required', which the API refuses with it.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Final, Literal, cast

import anthropic
import httpx2
from anthropic.types import (
    CacheControlEphemeralParam,
    ContentBlockParam,
    ImageBlockParam,
    Message,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageStreamEvent,
    SignatureDelta,
    TextBlockParam,
    ThinkingDelta,
    ToolChoiceParam,
    ToolParam,
    ToolResultBlockParam,
)

from raytroupe.actors.llm.provider import DeltaSink
from raytroupe.actors.llm.sdk_errors import (
    STREAM_FAULTS,
    map_sdk_error,
    resolve_api_key,
    safe_cause,
    stream_broke,
)
from raytroupe.actors.llm.textmode import parse_arguments
from raytroupe.protocols import (
    AnthropicModel,
    BadRequest,
    ChatMessage,
    ImagePart,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    StreamInterrupted,
    TextPart,
    Thought,
    ToolCall,
    Usage,
)
from raytroupe.protocols.llm import FinishReason

__all__ = ["AnthropicProvider"]

_PLACEHOLDER_KEY: Final = "no-key"
_FAULTS: Final[tuple[type[BaseException], ...]] = (anthropic.AnthropicError, *STREAM_FAULTS)
_BROKEN: Final[tuple[type[BaseException], ...]] = (anthropic.APIConnectionError, *STREAM_FAULTS)
_MediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
_MEDIA_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_DATA_URL: Final = re.compile(r"^data:(?P<media>[\w/+.-]+);base64,(?P<data>.*)$", re.S)
_FINISH: Final[dict[str, FinishReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_CHOICES: Final[dict[str, ToolChoiceParam]] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}
_THINKING: Final[dict[str, int]] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
"""Thinking budgets of the reasoning efforts, for a request that names no budget."""
_BREAKPOINT: Final[CacheControlEphemeralParam] = {"type": "ephemeral"}


class AnthropicProvider:
    """A deployment of Anthropic's messages API.

    The key comes from the environment variable ``spec.api_key_env`` when the provider is
    built (``api_key_env=None`` is allowed only with a ``base_url``, e.g. a keyless proxy).

    Raises:
        ConfigError: (from the constructor) the key's variable is unset, or none is named
            for Anthropic's own endpoint.
    """

    name = "anthropic"

    def __init__(
        self, spec: AnthropicModel, *, http_client: httpx2.AsyncClient | None = None
    ) -> None:
        self._spec = spec
        key = resolve_api_key(
            spec.api_key_env,
            provider=self.name,
            model=spec.model,
            required=spec.base_url is None,
        )
        self._secrets = (key,) if key else ()
        self._client = anthropic.AsyncAnthropic(
            api_key=key or _PLACEHOLDER_KEY,
            base_url=spec.base_url,
            max_retries=0,
            timeout=spec.timeout_s,
            http_client=http_client,
        )

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        """Answer ``request``; see ``LLMProvider.complete`` for the contract."""
        start = time.perf_counter()
        kwargs = self._kwargs(request)
        try:
            if request.stream:
                state = await self._stream(kwargs, on_delta)
            else:
                state = _State(self._spec.model)
                state.add_message(await self._client.messages.create(**kwargs, stream=False))
        except _FAULTS as exc:
            error = map_sdk_error(exc, provider=self.name, secrets=self._secrets)
            raise error from safe_cause(exc, self._secrets)
        return LLMResponse(
            text="".join(state.text),
            tool_calls=state.tool_calls(),
            finish_reason=_FINISH.get(state.stop_reason or "", "stop"),
            usage=state.usage(),
            thoughts=state.thoughts(),
            model=state.model,
            provider=self.name,
            latency_s=time.perf_counter() - start,
        )

    async def close(self) -> None:
        """Close the SDK client (and the HTTP client it was given)."""
        await self._client.close()

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The request as keyword arguments of ``messages.create``."""
        system = [m.text for m in request.messages if m.role == "system" and m.text]
        if request.response_format is not None:
            schema = json.dumps(request.response_format, sort_keys=True)
            system.append(
                "Answer with one JSON value only (no prose, no code fences) that satisfies "
                f"this JSON Schema: {schema}"
            )
        cached = self._spec.prompt_cache
        kwargs: dict[str, Any] = {
            "model": self._spec.model,
            "max_tokens": request.max_tokens or self._spec.max_tokens,
            "messages": _messages(request.messages, cached=cached),
        }
        if system:
            block: TextBlockParam = {"type": "text", "text": "\n\n".join(system)}
            if cached:
                block["cache_control"] = _BREAKPOINT
            kwargs["system"] = [block]
        if request.tools:
            kwargs["tools"] = _tools(request, cached=cached)
            choice = dict(_CHOICES[request.tool_choice])
            if not request.parallel_tool_calls and request.tool_choice != "none":
                choice["disable_parallel_tool_use"] = True
            kwargs["tool_choice"] = choice
        if request.reasoning is not None and request.tool_choice != "required":
            budget = request.reasoning.budget_tokens or _THINKING[request.reasoning.effort]
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
            kwargs["max_tokens"] += budget  # the answer's room stays the answer's
        if request.stop:
            kwargs["stop_sequences"] = list(request.stop)
        return kwargs

    async def _stream(self, kwargs: dict[str, Any], on_delta: DeltaSink | None) -> _State:
        stream = await self._client.messages.create(**kwargs, stream=True)
        state = _State(self._spec.model)
        try:
            async for event in stream:
                delta = state.add_event(event)
                if delta is not None and on_delta is not None:
                    await on_delta(delta)
        except _BROKEN as exc:  # raw httpx2 and JSON errors: the SDK leaves them unwrapped
            raise stream_broke(exc, provider=self.name) from safe_cause(exc, self._secrets)
        finally:
            await stream.close()
        if not state.stopped or state.stop_reason is None:
            raise StreamInterrupted(
                f"{self.name}: the stream ended before message_stop", provider=self.name
            )
        return state


class _State:
    """An answer as it builds up: from a whole ``Message``, or event by event."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.calls: dict[int, tuple[str, str]] = {}  # index -> (id, name)
        self.json: dict[int, list[str]] = {}
        self.inputs: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.stopped = False
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read = 0
        self.cache_written = 0
        self.thinking: dict[int, Thought] = {}

    def usage(self) -> Usage:
        """The call's usage.

        Anthropic counts cache reads and writes apart from the other input tokens, which
        ``Usage`` counts them among.
        """
        prompt = self.input_tokens + self.cache_read + self.cache_written
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=self.output_tokens,
            calls=1,
            cached_tokens=self.cache_read,
            cache_write_tokens=self.cache_written,
        )

    def thoughts(self) -> tuple[Thought, ...]:
        return tuple(thought for _, thought in sorted(self.thinking.items()))

    def _cache(self, usage: Any) -> None:
        self.cache_read = getattr(usage, "cache_read_input_tokens", None) or self.cache_read
        self.cache_written = (
            getattr(usage, "cache_creation_input_tokens", None) or self.cache_written
        )

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(call_id=call_id, tool=name, arguments=self.inputs.get(index, {}))
            for index, (call_id, name) in sorted(self.calls.items())
        )

    def add_message(self, message: Message) -> None:
        self.model = message.model or self.model
        for index, block in enumerate(message.content):
            if block.type == "text":
                self.text.append(block.text)
            elif block.type == "tool_use":
                self.calls[index] = (block.id, block.name)
                self.inputs[index] = dict(block.input or {})
            elif block.type == "thinking":
                self.thinking[index] = Thought(
                    provider="anthropic", text=block.thinking, signature=block.signature
                )
            elif block.type == "redacted_thinking":
                self.thinking[index] = Thought(provider="anthropic", redacted=block.data)
        self.stop_reason = message.stop_reason
        self.stopped = True
        self.input_tokens = message.usage.input_tokens
        self.output_tokens = message.usage.output_tokens
        self._cache(message.usage)

    def _think(self, index: int, delta: ThinkingDelta | SignatureDelta) -> None:
        """A thinking block's streamed text or signature, added to what it holds."""
        thought = self.thinking.get(index, Thought(provider="anthropic"))
        if delta.type == "thinking_delta":
            thought = thought.model_copy(update={"text": thought.text + delta.thinking})
        else:
            thought = thought.model_copy(
                update={"signature": (thought.signature or "") + delta.signature}
            )
        self.thinking[index] = thought

    def add_event(self, event: RawMessageStreamEvent) -> LLMDelta | None:
        """Take in one stream event; the delta to hand on, if it carries one."""
        match event.type:
            case "message_start":
                self.model = event.message.model or self.model
                self.input_tokens = event.message.usage.input_tokens
                self.output_tokens = event.message.usage.output_tokens
                self._cache(event.message.usage)
            case "content_block_start":
                return self._start(event)
            case "content_block_delta":
                return self._delta(event)
            case "content_block_stop":
                if event.index in self.calls:
                    name = self.calls[event.index][1]
                    self.inputs[event.index] = parse_arguments(
                        "".join(self.json[event.index]), name
                    )
            case "message_delta":
                self.stop_reason = event.delta.stop_reason or self.stop_reason
                self.output_tokens = event.usage.output_tokens
                if event.usage.input_tokens is not None:
                    self.input_tokens = event.usage.input_tokens
                self._cache(event.usage)
            case "message_stop":
                self.stopped = True
        return None

    def _start(self, event: RawContentBlockStartEvent) -> LLMDelta | None:
        block = event.content_block
        match block.type:
            case "thinking":
                self.thinking[event.index] = Thought(
                    provider="anthropic", text=block.thinking, signature=block.signature or None
                )
            case "redacted_thinking":
                self.thinking[event.index] = Thought(provider="anthropic", redacted=block.data)
            case "tool_use":
                self.calls[event.index] = (block.id, block.name)
                self.json[event.index] = []
                return LLMDelta(
                    tool_call_index=event.index, tool_call_id=block.id, tool_name=block.name
                )
            case "text" if block.text:
                self.text.append(block.text)
                return LLMDelta(text=block.text)
        return None

    def _delta(self, event: RawContentBlockDeltaEvent) -> LLMDelta | None:
        delta = event.delta
        match delta.type:
            case "text_delta" if delta.text:
                self.text.append(delta.text)
                return LLMDelta(text=delta.text)
            case "thinking_delta" | "signature_delta":
                self._think(event.index, delta)
            case "input_json_delta" if event.index in self.calls:
                self.json[event.index].append(delta.partial_json)
                return LLMDelta(tool_call_index=event.index, arguments=delta.partial_json)
        return None


def _tools(request: LLMRequest, *, cached: bool) -> list[ToolParam]:
    """The request's tools; the last one a cache breakpoint (for all of them) if ``cached``."""
    tools: list[ToolParam] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in request.tools
    ]
    if cached:
        tools[-1]["cache_control"] = _BREAKPOINT
    return tools


def _messages(messages: tuple[ChatMessage, ...], *, cached: bool) -> list[MessageParam]:
    """The turns; the last one's last block a cache breakpoint if ``cached``.

    The next call of the conversation then reads all of it from the cache.
    """
    out = _turns(messages)
    if cached and out:
        last = out[-1]
        content = last["content"]
        blocks = (
            [cast("ContentBlockParam", {"type": "text", "text": content})]
            if isinstance(content, str)
            else list(cast("list[ContentBlockParam]", content))
        )
        if blocks and blocks[-1].get("type") not in {"thinking", "redacted_thinking"}:
            blocks[-1] = cast("ContentBlockParam", {**blocks[-1], "cache_control": _BREAKPOINT})
            out[-1] = cast("MessageParam", {"role": last["role"], "content": blocks})
    return out


def _turns(messages: tuple[ChatMessage, ...]) -> list[MessageParam]:
    """User and assistant turns; consecutive tool results merge into one user turn."""
    out: list[MessageParam] = []
    merging = False
    for message in messages:
        match message.role:
            case "system":
                continue
            case "tool":
                if not message.tool_call_id:
                    raise BadRequest("a tool message needs the tool_call_id it answers")
                result: ToolResultBlockParam = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.text,
                }
                if merging:
                    cast("list[ContentBlockParam]", out[-1]["content"]).append(result)
                else:
                    out.append({"role": "user", "content": [result]})
                merging = True
                continue
            case "user":
                if isinstance(message.content, str):
                    out.append({"role": "user", "content": message.content})
                else:
                    out.append({"role": "user", "content": [_part(p) for p in message.content]})
            case "assistant" if not message.tool_calls and not message.thoughts:
                out.append({"role": "assistant", "content": message.text})
            case "assistant":
                blocks: list[ContentBlockParam] = [
                    _thought(t) for t in message.thoughts if t.provider == "anthropic"
                ]
                if message.text:
                    blocks.append({"type": "text", "text": message.text})
                blocks.extend(
                    {"type": "tool_use", "id": c.call_id, "name": c.tool, "input": c.arguments}
                    for c in message.tool_calls
                )
                out.append({"role": "assistant", "content": blocks})
        merging = False
    return out


def _thought(thought: Thought) -> ContentBlockParam:
    """A thinking block, sent back as it came."""
    if thought.redacted is not None:
        return {"type": "redacted_thinking", "data": thought.redacted}
    return {"type": "thinking", "thinking": thought.text, "signature": thought.signature or ""}


def _part(part: TextPart | ImagePart) -> TextBlockParam | ImageBlockParam:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    media, data = part.media_type, part.data_b64
    if part.url is not None:
        match = _DATA_URL.match(part.url)
        if match is None:
            return {"type": "image", "source": {"type": "url", "url": part.url}}
        media, data = match.group("media"), match.group("data")
    if media not in _MEDIA_TYPES:
        raise BadRequest(f"Anthropic takes no images of type {media!r}", media_type=media)
    source_media = cast("_MediaType", media)
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": source_media, "data": data or ""},
    }
