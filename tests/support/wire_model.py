"""Protocol-neutral model of the wire test server: scripted behaviours and the default answer.

Behaviours are plain frozen values queued with ``WireServer.script(...)``; every completion
request (``POST /v1/chat/completions`` or ``POST /v1/messages``) pops the next one, or gets
``Default()`` when the queue is empty. ``wire_openai`` and ``wire_anthropic`` turn the neutral
``Conversation`` / ``Answer`` values into each provider's JSON and SSE shapes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Finish = Literal["stop", "tool_calls", "length"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply; ``id`` is generated (call_... / toolu_...) when left out."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful answer: text, tool calls or both (text first).

    ``finish`` defaults to "tool_calls" when there are calls, else "stop" (rendered as the
    provider's stop_reason / finish_reason). Token counts default to the word counts.
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    finish: Finish | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def tool(cls, name: str, arguments: Mapping[str, Any] | None = None, text: str = "") -> Reply:
        """A reply calling one tool."""
        return cls(text=text, tool_calls=(ToolCall(name, dict(arguments or {})),))


@dataclass(frozen=True)
class Default:
    """The deterministic default answer (see ``default_reply``)."""


@dataclass(frozen=True)
class HttpError:
    """An HTTP error in the provider's JSON error shape.

    ``error_type``/``code``/``message`` default per status and protocol; ``kind="context_length"``
    renders each provider's real context-overflow message. ``retry_after`` (seconds, number or
    HTTP-date string) and ``retry_after_ms`` become ``retry-after`` / ``retry-after-ms``
    headers; ``headers`` adds more (e.g. ``{"x-should-retry": "false"}``); ``body`` replaces the
    JSON body entirely (a str is sent as text/plain).
    """

    status: int
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    kind: Literal["context_length"] | None = None
    retry_after: float | str | None = None
    retry_after_ms: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` (asyncio.sleep in the server), then behave as ``then`` (default answer)."""

    seconds: float
    then: Behaviour | None = None


@dataclass(frozen=True)
class Truncate:
    """Send the first ``after_chunks`` SSE events of ``then``, then end the body cleanly.

    Never sends the finish chunk, usage chunk, ``[DONE]``, message_delta or message_stop
    (``after_chunks`` is capped below them). A non-streamed request gets half its JSON body and
    a dropped connection, as with ``Drop``.
    """

    after_chunks: int
    then: Reply | Default | None = None


@dataclass(frozen=True)
class Drop:
    """Send the first ``after_chunks`` SSE events, then close the TCP connection abruptly.

    The chunked body is left incomplete, so the client sees a protocol error, not an end of
    stream. A non-streamed request gets its headers and half its JSON body, then the close.
    """

    after_chunks: int = 0
    then: Reply | Default | None = None


@dataclass(frozen=True)
class StreamError:
    """Send ``after_chunks`` SSE events, then the provider's in-stream error and end the body.

    OpenAI: ``data: {"error": {...}}``; Anthropic: ``event: error`` with an error body
    (``error_type`` defaults to server_error / overloaded_error). Non-streamed: a 500.
    """

    after_chunks: int = 1
    error_type: str | None = None
    message: str | None = None
    then: Reply | Default | None = None


@dataclass(frozen=True)
class Stall:
    """Send ``after_chunks`` SSE events, pause ``seconds``, then send the rest (read timeouts)."""

    after_chunks: int
    seconds: float
    then: Reply | Default | None = None


@dataclass(frozen=True)
class Hold:
    """Send ``after_chunks`` SSE events, wait until ``release`` is set, then send the rest.

    For a test that looks at what the first events did while the rest does not exist yet:
    it sets ``release`` (a ``threading.Event``) once it has looked, with no timing bound.
    ``seconds`` bounds the wait in case it never does (and the server's stop ends it).
    """

    after_chunks: int
    release: threading.Event
    seconds: float = 120.0
    then: Reply | Default | None = None


Behaviour = (
    Reply
    | Default
    | HttpError
    | Delay
    | Truncate
    | Drop
    | StreamError
    | Stall
    | Hold
    | Callable[[Any], "Behaviour"]
)


def rate_limited(
    retry_after: float | str | None = None, retry_after_ms: int | None = None
) -> HttpError:
    """A 429 with the given retry headers."""
    return HttpError(429, retry_after=retry_after, retry_after_ms=retry_after_ms)


def overloaded(retry_after: float | str | None = None) -> HttpError:
    """A 529 overloaded_error (Anthropic's overload status; OpenAI SDKs see a >=500)."""
    return HttpError(529, retry_after=retry_after)


def server_error(status: int = 500) -> HttpError:
    """A 5xx in the provider's shape (api_error / server_error)."""
    return HttpError(status)


def context_length_exceeded() -> HttpError:
    """A 400 with each provider's context-overflow error shape and wording."""
    return HttpError(400, kind="context_length")


