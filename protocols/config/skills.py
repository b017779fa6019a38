"""Configuration of skills: where skill files are, and how jobs that name nothing are routed."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.addresses import Name

__all__ = ["RoutingConfig", "SkillsConfig"]


class RoutingConfig(BaseModel):
    """The intent cascade of jobs that name no skill and no team (``troupe.yaml``: skills.routing).

    Keywords first, then the embedding similarity of the request to each target's
    description and examples (the best example counts), then a model classifier.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    similarity_threshold: float = Field(
        default=0.3,
        ge=-1.0,
        le=1.0,
        description="Cosine the best target needs to be chosen (MiniLM; 0.3 suits the "
        "labelled set in tests/data/skill_routing.json: 0.35 sent 4 more of its 60 requests "
        "to the model).",
    )
    margin: float = Field(
        default=0.04, ge=0.0, le=2.0, description="How far it must lead the second; else the model."
    )
    classifier_model: Name = Field(default="default", description="Model alias of the classifier.")
    embedding: Literal["minilm", "hashing"] = Field(
        default="minilm", description="Embedding of requests and targets (offline)."
    )


class SkillsConfig(BaseModel):
    """Skills loaded at start from a directory (``troupe.yaml``: skills)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    directory: Path | None = Field(
        default=None,
        description="Skill files (*.yaml, *.yml, *.md) loaded when the orchestrator starts; "
        "none: skills come only through the API, the CLI and drivers.",
    )
    watch: bool = Field(
        default=True,
        description="Reload a skill whose file changes (new jobs get the new version).",
    )
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
