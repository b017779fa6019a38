"""How webhooks are delivered: attempts, backoff, timeout and where they may connect."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.config.network import NetworkPolicy

__all__ = ["WebhooksConfig"]


class WebhooksConfig(BaseModel):
    """The operator's settings for sending webhooks and A2A push notifications."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    network: NetworkPolicy = Field(
        default_factory=NetworkPolicy,
        description="Where a webhook URL may point beyond the public internet (by default "
        "loopback, private, link-local and the cluster's own addresses are refused, when the "
        "webhook is made and on every attempt).",
    )
    attempts: int = Field(default=8, ge=1, le=50, description="Attempts per delivery.")
    retry_s: float = Field(
        default=2.0, gt=0, le=3600, description="Wait after the first failed attempt (doubles)."
    )
    max_retry_s: float = Field(
        default=900.0, gt=0, le=86_400, description="The longest wait between attempts."
    )
    timeout_s: float = Field(default=10.0, gt=0, le=120, description="One attempt's limit.")
    poll_s: float = Field(
        default=1.0, gt=0, le=60, description="How often a shard looks for due deliveries."
    )
