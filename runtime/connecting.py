"""Connecting a driver: :func:`connect` joins a Ray (or starts one) and the system actors.

The :class:`~raytroupe.runtime.driver.Runtime` it answers is the driver API.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import ray
from pydantic import BaseModel

from raytroupe.actors.spawn import NAMESPACE, env_inherited
from raytroupe.protocols import (
    ModelSpec,
)
from raytroupe.protocols.config.llm import LLMConfig
from raytroupe.protocols.config.memory import MemoryConfig
from raytroupe.protocols.config.skills import SkillsConfig
from raytroupe.protocols.config.system import OTEL_FLAG_DEPRECATED, SystemConfig
from raytroupe.protocols.config.tools import ToolsConfig
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.joining import env_address, prepare_join, running_here, stay_on_loopback
from raytroupe.runtime.logging import configure_logging

__all__ = ["connect"]


def _models(llm: ModelSpec | Mapping[str, ModelSpec] | None) -> dict[str, ModelSpec] | None:
    if llm is None:
        return None
    if isinstance(llm, BaseModel):
        return {"default": llm}
    return dict(llm)


def connect(
    address: str | None = None,
    *,
    llm: ModelSpec | Mapping[str, ModelSpec] | None = None,
    llm_config: LLMConfig | str | Path | None = None,
    config: SystemConfig | str | Path | None = None,
    replace_models: bool = False,
    tools_config: ToolsConfig | None = None,
    memory_config: MemoryConfig | None = None,
    journal: str | Path | None = None,
    state_url: str | None = None,
    system_resources: Mapping[str, float] | None = None,
    num_cpus: int | None = None,
    include_dashboard: bool = True,
    log_level: str | None = None,
    otel: bool = False,
    skills: SkillsConfig | str | Path | None = None,
) -> Runtime:
    """Connect to raytroupe, starting what is missing.

    Uses the Ray this process is already connected to; else joins ``address`` (or
    ``$RAY_ADDRESS``, or a Ray running on this machine whose GCS answers: a record left by one
    that stopped is passed over); else starts a local Ray bound to 127.0.0.1. Then starts the
    system actors (``router/<n>``, ``llm/<n>``, ``orchestrator/<n>``, ``memory``,
    ``tools/<n>``) in the ``troupe`` namespace, or reuses running ones.

    Args:
        address: a Ray address to join (``"auto"``, ``"ray://..."``), or ``"local"`` to start
            a new local Ray even if one runs.
        llm: the model behind the ``default`` alias (one spec), or aliases to serve (a mapping),
            as the operator's configuration (their hosts and key variables are trusted).
        replace_models: let ``llm`` replace aliases a running pool serves differently; without
            it, joining a cluster whose ``default`` (or any alias of ``llm``) is another model
            raises ``ConfigError``, because other drivers' and tenants' jobs use that alias.
        llm_config: the LLM pool's configuration (an ``LLMConfig`` or a YAML file): aliases,
            routes, tenant budgets, retry policy, prices. Used when this call starts the pool.
        config: the system actors' whole configuration (a ``SystemConfig`` or a ``troupe.yaml``:
            llm, tools, memory, state, tracing, placement), for what the other arguments
            leave out. Used when this call starts the system actors.
        tools_config: the tool sandboxes' configuration (how many, limits, shell, http_get's
            domains, MCP servers). Used when this call starts them.
        memory_config: the memory store's configuration (Chroma path or server, embedding,
            ranking and forgetting). Used when this call starts it.
        journal: the orchestrator's journal file (default ``~/.raytroupe/journal.sqlite``),
            from which a restarted orchestrator resumes unfinished jobs.
        state_url: a PostgreSQL database (``postgresql://user@host:5432/name``) for every
            durable record: the journal, the pool's ledger and usage, the sandboxes'
            idempotency records and grants. A cluster's choice: a system actor restarted on
            another node finds them. Default: ``config.state`` (``$TROUPE_STATE_URL``);
            neither: SQLite files. Used when this call starts the system actors.
        system_resources: Ray resources every system actor without local files asks for
            (e.g. ``{"troupe_system": 0.001}``), to keep them on nodes that advertise them.
        num_cpus: CPUs of a local Ray this call starts (default: all).
        include_dashboard: start the Ray dashboard with a local Ray (``list_actors`` needs it).
        log_level: structlog level of this process (default ``$TROUPE_LOG_LEVEL`` or info).
        otel: deprecated, does nothing (a ``DeprecationWarning`` says so). Tracing is set
            by the standard ``OTEL_*`` variables: the actors this call starts are given this
            process's (``OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318`` ...), a cluster's
            read theirs from ``~/.troupe/env``, and each sends its spans as they end.
        skills: a directory of skill files (or a ``SkillsConfig``) the orchestrator this
            call starts loads and watches; default ``config.skills``.
    """
    configure_logging(log_level)
    if otel:
        warnings.warn(OTEL_FLAG_DEPRECATED, DeprecationWarning, stacklevel=2)
    # every file is read (and refused) before a Ray is started or joined
    llm_settings = (
        llm_config if isinstance(llm_config, LLMConfig | None) else LLMConfig.from_yaml(llm_config)
    )
    system = (
        SystemConfig() if config is None
        else config if isinstance(config, SystemConfig) else SystemConfig.from_yaml(config)
    )  # fmt: skip
    owns_connection = not ray.is_initialized()
    if owns_connection:
        # a Ray running on this machine, if one answers (never a stale record of one)
        target = address or env_address() or running_here() or "local"
        if target == "local":
            stay_on_loopback()
            ray.init(
                address="local",  # a new Ray even when another one runs on this machine
                namespace=NAMESPACE,
                num_cpus=num_cpus,
                include_dashboard=include_dashboard,
                log_to_driver=False,
            )
            env_inherited()  # its processes have this one's OTEL_* variables: none handed on
        elif target is not None:
            prepare_join(target)
            ray.init(address=target, namespace=NAMESPACE)
    client = SystemClient.start(
        _models(llm),
        llm_settings,
        tools_config,
        memory_config,
        None if journal is None else Path(journal),
        config=system,
        state_url=state_url,
        system_resources=system_resources,
        replace_models=replace_models,
        skills=skills
        if isinstance(skills, SkillsConfig | None)
        else SkillsConfig(directory=Path(skills)),
    )
    return Runtime(client, owns_connection=owns_connection)
