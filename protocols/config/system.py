"""One configuration of the system actors, read the same way by every entry point.

A ``troupe.yaml`` holds the sections the system actors start with: ``llm`` (the pool),
``tools`` (the sandboxes), ``memory`` (the memory store), ``state`` (where durable records
live), ``tracing``, ``placement`` and ``scale`` (how many router and orchestrator shards).
The Python driver (``raytroupe.runtime.connect(config=...)``), ``troupe up --config``, the Serve
application (``system_config`` in its args) and the cluster configs all take the same file;
``troupe config schema`` exports its JSON Schema for editors.

Operators' secrets and per-cluster addresses stay out of the file: ``state.url_env`` and
``memory.server_env`` name environment variables (``~/.troupe/env`` on a ``ray up`` cluster)
that fill ``state.url`` and ``memory.server`` where the file leaves them out.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raytroupe.protocols import ConfigError
from raytroupe.protocols.config.files import read_yaml, validated
from raytroupe.protocols.config.guardrails import GuardrailsConfig
from raytroupe.protocols.config.llm import LLMConfig
from raytroupe.protocols.config.memory import MemoryConfig
from raytroupe.protocols.config.skills import SkillsConfig
from raytroupe.protocols.config.state import checked_state_url, state_url
from raytroupe.protocols.config.tools import ToolsConfig
from raytroupe.protocols.config.webhooks import WebhooksConfig

__all__ = [
    "OTEL_FLAG_DEPRECATED",
    "PlacementConfig",
    "ScaleConfig",
    "StateConfig",
    "SystemConfig",
    "TracingConfig",
]


class StateConfig(BaseModel):
    """Where the journal, the budget ledger, idempotency records and grants are kept."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = Field(
        default=None,
        repr=False,  # may hold a password
        description="A PostgreSQL database (postgresql://user@host:5432/name) every node "
        "reaches: a cluster's choice. Its password is better given as PGPASSWORD.",
    )
    url_env: str | None = Field(
        default="TROUPE_STATE_URL",
        description="Environment variable with the url, used when url is not set.",
    )
    journal: Path = Field(
        default_factory=lambda: Path.home() / ".raytroupe" / "journal.sqlite",
        description="Without a url: the orchestrator's SQLite journal (the pool's ledger is "
        "kept beside it in llm.sqlite), on the head node, where those actors are pinned.",
    )

    @field_validator("url")
    @classmethod
    def _is_postgres(cls, value: str | None) -> str | None:
        return None if value is None else state_url(value)

    @field_validator("journal")
    @classmethod
    def _home(cls, value: Path) -> Path:
        return value.expanduser()

    def location(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The PostgreSQL URL: ``url``, else ``url_env``'s value; None for SQLite files.

        Raises:
            ConfigError: the variable holds something that is not a PostgreSQL URL.
        """
        if self.url is not None:
            return self.url
        named = environ.get(self.url_env or "", "").strip()
        if not named:
            return None
        return checked_state_url(named, field="state.url_env", said_as=self.url_env)


OTEL_FLAG_DEPRECATED: Final = (
    "otel=True (tracing.otel) is deprecated and does nothing: every raytroupe actor sends its "
    "spans to a collector as they happen when the standard OpenTelemetry variables ask for it "
    "(e.g. OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318), set where raytroupe starts or, "
    "on a ray up cluster, in ~/.troupe/env; see docs/observability.md#tracing"
)


class TracingConfig(BaseModel):
    """Tracing: set by the standard OTEL_* environment variables, not in this file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    otel: bool = Field(
        default=False,
        description="Deprecated, does nothing: every actor traces live when the standard "
        "OTEL_* environment variables configure an exporter (OTEL_EXPORTER_OTLP_ENDPOINT ...).",
    )

    @field_validator("otel")
    @classmethod
    def _deprecated(cls, value: bool) -> bool:
        if value:
            warnings.warn(OTEL_FLAG_DEPRECATED, DeprecationWarning, stacklevel=2)
        return value


Count = Annotated[int, Field(ge=1, le=64)] | Literal["per_node"]
"""How many of a system actor: a number, or ``per_node`` (one per node of the cluster)."""


class ScaleConfig(BaseModel):
    """How many of the system actors that come in numbers run.

    The LLM pool's replicas are ``llm.replicas``, the tool sandboxes ``tools.sandboxes``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    router_shards: Count = Field(
        default=1,
        description="Router shards (actors router/0, router/1, ...): each routes the envelopes "
        "of some recipients (and its share of role traffic) and holds the whole registry. "
        "per_node: one per node. A running router keeps its number.",
    )
    orchestrator_shards: Count = Field(
        default=1,
        description="Job shards (actors orchestrator/0, orchestrator/1, ...): the front desk "
        "(actor desk) admits every job and keeps teams and policies, and hands each job to a "
        "shard in turn, which journals, runs and answers for it. per_node: one per node. A running "
        "orchestrator keeps its number.",
    )
    nodes_env: str | None = Field(
        default="TROUPE_NODES",
        description="Environment variable with the number of nodes per_node counts (a ray up "
        "cluster's head writes max_workers + 1 there); unset: the nodes alive at start.",
    )

    def counts(
        self, alive: Callable[[], int], environ: Mapping[str, str] = os.environ
    ) -> tuple[int, int]:
        """The numbers of router and orchestrator shards, ``per_node`` resolved.

        ``alive`` counts the Ray nodes alive now (asked only if needed).

        Raises:
            ConfigError: ``nodes_env``'s variable holds no number from 1 to 64.
        """

        def nodes() -> int:
            named = environ.get(self.nodes_env or "", "").strip()
            if not named:
                return max(1, min(64, alive()))
            if not named.isdigit() or not 1 <= int(named) <= 64:  # noqa: PLR2004 - the cap
                raise ConfigError(
                    f"{self.nodes_env}={named!r} is not a number of nodes from 1 to 64",
                    field="scale.nodes_env",
                )
            return int(named)

        router = nodes() if self.router_shards == "per_node" else self.router_shards
        orchestrator = (
            nodes() if self.orchestrator_shards == "per_node" else self.orchestrator_shards
        )
        return router, orchestrator


SystemActor = Literal["router", "desk", "orchestrator", "llm", "memory", "tools"]


class PlacementConfig(BaseModel):
    """Where system actors without files on a node's disk may run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system_resources: dict[str, float] = Field(
        default_factory=dict,
        description="Ray resources they ask for (e.g. {troupe_system: 0.001}), to keep them on "
        "the nodes that advertise them; empty: any node.",
    )
    actors: dict[SystemActor, dict[str, float]] = Field(
        default_factory=dict,
        description="Ray resources of one kind of system actor (router, desk, orchestrator: "
        "every job shard, llm, memory, tools: every sandbox), instead of system_resources: "
        "e.g. the LLM pool on the nodes that advertise {troupe_llm: 1}.",
    )


