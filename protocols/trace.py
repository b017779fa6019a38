"""A job's trace: spans (job, plan, subtasks, attempts, model and tool calls, resolution)."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Attribute", "Span", "SpanKind", "new_span_id"]

SpanKind = Literal[
    "job",
    "plan",
    "subtask",
    "attempt",
    "model_call",
    "tool_call",
    "resolution",
    "aggregate",
    "quality_gate",
]
Attribute = str | int | float | bool | None


def new_span_id() -> str:
    """A fresh random span id (16 hex characters, as in W3C trace context)."""
    return uuid.uuid4().hex[:16]


class Span(BaseModel):
    """One timed step of a job; ``parent_id`` None only for the job's root span.

    Spans an agent records have no parent and an empty ``trace_id`` until the orchestrator
    places them under the attempt that ran them. Times are UNIX seconds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    span_id: str = Field(default_factory=new_span_id, min_length=1, max_length=64)
    parent_id: str | None = None
    trace_id: str = ""
    name: str
    kind: SpanKind
    start: float
    end: float
    attributes: dict[str, Attribute] = Field(default_factory=dict)
