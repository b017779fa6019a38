"""How a memory is kept in Chroma's metadata, found again, ranked and forgotten.

A memory's tags are kept twice: joined in ``tags`` (to show them) and as one ``tag:<t>``
flag each (to filter by them). A memory written for one of the tenant's end users (by a job
of that user) carries ``user`` and the flag ``private``: a job of another user, or of none,
never finds it (:func:`where`). Memories without the flag, older ones included, are the
tenant's, found by every job. Ranking is the cosine similarity weighted by recency and
importance; a memory is forgotten once expired, or once its importance has decayed below
the configured floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raytroupe.actors.memory.batched_query import Found
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.protocols import MemoryHit, MemoryWrite
from raytroupe.protocols.memory import EVERY_USER

__all__ = ["expired", "forgettable", "hit", "metadata", "ranked", "where"]

_OWN_KEYS = frozenset(
    {"tenant", "agent", "importance", "created_at", "expires_at", "tags", "user", "private"}
)


def metadata(
    tenant: str, memory: MemoryWrite, now: float, user: str | None = None
) -> dict[str, str | int | float | bool]:
    """What is kept beside the memory's text (``user``: the end user it is private to)."""
    return {
        **memory.metadata,
        **({"user": user, "private": True} if user is not None else {}),
        "tenant": tenant,
        "agent": memory.agent or "",
        "importance": memory.importance,
        "created_at": now,
        "expires_at": now + memory.ttl_s if memory.ttl_s else 0.0,
        "tags": ",".join(memory.tags),
        **{f"tag:{t}": True for t in memory.tags},
    }


def where(
    agent: str | None, tags: Sequence[str], viewer: str | None = EVERY_USER
) -> dict[str, Any] | None:
    """The metadata filter for agent, tags and who looks (the tenant is the collection itself).

    ``viewer``: the end user a job is for (their memories and the tenant's), None (a job of
    no user: the tenant's only), or :data:`EVERY_USER`. Chroma's ``$ne`` matches a memory
    without the key, so memories kept before end users existed are the tenant's.
    """
    clauses: list[dict[str, Any]] = [{"agent": agent}] if agent is not None else []
    clauses.extend({f"tag:{t}": True} for t in tags)
    if viewer != EVERY_USER:
        shared = {"private": {"$ne": True}}
        clauses.append(shared if viewer is None else {"$or": [shared, {"user": viewer}]})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def hit(
    memory_id: str,
    text: str,
    meta: dict[str, Any],
    distance: float,
    now: float,
    *,
    config: MemoryConfig,
) -> MemoryHit:
    """A found memory, scored by similarity, recency and importance under ``config``."""
    similarity = max(0.0, 1.0 - distance)
    created = float(meta.get("created_at", now))
    recency = 0.5 ** (max(0.0, now - created) / config.recency_half_life_s)
    importance = float(meta.get("importance", 0.5))
    total = config.similarity_weight + config.recency_weight + config.importance_weight
    score = (
        config.similarity_weight * similarity
        + config.recency_weight * recency
        + config.importance_weight * importance
    ) / (total or 1.0)
    tags = tuple(t for t in str(meta.get("tags", "")).split(",") if t)
    extra = {k: v for k, v in meta.items() if not k.startswith("tag:") and k not in _OWN_KEYS}
    return MemoryHit(id=memory_id, text=text, score=score, similarity=similarity,
                     importance=importance, created_at=created,
                     agent=str(meta.get("agent")) or None, tags=tags,
                     user=str(meta["user"]) if meta.get("private") else None,
                     metadata=extra)  # fmt: skip


def ranked(found: Found, now: float, *, config: MemoryConfig) -> list[MemoryHit]:
    """The unexpired memories of one query's result, best first."""
    hits = [
        hit(memory_id, text or "", dict(meta), float(distance), now, config=config)
        for memory_id, text, meta, distance in zip(*found, strict=True)
        if not expired(dict(meta), now)
    ]
    return sorted(hits, key=lambda h: h.score, reverse=True)


def expired(meta: dict[str, Any], now: float) -> bool:
    """Whether the memory's time to live has passed."""
    expires = float(meta.get("expires_at") or 0.0)
    return bool(expires and expires < now)


def forgettable(config: MemoryConfig, meta: dict[str, Any], now: float) -> bool:
    """Whether the memory expired, or its importance decayed below ``config``'s floor."""
    if expired(meta, now):
        return True
    half_life = config.decay_half_life_s
    if half_life is None:
        return False
    age = max(0.0, now - float(meta.get("created_at", now)))
    decayed = float(meta.get("importance", 0.5)) * 0.5 ** (age / half_life)
    return bool(decayed < config.min_importance)
