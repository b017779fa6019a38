"""Intent routing: which team (or single agent) a job that names none goes to, and why.

A :class:`IntentConfig` names the targets with a description of each, keyword rules, and
the settings of the three methods tried in order: keyword rules, embedding similarity of
the task to the descriptions, and a model classifier (see ``actors/orchestrator/intent.py``).
A :class:`IntentChoice` records the choice and the method that made it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raytroupe.protocols.addresses import Name

__all__ = ["IntentChoice", "IntentConfig", "IntentHints", "IntentMethod", "IntentRule"]

IntentMethod = Literal["keyword", "similarity", "classifier"]
"""How a route was chosen."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class IntentHints(_Config):
    """How the intent router recognizes requests for a skill or a team."""

    keywords: tuple[str, ...] = Field(
        default=(), description="Words or phrases that send a request here (whole words)."
    )
    description: str = Field(
        default="", max_length=2000, description="What requests it serves, for similarity."
    )
    examples: tuple[str, ...] = Field(
        default=(), max_length=50, description="Requests it serves, for similarity."
    )

    @field_validator("keywords", "examples")
    @classmethod
    def _not_blank(cls, items: tuple[str, ...]) -> tuple[str, ...]:
        stripped = tuple(i.strip() for i in items)
        if any(not i for i in stripped):
            raise ValueError("entries must not be blank")
        return stripped


class IntentRule(_Config):
    """Send a task that contains any of ``keywords`` (as whole words, any case) to ``target``."""

    keywords: tuple[str, ...] = Field(
        min_length=1, description="Words or phrases; a task matches when it holds any of them."
    )
    target: Name = Field(description="The target (a key of ``IntentConfig.targets``).")
    description: str = Field(default="", description="What the rule is for, for people.")

    @field_validator("keywords")
    @classmethod
    def _not_blank(cls, keywords: tuple[str, ...]) -> tuple[str, ...]:
        stripped = tuple(k.strip() for k in keywords)
        if any(not k for k in stripped):
            raise ValueError("keywords must not be blank")
        return stripped


class IntentConfig(_Config):
    """Targets a job may be routed to, and how to choose among them."""

    targets: dict[Name, str] = Field(
        min_length=1,
        description="Target name (a team or an agent) -> description; the description is "
        "what the task's similarity is measured against and what the classifier reads. "
        "Order breaks ties.",
    )
    rules: tuple[IntentRule, ...] = Field(
        default=(), description="Keyword rules, tried first, in order; the first match wins."
    )
    examples: dict[Name, tuple[str, ...]] = Field(
        default_factory=dict,
        description="Example tasks of targets: a task's similarity to a target is the best "
        "of its similarities to the description and to each example.",
    )
    similarity_threshold: float = Field(
        default=0.35,
        ge=-1.0,
        le=1.0,
        description="Cosine similarity the best target needs to be chosen without the model.",
    )
    margin: float = Field(
        default=0.05,
        ge=0.0,
        le=2.0,
        description="How far the best similarity must lead the second; closer goes to the model.",
    )
    classifier_model: Name = Field(
        default="default", description="Model alias that classifies what similarity cannot."
    )
    embedding: Literal["minilm", "hashing"] = Field(
        default="minilm", description="Embedding of the task and the descriptions (offline)."
    )

    @model_validator(mode="after")
    def _rules_name_targets(self) -> IntentConfig:
        unknown = sorted({r.target for r in self.rules if r.target not in self.targets})
        if unknown:
            raise ValueError(f"rules name unknown targets: {', '.join(unknown)}")
        unknown = sorted(set(self.examples) - set(self.targets))
        if unknown:
            raise ValueError(f"examples of unknown targets: {', '.join(unknown)}")
        return self


class IntentChoice(_Config):
    """Where a task goes, and how that was decided."""

    target: Name = Field(description="The chosen target.")
    kind: Literal["team", "skill"] = Field(
        default="team", description="What the target is: a team (or agent), or a skill."
    )
    method: IntentMethod = Field(description="The method that chose it.")
    score: float | None = Field(
        default=None, description="'similarity': the cosine similarity of the task and target."
    )
    rationale: str = Field(default="", description="Why: the rule, the scores, or the model's.")
