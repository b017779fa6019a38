"""Configuration of the HTTP application (the Serve config's ``args``, or a YAML file)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from limits import parse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from raytroupe.protocols import ConfigError, TenantPolicy
from raytroupe.protocols.config.files import read_yaml, validated
from raytroupe.protocols.config.shares import Shares
from raytroupe.protocols.config.system import SystemConfig

__all__ = ["APIConfig", "APIKey"]

_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


def _rate(value: str) -> str:
    try:
        rate = parse(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a rate such as '120/minute' or '10/second'") from None
    if rate.amount < 1:
        raise ValueError(f"{value!r} would refuse every request")
    return value


class APIKey(BaseModel):
    """A key clients present as ``Authorization: Bearer <key>`` (or ``X-API-Key``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="Who holds it (for logs).")
    hash: str = Field(description="``sha256:<hex>`` of the key (`troupe key new` prints it).")
    tenant: str = Field(
        min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$",
        description="The tenant whose jobs, memories and usage the key reaches.",
    )  # fmt: skip
    admin: bool = Field(default=False, description="May manage teams and agents.")
    rate_limit: str | None = Field(
        default=None, description="This key's request rate (default: the app's rate_limit)."
    )

    @field_validator("hash")
    @classmethod
    def _is_hash(cls, value: str) -> str:
        if not _HASH.match(value):
            raise ValueError("must be 'sha256:' and 64 hex digits (never the key itself)")
        return value

    @field_validator("rate_limit")
    @classmethod
    def _is_rate(cls, value: str | None) -> str | None:
        return None if value is None else _rate(value)


class APIConfig(BaseModel):
    """How the HTTP application authenticates, limits and reaches raytroupe."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_keys: tuple[APIKey, ...] = Field(default=(), description="Accepted keys (hashed).")
    api_keys_env: str | None = Field(
        default="TROUPE_API_KEYS",
        description="Environment variable with more keys, 'tenant:key[:admin]' comma-separated.",
    )
    anonymous_tenant: str | None = Field(
        default=None,
        description="Serve requests without a key as this tenant (local use only; default: "
        "refuse them). Anonymous callers are never admins.",
    )
    tenant_policies: dict[str, TenantPolicy] = Field(
        default_factory=dict,
        description="What tenants' jobs may ask for, by tenant ('*': every tenant without its "
        "own); set on the orchestrator when the application starts (admins may change them "
        "later with PUT /v1/tenants/{tenant}/policy).",
    )
    rate_limit: str = Field(default="600/minute", description="Requests per key (moving window).")
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, gt=0, le=256 * 1024 * 1024,
        description="Larger request bodies are refused with 413.",
    )  # fmt: skip
    request_work_s: float = Field(
        default=0.5,
        gt=0.0,
        le=10.0,
        description="Longest the checks of one request's documents may take (their JSON "
        "Schema patterns, graph edges, gate rules), off the event loop; past it the request "
        "is refused (422 work_limit).",
    )
    shares: Shares = Field(
        default_factory=Shares,
        description="Each tenant's share of the replica's document checks: running at once, "
        "waiting (one more is a 429 busy), and the threads they all share.",
    )
    chat_timeout_s: float = Field(
        default=300.0, gt=0.0, description="How long /v1/chat/completions waits for its job."
    )
    llm_config: Path | None = Field(
        default=None, description="LLM pool config used if this app starts the system actors."
    )
    llm_config_env: str | None = Field(
        default="TROUPE_LLM_CONFIG",
        description="Environment variable naming the LLM pool config file (`~` expanded), used "
        "when llm_config is not set; neither: the offline model.",
    )
    system_config: Path | None = Field(
        default=None,
        description="The system actors' configuration (a troupe.yaml: llm, tools, memory, "
        "state, tracing, placement) used if this app starts them; `~` is expanded.",
    )
    system_config_env: str | None = Field(
        default="TROUPE_CONFIG",
        description="Environment variable naming the troupe.yaml, used when system_config is "
        "not set; neither: the defaults (the offline model, SQLite files on the head).",
    )
    journal: Path | None = Field(
        default=None, description="Journal file used if this app starts the orchestrator."
    )

    @field_validator("rate_limit")
    @classmethod
    def _is_rate(cls, value: str) -> str:
        return _rate(value)

    def llm_config_path(self, environ: Mapping[str, str] = os.environ) -> Path | None:
        """The LLM config file to start the pool with, None for the offline model.

        ``llm_config`` if set, else the file the ``llm_config_env`` variable names (``~``
        expanded in both).

        Raises:
            ConfigError: the variable is set but empty.
        """
        if self.llm_config is not None:
            return self.llm_config.expanduser()
        if self.llm_config_env is None or self.llm_config_env not in environ:
            return None
        named = environ[self.llm_config_env].strip()
        if not named:
            raise ConfigError(f"{self.llm_config_env} is set but names no LLM config file")
        return Path(named).expanduser()

    def system(self, environ: Mapping[str, str] = os.environ) -> SystemConfig:
        """The system actors' configuration: ``system_config``'s file, else the variable's.

        Raises:
            ConfigError: the file is missing or invalid, or the variable is set but empty.
        """
        path = self.system_config
        if path is None and self.system_config_env and self.system_config_env in environ:
            named = environ[self.system_config_env].strip()
            if not named:
                raise ConfigError(f"{self.system_config_env} is set but names no file")
            path = Path(named)
        return SystemConfig() if path is None else SystemConfig.from_yaml(path.expanduser())

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = "API config") -> APIConfig:
        """Validate a mapping (e.g. Serve's ``args``); raises ``ConfigError``."""
        return validated(cls, data if data is not None else {}, source=source, what="API config",
                         article="an")  # fmt: skip

    @classmethod
    def from_yaml(cls, path: str | Path) -> APIConfig:
        """Read a YAML file; raises ``ConfigError`` naming the file and each problem."""
        return cls.from_mapping(read_yaml(path, what="API config"), source=str(path))