class SystemConfig(BaseModel):
    """Everything the system actors are started with (see the module's docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm: LLMConfig | Path | None = Field(
        default=None,
        description="The LLM pool: its configuration inline, or the path of its YAML file "
        "(relative to this file); none: the deterministic offline model.",
    )
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    memory_server_env: str | None = Field(
        default="TROUPE_MEMORY_SERVER",
        description="Environment variable with the Chroma server ('host:port'), used when "
        "memory.server is not set.",
    )
    state: StateConfig = Field(default_factory=StateConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    scale: ScaleConfig = Field(default_factory=ScaleConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    webhooks: WebhooksConfig = Field(default_factory=WebhooksConfig)
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)

    @model_validator(mode="after")
    def _home(self) -> Self:
        """``~`` in the sections' paths is the home of the node that reads the file."""
        tools = self.tools.model_copy(
            update={
                "state_dir": self.tools.state_dir.expanduser(),
                "scratch_root": self.tools.scratch_root.expanduser(),
            }
        )
        memory = self.memory.model_copy(update={"path": self.memory.path.expanduser()})
        if self.skills.directory is not None:
            skills = self.skills.model_copy(
                update={"directory": self.skills.directory.expanduser()}
            )
            object.__setattr__(self, "skills", skills)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "memory", memory)
        return self

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = "system config") -> Self:
        """Validate a mapping (``None``: the defaults).

        Raises:
            ConfigError: not a valid configuration; ``detail['problems']`` lists why.
        """
        return validated(cls, {} if data is None else data, source=source, what="system config")

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Read a ``troupe.yaml``; an ``llm`` file it names is read relative to it.

        Raises:
            ConfigError: missing, unreadable, not YAML, or not valid (each problem named).
        """
        path = Path(path).expanduser()
        config = cls.from_mapping(read_yaml(path, what="system config"), source=str(path))
        if isinstance(config.llm, Path):
            named = config.llm.expanduser()
            named = named if named.is_absolute() else path.parent / named
            config = config.model_copy(update={"llm": LLMConfig.from_yaml(named)})
        return config

    def llm_config(self) -> LLMConfig | None:
        """The pool's configuration (a file named by ``llm`` is read now)."""
        if isinstance(self.llm, Path):
            return LLMConfig.from_yaml(self.llm.expanduser())
        return self.llm

    def memory_config(self, environ: Mapping[str, str] = os.environ) -> MemoryConfig:
        """``memory``, with its server from ``memory_server_env`` if it names none."""
        if self.memory.server is not None or not self.memory_server_env:
            return self.memory
        server = environ.get(self.memory_server_env, "").strip()
        return self.memory.model_copy(update={"server": server}) if server else self.memory
