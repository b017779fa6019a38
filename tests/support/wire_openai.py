"""OpenAI chat-completions wire shapes for the test server: parsing, JSON, SSE chunks, errors."""

from __future__ import annotations

import json
from typing import Any

from tests.support.wire_model import (
    Answer,
    Conversation,
    HttpError,
    digest,
    json_fragments,
    text_pieces,
    words,
)

FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}
FINGERPRINT = "fp_wire_test"
CONTEXT_LIMIT = 128000


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def conversation(body: dict[str, Any]) -> Conversation:
    """Read messages, tools and streaming options of a chat-completions request."""
    msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    user_texts = [_text(m.get("content")) for m in msgs if m.get("role") == "user"]
    last_role = msgs[-1].get("role") if msgs else None
    tool_results: list[str] = []
    if last_role == "tool":
        for m in reversed(msgs):
            if m.get("role") != "tool":
                break
            tool_results.insert(0, _text(m.get("content")))
    kinds = {"user": "user", "tool": "tool_result", "assistant": "assistant"}
    tools = tuple(
        (t["function"]["name"], t["function"].get("parameters") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    )
    choice = body.get("tool_choice")
    forced = None
    if isinstance(choice, dict):
        forced = (choice.get("function") or {}).get("name")
    counts = [words(_text(m.get("content"))) for m in msgs]
    effort = body.get("reasoning_effort")
    return Conversation(
        model=str(body.get("model", "")),
        words=sum(counts),
        cache_points=tuple(
            (digest(msgs[: k + 1]), sum(counts[: k + 1]), True) for k in range(len(msgs))
        ),
        reasoning_effort=effort if isinstance(effort, str) else None,
        last_kind=kinds.get(str(last_role), "none"),  # type: ignore[arg-type]
        last_user_text=user_texts[-1] if user_texts else "",
        tool_results=tuple(tool_results),
        tools=tools,
        forced_tool=forced,
        tools_disabled=choice == "none",
        stream=bool(body.get("stream")),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
    )


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": answer.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": answer.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def completion(answer: Answer, conv: Conversation, rid: str, created: int) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text if answer.text or not answer.tool_calls else None,
        "refusal": None,
    }
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in answer.tool_calls
        ]
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": conv.model,
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": FINISH[answer.finish],
            }
        ],
        "usage": _usage(answer),
    }


def sse(data: Any) -> bytes:
    """One ``data:`` event (``[DONE]`` passes as a plain string)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def stream_frames(
    answer: Answer, conv: Conversation, rid: str, created: int
) -> tuple[list[bytes], list[bytes]]:
    """(content chunks, closing chunks): the closing ones carry finish_reason, usage and [DONE]."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        obj: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": conv.model,
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if conv.include_usage:
            obj["usage"] = None
        return sse(obj)

    first = {"role": "assistant", "content": "" if answer.text or not answer.tool_calls else None}
    body = [chunk({**first, "refusal": None})]
    body += [chunk({"content": piece}) for piece in text_pieces(answer.text)]
    for index, call in enumerate(answer.tool_calls):
        head = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        body.append(chunk({"tool_calls": [head]}))
        body += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": frag}}]})
            for frag in json_fragments(call.arguments)
        ]
    tail = [chunk({}, FINISH[answer.finish])]
    if conv.include_usage:
        tail.append(
            sse(
                {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": conv.model,
                    "system_fingerprint": FINGERPRINT,
                    "choices": [],
                    "usage": _usage(answer),
                }
            )
        )
    tail.append(sse("[DONE]"))
    return body, tail


def _defaults(err: HttpError, conv: Conversation) -> tuple[str, str, str | None, str | None]:
    """(message, type, param, code) for a status, as the OpenAI API words them."""
    if err.kind == "context_length":
        return (
            f"This model's maximum context length is {CONTEXT_LIMIT} tokens. However, your "
            f"messages resulted in {CONTEXT_LIMIT + max(conv.words, 1)} tokens. Please reduce "
            "the length of the messages.",
            "invalid_request_error",
            "messages",
            "context_length_exceeded",
        )
    table: dict[int, tuple[str, str, str | None, str | None]] = {
        400: ("Invalid request.", "invalid_request_error", None, None),
        401: (
            "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            None,
            "invalid_api_key",
        ),
        403: ("You are not allowed to sample from this model", "invalid_request_error", None, None),
        404: (
            f"The model `{conv.model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            None,
            "model_not_found",
        ),
        429: (
            f"Rate limit reached for {conv.model} in organization org-wiretest on requests per "
            "min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
            "requests",
            None,
            "rate_limit_exceeded",
        ),
        503: (
            "The engine is currently overloaded, please try again later.",
            "server_error",
            None,
            None,
        ),
    }
    fallback = (
        "The server had an error while processing your request. Sorry about that!",
        "server_error" if err.status >= 500 else "invalid_request_error",
        None,
        None,
    )
    return table.get(err.status, fallback)


def error_body(err: HttpError, conv: Conversation) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}``."""
    message, etype, param, code = _defaults(err, conv)
    return {
        "error": {
            "message": err.message or message,
            "type": err.error_type or etype,
            "param": param,
            "code": err.code or code,
        }
    }


def stream_error(error_type: str | None, message: str | None) -> bytes:
    """The in-stream error event of the chat-completions API (a ``data:`` with an error key)."""
    return sse(
        {
            "error": {
                "message": message
                or "The server had an error while processing your request. Sorry about that!",
                "type": error_type or "server_error",
                "param": None,
                "code": None,
            }
        }
    )


def models_body(models: list[str], created: int) -> dict[str, Any]:
    """``GET /v1/models`` list."""
    return {
        "object": "list",
        "data": [
            {"id": m, "object": "model", "created": created, "owned_by": "wire-test"}
            for m in models
        ],
    }
