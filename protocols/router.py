"""What the message router reports of itself: its counters, per shard and added up.

Returned by the router's ``stats`` remote method and by ``SystemClient.router_stats``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["RouterStats"]


class RouterStats(BaseModel):
    """Counters, for people and dashboards."""

    model_config = ConfigDict(frozen=True)

    routed: int
    delivered: int
    dead_lettered: int
    duplicates: int
    batches: int = 0
    """Batches taken by ``request_many`` (``routed / batches``: envelopes per batch)."""
    registered: dict[str, list[str]]
    in_flight: dict[str, int]
    shards: int = 1

    @classmethod
    def combined(cls, parts: Sequence[RouterStats]) -> RouterStats:
        """The router's counters: its shards' added up (every shard holds the registry)."""
        in_flight: Counter[str] = Counter()
        for part in parts:
            in_flight.update(part.in_flight)
        registered: dict[str, list[str]] = {}
        for part in parts:
            for name, roles in part.registered.items():
                registered.setdefault(name, roles)
        return cls(
            routed=sum(p.routed for p in parts),
            delivered=sum(p.delivered for p in parts),
            dead_lettered=sum(p.dead_lettered for p in parts),
            duplicates=sum(p.duplicates for p in parts),
            batches=sum(p.batches for p in parts),
            registered=registered,
            in_flight=dict(in_flight),
            shards=sum(p.shards for p in parts),
        )