@dataclass(frozen=True)
class Conversation:
    """What the server understood of a request, protocol-neutral."""

    model: str
    words: int  # whitespace words of all message texts (and the system prompt)
    last_kind: Literal["user", "tool_result", "assistant", "none"]
    last_user_text: str
    tool_results: tuple[str, ...]  # texts of the tool results in the last message(s)
    tools: tuple[tuple[str, Mapping[str, Any]], ...]  # (name, JSON schema of the arguments)
    forced_tool: str | None = None
    tools_disabled: bool = False
    stream: bool = False
    include_usage: bool = False
    cache_points: tuple[tuple[str, int, bool], ...] = ()
    """(digest of the prompt up to a point, its words, whether it is written there): each
    block boundary up to Anthropic's last cache_control breakpoint, a read there and written
    at the breakpoints; each message boundary for OpenAI (which caches prefixes itself)."""
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    problem: str | None = None
    """Why the provider would refuse the request with a 400 (a thinking rule broken)."""
    cached: int = 0
    """Prompt words read from the cache (set by the server, which keeps the cache)."""
    written: int = 0
    """Prompt words written to the cache (Anthropic's breakpoints not seen before)."""


@dataclass(frozen=True)
class Answer:
    """A reply resolved against a conversation: ids assigned, usage counted."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish: Finish
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    thinking: str | None = None
    """The thinking block's text (asked for with Anthropic's ``thinking``), signed."""


REASONING_TOKENS = {"minimal": 8, "low": 16, "medium": 64, "high": 256}
"""Completion tokens an OpenAI reasoning answer spends thinking, by effort."""
_THINKING_KEY = b"wire-server-thinking"


def signature(thinking: str) -> str:
    """The signature of a thinking block's text: a real one cannot be forged or edited."""
    return hmac.new(_THINKING_KEY, thinking.encode(), hashlib.sha256).hexdigest()


def digest(parts: Sequence[Any]) -> str:
    """A prompt prefix's identity, for the cache."""
    raw = json.dumps(list(parts), sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def words(text: str) -> int:
    """Whitespace word count, the server's token unit."""
    return len(text.split())


def derive_arguments(schema: Mapping[str, Any], user_text: str) -> dict[str, Any]:
    """Simple arguments for the required properties of a JSON schema ({} when none)."""
    props = schema.get("properties") or {}
    filler: dict[str, Any] = {
        "string": user_text,
        "integer": words(user_text),
        "number": float(words(user_text)),
        "boolean": True,
        "array": [],
        "object": {},
    }
    out: dict[str, Any] = {}
    for name in schema.get("required") or []:
        kind = (props.get(name) or {}).get("type", "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        out[name] = filler.get(kind, user_text)
    return out


def default_reply(conv: Conversation) -> Reply:
    """Tool call after a user turn when tools are offered, "done: ..." after results, else echo."""
    if conv.last_kind == "user" and conv.tools and not conv.tools_disabled:
        by_name = dict(conv.tools)
        name = conv.forced_tool if conv.forced_tool in by_name else conv.tools[0][0]
        return Reply.tool(name, derive_arguments(by_name[name], conv.last_user_text))
    if conv.last_kind == "tool_result":
        return Reply(text="done: " + "; ".join(conv.tool_results))
    return Reply(text="echo: " + conv.last_user_text)


def resolve(reply: Reply, conv: Conversation, new_id: Callable[[], str]) -> Answer:
    """Assign tool-call ids and count usage (completion = answer words + call name/JSON words)."""
    calls = tuple(ToolCall(c.name, dict(c.arguments), c.id or new_id()) for c in reply.tool_calls)
    completion = words(reply.text) + sum(
        words(c.name) + words(json.dumps(dict(c.arguments))) for c in calls
    )
    finish: Finish = reply.finish or ("tool_calls" if calls else "stop")
    reasoning = REASONING_TOKENS.get(conv.reasoning_effort or "", 0)
    thinking = None
    if conv.thinking_budget:
        thinking = f"Thinking about: {conv.last_user_text or '; '.join(conv.tool_results)}"
        reasoning = min(words(thinking), conv.thinking_budget)
    return Answer(
        text=reply.text,
        tool_calls=calls,
        finish=finish,
        prompt_tokens=conv.words if reply.prompt_tokens is None else reply.prompt_tokens,
        completion_tokens=(
            completion if reply.completion_tokens is None else reply.completion_tokens
        )
        + reasoning,
        cached_tokens=conv.cached,
        cache_write_tokens=conv.written,
        reasoning_tokens=reasoning,
        thinking=thinking,
    )


def text_pieces(text: str) -> list[str]:
    """Split text into streaming deltas, one word (with its leading whitespace) per piece."""
    pieces = re.findall(r"\s*\S+", text)
    rest = text[len("".join(pieces)) :]
    if rest:
        pieces.append(rest)
    return pieces


def json_fragments(arguments: Mapping[str, Any], parts: int = 3) -> list[str]:
    """The JSON of the arguments cut into ``parts`` fragments (fewer for very short JSON)."""
    raw = json.dumps(dict(arguments))
    size = max(1, -(-len(raw) // parts))
    return [raw[i : i + size] for i in range(0, len(raw), size)]
