"""The LLM pool's configuration: aliases, budgets, retry policy and prices, from YAML or code.

API keys never appear here: deployments name the environment variable holding theirs
(``api_key_env``), which is read only inside the pool actor. This configuration is the
operator's, and trusted: models that teams configure later are checked against it (see
:mod:`actors.llm.trust`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.actors.config_files import read_yaml, validated
from raytroupe.actors.llm.gateway import RetryPolicy
from raytroupe.actors.outbound import NetworkPolicy
from raytroupe.protocols import Budget, ModelSpec, Name

__all__ = ["LLMConfig"]


class LLMConfig(BaseModel):
    """Everything the pool serves and enforces."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[Name, ModelSpec] = Field(
        default_factory=dict, description="Aliases: deployments, and routes over them."
    )
    tenant_budgets: dict[str, Budget] = Field(
        default_factory=dict, description="Spending limit of each tenant, over all its jobs."
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries and backoff.")
    replicas: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Pool replicas (actors llm/0, llm/1, ...): each serves calls, all share "
        "one budget ledger, and each deployment's rpm, tpm and max_concurrency are split "
        "between them, so that together they stay within the provider's quota.",
    )
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="'provider/model-prefix' -> [USD per M prompt, per M completion tokens].",
    )
    allow_unpriced: bool = Field(
        default=False,
        description="Let a call under a USD budget use a model without a known price (it "
        "then costs 0); by default such a call is refused with UnpricedModel.",
    )
    network: NetworkPolicy = Field(
        default_factory=NetworkPolicy,
        description="Where models configured by teams may point beyond public addresses "
        "(the hosts of these deployments are allowed without being listed).",
    )
    keys: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="More key variables that models configured by teams may name, each with "
        "the hosts its key may be sent to (those of these deployments are allowed already).",
    )

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "llm config") -> Self:
        """Validate a mapping.

        Raises:
            ConfigError: not a valid configuration; ``detail['problems']`` lists why.
        """
        return validated(cls, data, source=source, what="llm config", article="an")

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Read a YAML file.

        Raises:
            ConfigError: missing, unreadable, not YAML, or not a valid configuration.
        """
        return cls.from_dict(read_yaml(path, what="llm config"), source=str(path))
