"""How much control-plane work each tenant may have in hand at once (``APIConfig.shares``).

The pool that enforces it is ``raytroupe.actors.offload.Offload``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Shares"]


class Shares(BaseModel):
    """How much control-plane work each tenant may have in hand at once, in one process."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_tenant: int = Field(
        default=2, ge=1, le=64, description="Units of work of one tenant running at once."
    )
    waiting: int = Field(
        default=16,
        ge=0,
        le=1024,
        description="Units of one tenant queued behind those; one more is refused (429 busy).",
    )
    threads: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Threads all tenants' units share; above per_tenant, so that others get "
        "a turn while one tenant's share is busy.",
    )
