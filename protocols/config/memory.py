"""The memory store's configuration (cheap to import: no Chroma)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MemoryConfig"]


class MemoryConfig(BaseModel):
    """Where memories live and how they are ranked and forgotten."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path = Field(
        default_factory=lambda: Path.home() / ".raytroupe" / "memory",
        description="Chroma's directory (one owner: this actor).",
    )
    server: str | None = Field(
        default=None, description="'host:port' of a `chroma run` server, for clusters."
    )
    embedding: Literal["minilm", "hashing"] = Field(
        default="minilm", description="Offline MiniLM (ONNX), or the hashing fallback."
    )
    similarity_weight: float = Field(default=0.7, ge=0.0)
    recency_weight: float = Field(default=0.15, ge=0.0)
    importance_weight: float = Field(default=0.15, ge=0.0)
    recency_half_life_s: float = Field(default=7 * 86_400.0, gt=0.0)
    decay_half_life_s: float | None = Field(
        default=30 * 86_400.0, gt=0.0, description="Importance halves this often (None: never)."
    )
    min_importance: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Decayed below this, a memory is forgotten."
    )
    forget_interval_s: float = Field(default=600.0, gt=0.0)
    knowledge_bases_per_tenant: int = Field(
        default=32, ge=1, description="Knowledge bases one tenant may hold."
    )
    passages_per_tenant: int = Field(
        default=50_000, ge=1, description="Passages one tenant may hold in all its bases."
    )
