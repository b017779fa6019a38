"""The spans an agent records for its subtask's trace: one per model call and tool call."""

from __future__ import annotations

import json
from typing import Any

from raytroupe.protocols import LLMResponse, Span, ToolResult
from raytroupe.protocols.llm import ToolArguments

__all__ = ["model_span", "tool_span"]


def model_span(alias: str, answer: LLMResponse, start: float, end: float) -> Span:
    """The span of one model call, as the agent saw it."""
    return Span(
        name=f"model {alias}",
        kind="model_call",
        start=start,
        end=max(start, end),
        attributes={
            "model_alias": alias,
            "provider": answer.provider,
            "deployment": answer.deployment,
            "model": answer.model,
            "prompt_tokens": answer.usage.prompt_tokens,
            "completion_tokens": answer.usage.completion_tokens,
            "cost_usd": answer.usage.cost_usd,
            "latency_s": answer.latency_s,
            "finish_reason": answer.finish_reason,
            **({"replayed": True} if answer.replayed else {}),
        },
    )


SHOWN_CHARS = 2000
"""The most of a tool call's arguments and result a span keeps (as JSON text)."""


def tool_span(
    result: ToolResult, start: float, end: float, arguments: ToolArguments | None = None
) -> Span:
    """The span of one tool call, as the agent saw it: its arguments and result shown cut."""
    duration = result.metadata.get("duration_s")
    shown = result.data if result.ok else (result.error.message if result.error else None)
    return Span(
        name=f"tool {result.tool}",
        kind="tool_call",
        start=start,
        end=max(start, end),
        attributes={
            "tool": result.tool,
            "ok": result.ok,
            "error_code": result.error.code.value if result.error else None,
            "duration_s": float(duration) if isinstance(duration, int | float) else None,
            "arguments": None if arguments is None else _cut(arguments),
            "result": _cut(shown),
        },
    )


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
