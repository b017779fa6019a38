"""The operator's outbound network policy, as configured (the guard is ``actors/outbound.py``)."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["NetworkPolicy"]


class NetworkPolicy(BaseModel):
    """What the operator allows beyond the public internet, and what it refuses within it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] = Field(
        default=(),
        description="Hosts (exact names), IP addresses or CIDR ranges that may be reached "
        "although they are not public, e.g. '127.0.0.1' for a local model server.",
    )
    deny: tuple[str, ...] = Field(
        default=(),
        description="IP addresses or CIDR ranges refused although public (the cluster's own "
        "node addresses are refused without being listed).",
    )

    @field_validator("deny")
    @classmethod
    def _networks(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        for entry in entries:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR range") from None
        return entries
