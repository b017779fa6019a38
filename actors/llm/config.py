"""The LLM pool's configuration: aliases, budgets, retry policy and prices, from YAML or code.

API keys never appear here: deployments name the environment variable holding theirs
(``api_key_env``), which is read only inside the pool actor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.llm.gateway import RetryPolicy
from protocols import Budget, ConfigError, ModelSpec, Name

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
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="'provider/model-prefix' -> [USD per M prompt, per M completion tokens].",
    )

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "llm config") -> Self:
        """Validate a mapping.

        Raises:
            ConfigError: not a valid configuration; ``detail['problems']`` lists why.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            problems = [
                f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
                for err in e.errors(include_url=False, include_input=False)
            ]
            raise ConfigError(
                f"{source}: invalid: {'; '.join(problems)}", problems=problems
            ) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Read a YAML file.

        Raises:
            ConfigError: missing, unreadable, not YAML, or not a valid configuration.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read {str(path)!r}: {e.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        return cls.from_dict(data, source=str(path))
