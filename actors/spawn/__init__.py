"""The one door into the actors for ``raytroupe.runtime`` and ``raytroupe.deployments``.

What crosses between a driver (or the HTTP app) and the actors is data, and lives in
``raytroupe.protocols`` (messages, configuration models, file readers). What is here starts or
runs actor-side machinery, and a process needs it to take part in the system:

=============================================  =================================================
``spawn_system``, ``SystemHandles``              start (or find) the system actors; their handles
``NAMESPACE``                                    the Ray namespace they are named in
``unwrap``                                       the raytroupe error inside a Ray task error
``Offload``                                      the tenants' fair-share pool of CPU work (a
                                                 Serve replica checks documents in one)
``configure_logging``                            a driver's structured logs
``configure_worker_logging``                     a Ray worker's (a Serve replica's) logs
``configure_worker_tracing``                     a worker's OpenTelemetry spans, from ``OTEL_*``
``actor_env``                                    the ``OTEL_*`` variables an actor started from
                                                 here is given
``env_inherited``                                say the Ray processes have this one's variables
``install_llama_server``                         build and install llama.cpp's server here
``check_files``                                  check a local model's files and server binary
                                                 on this node
=============================================  =================================================

Each is imported on first use (PEP 562) from the module that keeps it, so a Serve replica
that configures its logging loads no orchestrator, and a driver that only logs no Ray glue.
``tests/unit/test_rooms.py`` holds runtime and deployments to this list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytroupe.actors.lazy import lazy_exports

if TYPE_CHECKING:
    from raytroupe.actors.llm.local.binary import install_llama_server
    from raytroupe.actors.llm.local.launch import check_files
    from raytroupe.actors.offload import Offload
    from raytroupe.actors.ray_handles import NAMESPACE, unwrap
    from raytroupe.actors.spawn.system import SystemHandles, spawn_system
    from raytroupe.actors.spawn.system import cluster_addresses as cluster_addresses
    from raytroupe.actors.telemetry.logs import configure_logging, configure_worker_logging
    from raytroupe.actors.telemetry.tracing import (
        actor_env,
        configure_worker_tracing,
        env_inherited,
    )

__all__ = [
    "NAMESPACE",
    "Offload",
    "SystemHandles",
    "actor_env",
    "check_files",
    "configure_logging",
    "configure_worker_logging",
    "configure_worker_tracing",
    "env_inherited",
    "install_llama_server",
    "spawn_system",
    "unwrap",
]

_HOMES = {
    **dict.fromkeys(
        ("spawn_system", "SystemHandles", "cluster_addresses"), "raytroupe.actors.spawn.system"
    ),
    **dict.fromkeys(("NAMESPACE", "unwrap"), "raytroupe.actors.ray_handles"),
    "Offload": "raytroupe.actors.offload",
    **dict.fromkeys(
        ("configure_logging", "configure_worker_logging"), "raytroupe.actors.telemetry.logs"
    ),
    **dict.fromkeys(
        ("configure_worker_tracing", "actor_env", "env_inherited"),
        "raytroupe.actors.telemetry.tracing",
    ),
    "install_llama_server": "raytroupe.actors.llm.local.binary",
    "check_files": "raytroupe.actors.llm.local.launch",
}
"""Where each name is kept (``cluster_addresses``: importable from here as before, for the
actors' own use, and no entry point)."""

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
