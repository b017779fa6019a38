"""Memory traffic: write a memory, query memories, the hits that come back."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MemoryHit", "MemoryHits", "MemoryPolicy", "MemoryQuery", "MemoryWrite"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class MemoryWrite(_Frozen):
    """Store one long-term memory for the envelope's tenant."""

    kind: Literal["memory_write"] = "memory_write"
    text: str = Field(min_length=1, max_length=20_000)
    importance: float = Field(default=0.5, ge=0.0, le=1.0, description="0 trivial .. 1 vital.")
    tags: tuple[str, ...] = Field(default=(), description="For filtering.")
    agent: str | None = Field(default=None, description="Whose memory (None: the team's).")
    ttl_s: float | None = Field(default=None, gt=0.0, description="Forget after this long.")
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)


class MemoryQuery(_Frozen):
    """Find the memories of the envelope's tenant most relevant to ``query``."""

    kind: Literal["memory_query"] = "memory_query"
    query: str = Field(min_length=1, max_length=20_000)
    k: int = Field(default=5, ge=1, le=100)
    agent: str | None = Field(default=None, description="Only this agent's memories.")
    tags: tuple[str, ...] = Field(default=(), description="Only memories with all these tags.")
    min_score: float = Field(default=0.0, ge=0.0, le=1.0)


class MemoryHit(_Frozen):
    """One recalled memory and why it ranked where it did."""

    id: str
    text: str
    score: float = Field(description="Similarity weighted by recency and importance.")
    similarity: float
    importance: float
    created_at: float
    agent: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryHits(_Frozen):
    """The answer to a ``MemoryQuery``, best first."""

    kind: Literal["memory_hits"] = "memory_hits"
    hits: tuple[MemoryHit, ...] = ()


class MemoryPolicy(_Frozen):
    """How an agent uses memory."""

    recall: bool = Field(default=True, description="Recall memories before each model call.")
    recall_k: int = Field(default=4, ge=1, le=50)
    recall_tokens: int = Field(
        default=300, ge=0, description="Budget for injected memories (whitespace tokens)."
    )
    min_score: float = Field(default=0.3, ge=0.0, le=1.0, description="Ignore weaker hits.")
    write_results: bool = Field(
        default=False, description="Store each subtask's result as a memory when it succeeds."
    )
    importance: float = Field(default=0.5, ge=0.0, le=1.0, description="Of written results.")
