"""Anthropic messages wire shapes for the test server: parsing, JSON, SSE events, errors."""

from __future__ import annotations

import json
from typing import Any

from tests.support.wire_model import (
    Answer,
    Conversation,
    HttpError,
    digest,
    json_fragments,
    signature,
    text_pieces,
    words,
)

STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
CONTEXT_LIMIT = 200000


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(content: Any) -> str:
    return " ".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def conversation(body: dict[str, Any]) -> Conversation:
    """Read system, messages, tools and tool_choice of a messages request."""
    msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    total = words(_text(body.get("system")))
    user_texts: list[str] = []
    for m in msgs:
        blocks = _blocks(m.get("content"))
        total += words(_text(blocks))
        total += sum(
            words(_text(b.get("content"))) for b in blocks if b.get("type") == "tool_result"
        )
        if m.get("role") == "user" and any(b.get("type") == "text" for b in blocks):
            user_texts.append(_text(blocks))
    last = msgs[-1] if msgs else {}
    last_blocks = _blocks(last.get("content"))
    results = tuple(_text(b.get("content")) for b in last_blocks if b.get("type") == "tool_result")
    if last.get("role") == "user":
        kind = "tool_result" if results else "user"
    else:
        kind = "assistant" if last.get("role") == "assistant" else "none"
    tools = tuple(
        (str(t["name"]), t.get("input_schema") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t
    )
    choice = body.get("tool_choice") or {}
    thinking = body.get("thinking") or {}
    budget = thinking.get("budget_tokens") if thinking.get("type") == "enabled" else None
    return Conversation(
        model=str(body.get("model", "")),
        words=total,
        cache_points=_breakpoints(body),
        thinking_budget=budget,
        problem=_thinking_problem(body, msgs, budget, choice),
        last_kind=kind,  # type: ignore[arg-type]
        last_user_text=user_texts[-1] if user_texts else "",
        tool_results=results,
        tools=tools,
        forced_tool=choice.get("name") if choice.get("type") == "tool" else None,
        tools_disabled=choice.get("type") == "none",
        stream=bool(body.get("stream")),
        include_usage=True,
    )


def _breakpoints(body: dict[str, Any]) -> tuple[tuple[str, int, bool], ...]:
    """Each block boundary (tools, system, messages) up to the last ``cache_control``."""
    seen: list[Any] = []
    count = 0
    points: list[tuple[str, int, bool]] = []
    blocks: list[tuple[Any, str]] = [(t, "") for t in body.get("tools") or []]
    blocks += [(b, _text([b])) for b in _blocks(body.get("system"))]
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            for b in _blocks(m.get("content")):
                inner = _text(b.get("content")) if b.get("type") == "tool_result" else ""
                blocks.append(({"role": m.get("role"), **b}, f"{_text([b])} {inner}"))
    for block, text in blocks:
        if not isinstance(block, dict):
            continue
        seen.append({k: v for k, v in block.items() if k != "cache_control"})
        count += words(text)
        points.append((digest(seen), count, bool(block.get("cache_control"))))
    last = max((i for i, p in enumerate(points) if p[2]), default=-1)
    return tuple(points[: last + 1])


def _thinking_problem(
    body: dict[str, Any], msgs: list[dict[str, Any]], budget: Any, choice: dict[str, Any]
) -> str | None:
    """The 400 the messages API answers a request that breaks a rule of extended thinking."""
    if budget is None:
        return None
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= int(body.get("max_tokens") or 0):
        return "`max_tokens` must be greater than `thinking.budget_tokens`."
    if choice.get("type") in {"any", "tool"}:
        return "Thinking may not be enabled when tool_choice forces tool use."
    return _thoughts_problem(msgs)


def _thoughts_problem(msgs: list[dict[str, Any]]) -> str | None:
    """A thinking block sent back altered, or a tool-use turn sent back without its own."""
    for index, m in enumerate(msgs):
        for block in _blocks(m.get("content")):
            sealed = signature(str(block.get("thinking", "")))
            if block.get("type") == "thinking" and block.get("signature") != sealed:
                return f"messages.{index}.content: Invalid `signature` in `thinking` block"
    turns = [i for i, m in enumerate(msgs) if m.get("role") == "assistant"]
    blocks = _blocks(msgs[turns[-1]].get("content")) if turns else []
    if any(b.get("type") == "tool_use" for b in blocks) and blocks[0].get("type") not in {
        "thinking",
        "redacted_thinking",
    }:
        return (
            f"messages.{turns[-1]}.content.0.type: Expected `thinking` or `redacted_thinking`, "
            f"but found `{blocks[0].get('type')}`. When `thinking` is enabled, a final "
            "`assistant` message must start with a thinking block."
        )
    return None


def _usage(answer: Answer, output_tokens: int | None = None) -> dict[str, Any]:
    cached = answer.cached_tokens + answer.cache_write_tokens
    return {
        "input_tokens": max(0, answer.prompt_tokens - cached),
        "output_tokens": answer.completion_tokens if output_tokens is None else output_tokens,
        "cache_creation_input_tokens": answer.cache_write_tokens,
        "cache_read_input_tokens": answer.cached_tokens,
        "service_tier": "standard",
    }


def message(answer: Answer, conv: Conversation, rid: str) -> dict[str, Any]:
    """A non-streamed ``message`` object."""
    content: list[dict[str, Any]] = []
    if answer.thinking is not None:
        content.append(
            {
                "type": "thinking",
                "thinking": answer.thinking,
                "signature": signature(answer.thinking),
            }
        )
    if answer.text or not answer.tool_calls:
        content.append({"type": "text", "text": answer.text})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
        for c in answer.tool_calls
    ]
    return {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": content,
        "stop_reason": STOP[answer.finish],
        "stop_sequence": None,
        "usage": _usage(answer),
    }


