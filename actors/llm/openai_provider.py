"""OpenAI chat completions, and servers that speak them, through the official ``openai`` SDK.

One HTTP request per call (``max_retries=0``): the pool owns retries. ``max_tokens`` is sent
as ``max_completion_tokens`` to OpenAI (its newer models refuse the old name) and as
``max_tokens`` to compatible servers. A streamed answer without a usage chunk reports usage
estimated in whitespace tokens, so budgets still see it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import httpx2
import openai
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionContentPartParam,
    ChatCompletionMessageParam,
)

from raytroupe.actors.llm.provider import DeltaSink, word_tokens
from raytroupe.actors.llm.sdk_errors import (
    STREAM_FAULTS,
    map_sdk_error,
    resolve_api_key,
    safe_cause,
    stream_broke,
)
from raytroupe.actors.llm.textmode import (
    ConstrainedStream,
    TextModeStream,
    constrained_schema,
    count_calls,
    parse_arguments,
    parse_constrained,
    parse_tool_calls,
    to_text_mode,
)
from raytroupe.protocols import (
    BadRequest,
    ChatMessage,
    ImagePart,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    ModelError,
    OpenAICompatibleModel,
    OpenAIModel,
    StreamInterrupted,
    TextPart,
    ToolCall,
    Usage,
)
from raytroupe.protocols.llm import FinishReason

__all__ = ["OpenAIProvider"]

_PLACEHOLDER_KEY: Final = "no-key"
_FAULTS: Final[tuple[type[BaseException], ...]] = (openai.OpenAIError, *STREAM_FAULTS)
_BROKEN: Final[tuple[type[BaseException], ...]] = (openai.APIConnectionError, *STREAM_FAULTS)
_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


class OpenAIProvider:
    """A deployment of OpenAI, or of an OpenAI-compatible server.

    Keys come from the environment variable ``spec.api_key_env`` when the provider is built;
    a compatible server with ``api_key_env=None`` gets a placeholder key, as does OpenAI
    behind a ``base_url`` of its own. With ``native_tools=False`` tools are described in the
    system prompt and calls parsed from the answer (see :mod:`raytroupe.actors.llm.textmode`), and
    with ``constrained_tools`` too the answer is held to a JSON Schema by the server.
    ``api_key`` and ``name`` are for a server raytroupe runs itself (its key is made for it,
    not read from the environment).

    Raises:
        ConfigError: (from the constructor) the key's variable is unset, or none is named
            for OpenAI's own endpoint.
    """

    def __init__(
        self,
        spec: OpenAIModel | OpenAICompatibleModel,
        *,
        http_client: httpx2.AsyncClient | None = None,
        api_key: str | None = None,
        name: str | None = None,
    ) -> None:
        self.name: str = name or spec.provider
        self._spec = spec
        key = api_key or resolve_api_key(
            spec.api_key_env,
            provider=spec.provider,
            model=spec.model,
            required=spec.provider == "openai" and spec.base_url is None,
        )
        self._secrets = (key,) if key else ()
        self._text_tools = isinstance(spec, OpenAICompatibleModel) and not spec.native_tools
        self._constrained = isinstance(spec, OpenAICompatibleModel) and spec.constrained_tools
        self._client = openai.AsyncOpenAI(
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
                response = await self._stream(request, kwargs, on_delta)
            else:
                completion = await self._client.chat.completions.create(**kwargs, stream=False)
                response = self._parse(request, completion)
        except _FAULTS as exc:
            error = map_sdk_error(exc, provider=self.name, secrets=self._secrets)
            raise error from safe_cause(exc, self._secrets)
        return response.model_copy(update={"latency_s": time.perf_counter() - start})

    async def close(self) -> None:
        """Close the SDK client (and the HTTP client it was given)."""
        await self._client.close()

    def _constrains(self, request: LLMRequest) -> bool:
        """Whether this text-mode request's answer is held to :func:`constrained_schema`."""
        return (
            self._text_tools
            and self._constrained
            and bool(request.tools)
            and request.tool_choice != "none"
        )

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The request as keyword arguments of ``chat.completions.create``."""
        messages = request.messages
        constrained = self._constrains(request)
        if self._text_tools:
            messages = to_text_mode(
                messages, request.tools, request.tool_choice, constrained=constrained
            )
        kwargs: dict[str, Any] = {
            "model": self._spec.model,
            "messages": [_message(m) for m in messages],
        }
        # a compatible server (llama.cpp) still shows the tools under tool_choice 'none', and
        # small models then call one anyway: such a request goes without them
        withheld = request.tool_choice == "none" and self._spec.provider == "openai_compatible"
        if request.tools and not self._text_tools and not withheld:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            kwargs["tool_choice"] = request.tool_choice
            if not request.parallel_tool_calls:
                kwargs["parallel_tool_calls"] = False
        if request.reasoning is not None:
            kwargs["reasoning_effort"] = request.reasoning.effort
        schema = request.response_format
        if constrained:
            schema = constrained_schema(request.tools, request.tool_choice, schema)
        if schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema},
            }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            limit = "max_completion_tokens" if self.name == "openai" else "max_tokens"
            kwargs[limit] = request.max_tokens
        if request.stop:
            kwargs["stop"] = list(request.stop)
        return kwargs

    def _parse(self, request: LLMRequest, completion: ChatCompletion) -> LLMResponse:
        if not completion.choices:
            raise ModelError(f"{self.name}: the answer has no choices", provider=self.name)
        choice = completion.choices[0]
        message = choice.message
        text = message.content or ""
        calls = tuple(
            ToolCall(
                call_id=call.id,
                tool=call.function.name,
                arguments=parse_arguments(call.function.arguments, call.function.name),
            )
            for call in message.tool_calls or ()
            if call.type == "function"
        )
        reason = choice.finish_reason
        if message.refusal and not text:
            text, reason = message.refusal, "content_filter"
        if self._text_tools:
            parse = parse_constrained if self._constrains(request) else parse_tool_calls
            text, calls = parse(text, first_index=count_calls(request.messages))
        usage = completion.usage
        finish = _finish(reason, calls)
        return self._response(
            request, text=text, calls=calls, finish=finish, model=completion.model, usage=usage
        )

    def _response(
        self,
        request: LLMRequest,
        *,
        text: str,
        calls: tuple[ToolCall, ...],
        finish: FinishReason,
        model: str | None,
        usage: CompletionUsage | None,
    ) -> LLMResponse:
        """The answer; usage is estimated in whitespace tokens when the server sent none."""
        return LLMResponse(
            text=text,
            tool_calls=calls,
            finish_reason=finish,
            usage=_usage(usage)
            if usage
            else Usage(
                prompt_tokens=word_tokens(request.messages),
                completion_tokens=word_tokens(text),
                calls=1,
            ),
            model=model or self._spec.model,
            provider=self.name,
        )

    async def _stream(
        self, request: LLMRequest, kwargs: dict[str, Any], on_delta: DeltaSink | None
    ) -> LLMResponse:
        stream = await self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        constrained = self._constrains(request)
        filter_ = (
            (ConstrainedStream() if constrained else TextModeStream()) if self._text_tools else None
        )
        state = _StreamState(self._spec.model, on_delta, filter_)
        try:
            async for chunk in stream:
                await state.add(chunk)
        except _BROKEN as exc:  # the SDK wraps transport faults as if the call had failed
            raise stream_broke(exc, provider=self.name) from safe_cause(exc, self._secrets)
        finally:
            await stream.close()
        if state.finish is None:
            raise StreamInterrupted(
                f"{self.name}: the stream ended without a finish reason", provider=self.name
            )
        if filter_ is None:
            text, calls = "".join(state.text), state.tool_calls()
        else:
            parse = parse_constrained if constrained else parse_tool_calls
            text, calls = await state.end_text_mode(filter_, count_calls(request.messages), parse)
        finish = _finish(state.finish, calls)
        return self._response(
            request, text=text, calls=calls, finish=finish, model=state.model, usage=state.usage
        )


class _Parse(Protocol):
    def __call__(self, text: str, *, first_index: int) -> tuple[str, tuple[ToolCall, ...]]: ...


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamState:
    """What a stream delivered so far: text, tool-call fragments by index, finish, usage."""

    def __init__(
        self, model: str, on_delta: DeltaSink | None, filter_: TextModeStream | None
    ) -> None:
        self.model = model
        self.on_delta = on_delta
        self.filter = filter_
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish: str | None = None
        self.usage: CompletionUsage | None = None

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                call_id=c.call_id or f"call_{i}",
                tool=c.name,
                arguments=parse_arguments("".join(c.arguments), c.name),
            )
            for i, c in sorted(self.calls.items())
        )

    async def end_text_mode(
        self, filter_: TextModeStream, first_index: int, parse: _Parse
    ) -> tuple[str, tuple[ToolCall, ...]]:
        """Show the held-back text, then hand on the calls parsed out of the whole answer.

        A constrained answer was held back whole: its text is shown now, once parsed.
        """
        await self.emit(LLMDelta(text=filter_.flush()))
        text, calls = parse(filter_.raw, first_index=first_index)
        if isinstance(filter_, ConstrainedStream):
            await self.emit(LLMDelta(text=text))
        for index, call in enumerate(calls):
            arguments = json.dumps(call.arguments)
            await self.emit(
                LLMDelta(
                    tool_call_index=index,
                    tool_call_id=call.call_id,
                    tool_name=call.tool,
                    arguments=arguments,
                )
            )
        return text, calls

    async def emit(self, delta: LLMDelta) -> None:
        if self.on_delta is not None and (delta.text or delta.tool_call_index is not None):
            await self.on_delta(delta)

    async def add(self, chunk: ChatCompletionChunk) -> None:
        self.model = chunk.model or self.model
        self.usage = chunk.usage or self.usage
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
                shown = self.filter.feed(delta.content) if self.filter else delta.content
                await self.emit(LLMDelta(text=shown))
            for fragment in delta.tool_calls or ():
                call = self.calls.setdefault(fragment.index, _PartialCall())
                call.call_id = call.call_id or fragment.id or ""
                function = fragment.function
                name = function.name if function and function.name else ""
                call.name = call.name or name
                piece = function.arguments if function and function.arguments else ""
                call.arguments.append(piece)
                await self.emit(
                    LLMDelta(
                        tool_call_index=fragment.index,
                        tool_call_id=fragment.id,
                        tool_name=name or None,
                        arguments=piece,
                    )
                )
            if choice.finish_reason is not None:
                self.finish = choice.finish_reason


def _usage(usage: CompletionUsage) -> Usage:
    """A server's usage.

    Its prompt tokens include those read from its cache (OpenAI caches long prompts'
    prefixes by itself), its completion tokens those spent reasoning.
    """
    prompt, completion = usage.prompt_tokens_details, usage.completion_tokens_details
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        calls=1,
        cached_tokens=(prompt.cached_tokens or 0) if prompt else 0,
        reasoning_tokens=(completion.reasoning_tokens or 0) if completion else 0,
    )


def _finish(reason: str | None, calls: tuple[ToolCall, ...]) -> FinishReason:
    if calls and reason in (None, "stop", "tool_calls", "function_call"):
        return "tool_calls"  # some compatible servers say 'stop' after tool calls
    return _FINISH.get(reason or "", "stop")


def _message(message: ChatMessage) -> ChatCompletionMessageParam:
    match message.role:
        case "system":
            return {"role": "system", "content": message.text}
        case "user":
            if isinstance(message.content, str):
                return {"role": "user", "content": message.content}
            return {"role": "user", "content": [_part(p) for p in message.content]}
        case "assistant":
            if not message.tool_calls:
                return {"role": "assistant", "content": message.text}
            return {
                "role": "assistant",
                "content": message.text or None,
                "tool_calls": [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.tool, "arguments": json.dumps(c.arguments)},
                    }
                    for c in message.tool_calls
                ],
            }
        case "tool":
            if not message.tool_call_id:
                raise BadRequest("a tool message needs the tool_call_id it answers")
            return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}


def _part(part: TextPart | ImagePart) -> ChatCompletionContentPartParam:
    if isinstance(part, ImagePart):
        url = part.url or f"data:{part.media_type};base64,{part.data_b64}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "text", "text": part.text}
