"""The ``AgentMessage`` envelope: routing and context beside a typed payload."""

from __future__ import annotations

import time
import uuid
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.addresses import Address
from raytroupe.protocols.payloads import ErrorPayload, Payload

__all__ = ["AgentMessage", "TraceContext", "new_id"]


def new_id() -> str:
    """A fresh random id (32 hex characters)."""
    return uuid.uuid4().hex


class TraceContext(BaseModel):
    """W3C-style trace ids, carried from message to message."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    trace_id: str = Field(default_factory=new_id, min_length=1, max_length=64)
    span_id: str = Field(default_factory=lambda: new_id()[:16], min_length=1, max_length=64)
    parent_span_id: str | None = None

    def child(self) -> TraceContext:
        """A new span in the same trace, parented to this one."""
        return TraceContext(trace_id=self.trace_id, parent_span_id=self.span_id)


class AgentMessage(BaseModel):
    """One envelope. ``kind`` always equals ``payload.kind``.

    Timestamps and deadlines are UNIX seconds. ``hops`` counts routings and is raised by the
    router; ``attempt`` counts deliveries of the same work (1 for the first).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str = Field(default_factory=new_id, min_length=1, max_length=64)
    kind: str = Field(
        default="", description="The payload's tag, copied here for cheap routing (set for you)."
    )
    sender: Address
    recipient: Address
    job_id: str | None = None
    correlation_id: str | None = Field(
        default=None, description="On a reply: the id of the request it answers."
    )
    reply_to: Address | None = Field(
        default=None, description="Where replies go, when not back to the sender."
    )
    attempt: int = Field(default=1, ge=1)
    deadline: float | None = Field(default=None, description="UNIX time after which it expires.")
    hops: int = Field(default=0, ge=0)
    trace: TraceContext = Field(default_factory=TraceContext)
    traceparent: str | None = Field(
        default=None,
        max_length=256,
        description="The W3C traceparent of the sender's OpenTelemetry span, when tracing is "
        "on (set as it is sent; a recipient's spans are its children).",
    )
    tenant: str = Field(default="default", min_length=1, max_length=64)
    user: str | None = Field(
        default=None, max_length=128, description="The job's end user (its tenant's word)."
    )
    key: str | None = Field(
        default=None,
        max_length=128,
        description="Who submitted the job: an API key's name, `driver`, `eval`, `schedule:<n>`.",
    )
    team: str | None = Field(
        default=None, max_length=256, description="The job's team, as its tenant named it."
    )
    created_at: float = Field(default_factory=time.time)
    payload: Payload

    @model_validator(mode="before")
    @classmethod
    def _kind_from_payload(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        payload = data.get("payload")
        tag = payload.get("kind") if isinstance(payload, dict) else getattr(payload, "kind", None)
        given = data.get("kind")
        if not given:
            return {**data, "kind": tag}
        if tag is not None and given != tag:
            raise ValueError(f"kind {given!r} does not match payload kind {tag!r}")
        return data

    def expired(self, now: float | None = None) -> bool:
        """True when the deadline has passed."""
        return self.deadline is not None and (time.time() if now is None else now) > self.deadline

    def derive(self, *, sender: str, recipient: str, payload: Payload) -> AgentMessage:
        """A new message caused by this one: same job, tenant, deadline and trace, new span."""
        return AgentMessage(
            sender=sender,
            recipient=recipient,
            job_id=self.job_id,
            attempt=self.attempt,
            deadline=self.deadline,
            hops=self.hops,
            trace=self.trace.child(),
            tenant=self.tenant,
            user=self.user,
            key=self.key,
            team=self.team,
            payload=payload,
        )

    def reply(self, payload: Payload, *, sender: str | None = None) -> AgentMessage:
        """The answer to this message, addressed to its ``reply_to`` or sender."""
        return AgentMessage(
            sender=sender or self.recipient,
            recipient=self.reply_to or self.sender,
            job_id=self.job_id,
            correlation_id=self.id,
            attempt=self.attempt,
            hops=self.hops,
            trace=self.trace.child(),
            tenant=self.tenant,
            user=self.user,
            key=self.key,
            team=self.team,
            payload=payload,
        )

    def error_reply(self, exc: BaseException, *, sender: str | None = None) -> AgentMessage:
        """A reply carrying ``exc`` as an ``ErrorPayload``."""
        return self.reply(ErrorPayload.from_exception(exc), sender=sender)

    def with_hop(self) -> Self:
        """A copy of the message, routed once more."""
        return self.model_copy(update={"hops": self.hops + 1})