def event(name: str, data: dict[str, Any]) -> bytes:
    """One SSE event: an ``event:`` line and a ``data:`` line."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def stream_frames(answer: Answer, conv: Conversation, rid: str) -> tuple[list[bytes], list[bytes]]:
    """(events up to the last content_block_stop, [message_delta, message_stop])."""
    start = message(answer, conv, rid) | {
        "content": [],
        "stop_reason": None,
        "usage": _usage(answer, 1),
    }
    body = [event("message_start", {"type": "message_start", "message": start})]
    body.append(event("ping", {"type": "ping"}))
    index = 0
    if answer.thinking is not None:
        block = {"type": "thinking", "thinking": "", "signature": ""}
        body.append(event("content_block_start", _start(index, block)))
        body += [
            event("content_block_delta", _delta(index, {"type": "thinking_delta", "thinking": p}))
            for p in text_pieces(answer.thinking)
        ]
        sealed = {"type": "signature_delta", "signature": signature(answer.thinking)}
        body.append(event("content_block_delta", _delta(index, sealed)))
        body.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if answer.text or not answer.tool_calls:
        block = {"type": "text", "text": ""}
        body.append(event("content_block_start", _start(index, block)))
        body += [
            event("content_block_delta", _delta(index, {"type": "text_delta", "text": piece}))
            for piece in text_pieces(answer.text)
        ]
        body.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call in answer.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        body.append(event("content_block_start", _start(index, block)))
        for frag in ["", *json_fragments(call.arguments)]:
            delta = {"type": "input_json_delta", "partial_json": frag}
            body.append(event("content_block_delta", _delta(index, delta)))
        body.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    final = {
        "type": "message_delta",
        "delta": {"stop_reason": STOP[answer.finish], "stop_sequence": None},
        "usage": _usage(answer),
    }
    tail = [event("message_delta", final), event("message_stop", {"type": "message_stop"})]
    return body, tail


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


ERROR_TYPES = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(err: HttpError, conv: Conversation, request_id: str) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    if err.kind == "context_length":
        etype = "invalid_request_error"
        used = CONTEXT_LIMIT + max(conv.words, 1)
        text = f"prompt is too long: {used} tokens > {CONTEXT_LIMIT} maximum"
    else:
        fallback = ("api_error", "Internal server error") if err.status >= 500 else ERROR_TYPES[400]
        etype, text = ERROR_TYPES.get(err.status, fallback)
        if err.status == 404:
            text = f"model: {conv.model}"
    return {
        "type": "error",
        "error": {"type": err.error_type or etype, "message": err.message or text},
        "request_id": request_id,
    }


def stream_error(error_type: str | None, message: str | None, request_id: str) -> bytes:
    """The in-stream ``event: error`` (e.g. overloaded_error after the stream began)."""
    data = {
        "type": "error",
        "error": {"type": error_type or "overloaded_error", "message": message or "Overloaded"},
        "request_id": request_id,
    }
    return event("error", data)


def models_body(models: list[str]) -> dict[str, Any]:
    """``GET /v1/models`` page, Anthropic style."""
    data = [
        {
            "type": "model",
            "id": m,
            "display_name": m,
            "created_at": "2025-01-01T00:00:00Z",
        }
        for m in models
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": models[0] if models else None,
        "last_id": models[-1] if models else None,
    }
