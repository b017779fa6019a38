"""Webhooks: a tenant's HTTP endpoints told of its jobs' events, signed, retried, recorded.

A webhook belongs to one tenant and hears the events it names of that tenant's jobs (or of one
job). Each event it hears is a *delivery*, journaled with the event itself, then POSTed until
the endpoint answers 2xx or the attempts run out. Bodies are signed as Standard Webhooks are
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature`` headers; HMAC-SHA256 with the
webhook's secret, shown once when it is made). A2A push-notification configs are webhooks of
kind ``a2a``: one task's, posted as A2A's stream responses with the caller's token.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Final, Literal, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "A2A_PUSHED",
    "DEFAULT_WEBHOOK_EVENTS",
    "WEBHOOK_EVENTS",
    "A2APush",
    "Delivery",
    "WebhookCreated",
    "WebhookEvent",
    "WebhookId",
    "WebhookInfo",
    "WebhookSpec",
    "checked_webhook_url",
]

WebhookEvent = Literal[
    "job_submitted",
    "subtask_finished",
    "job_succeeded",
    "job_failed",
    "job_cancelled",
    "approval_requested",
    "approval_decided",
    "graph_interrupted",
    "graph_resumed",
    "guardrail",
    "spend_alert",
]
"""The job events a webhook may hear (not tokens or steps: those are for streams)."""

WEBHOOK_EVENTS: Final = frozenset(get_args(WebhookEvent))
A2A_PUSHED: Final[tuple[WebhookEvent, ...]] = (
    "subtask_finished",
    "approval_requested",
    "approval_decided",
    "graph_interrupted",
    "graph_resumed",
    "job_succeeded",
    "job_failed",
    "job_cancelled",
)
"""What an A2A push config hears: each change of its task's state once it is made."""
DEFAULT_WEBHOOK_EVENTS: Final[tuple[WebhookEvent, ...]] = (
    "job_succeeded",
    "job_failed",
    "job_cancelled",
    "approval_requested",
    "graph_interrupted",
)
"""A job ended, or waits for a person."""

_MAX_URL: Final = 2048


def checked_webhook_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host and no credentials in it.

    Raises:
        ValueError: it is not (credentials belong in no URL: they would be logged).
    """
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"a webhook URL is http(s) with a host, not {url[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a webhook URL carries no user or password")
    if parts.fragment:
        raise ValueError("a webhook URL has no #fragment")
    return url


WebhookUrl = Annotated[
    str, StringConstraints(min_length=8, max_length=_MAX_URL), AfterValidator(checked_webhook_url)
]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class A2APush(_Data):
    """An A2A push-notification config of a task, as the webhook it is kept as."""

    config_id: str = Field(max_length=128, description="The config's id, as the caller named it.")
    token: str = Field(default="", max_length=512, description="Sent as X-A2A-Notification-Token.")
    authorization: str | None = Field(
        default=None, max_length=4096, description="Sent as the Authorization header."
    )

    def webhook_id(self, tenant: str, job_id: str) -> str:
        """The webhook id of this config of ``tenant``'s task ``job_id`` (one per config id)."""
        digest = hashlib.sha256(f"{tenant}\0{job_id}\0{self.config_id}".encode()).hexdigest()
        return f"wh-{digest[:16]}"


class WebhookSpec(_Data):
    """What a tenant asks for: where to POST, and which of its jobs' events."""

    url: WebhookUrl = Field(description="Where each event is POSTed (http or https).")
    events: tuple[WebhookEvent, ...] = Field(
        default=DEFAULT_WEBHOOK_EVENTS,
        min_length=1,
        description="The events it hears (default: a job ended, or waits for a person).",
    )
    job_id: str | None = Field(
        default=None,
        max_length=128,
        pattern=r"^[^\x00]+$",
        description="Only this job's events (default: every job).",
    )
    description: str = Field(default="", max_length=200)
    a2a: A2APush | None = Field(
        default=None,
        description="An A2A push config of the task ``job_id`` (A2A's bodies and token header "
        "instead of Standard Webhooks' signature); made again with its config id, it replaces it.",
    )


class WebhookInfo(_Data):
    """A webhook as kept (its secret is never shown again)."""

    id: str
    tenant: str
    kind: Literal["webhook", "a2a"] = Field(
        description="``webhook``: Standard Webhooks bodies; ``a2a``: an A2A task's push config."
    )
    url: str
    events: tuple[WebhookEvent, ...]
    job_id: str | None = None
    description: str = ""
    created_at: float


class WebhookCreated(WebhookInfo):
    """A webhook just made, with the secret its deliveries are signed with (shown once)."""

    secret: str = Field(description="``whsec_`` and base64: verify each delivery with it.")


class Delivery(_Data):
    """One event POSTed (or to be) to one webhook."""

    id: str = Field(description="Its ``webhook-id`` header: the same on every attempt.")
    webhook_id: str
    job_id: str
    seq: int = Field(description="The event's place in the job's log.")
    type: WebhookEvent
    state: Literal["pending", "delivered", "failed"] = Field(
        description="``failed``: every attempt failed; it is not tried again."
    )
    attempts: int
    next_at: float | None = Field(description="When it is tried next (pending only).")
    status_code: int | None = Field(description="What the endpoint answered last, if it did.")
    last_error: str | None = None
    created_at: float
    done_at: float | None = None


WebhookId = Annotated[str, StringConstraints(pattern=r"^wh-[a-f0-9]{16}$")]
