"""How the troupe's actors are made under Ray: their options and the nodes they go to.

A named, detached actor of the ``troupe`` namespace with its restart policy and concurrency
(:func:`_options`), made remote with its lifecycle hooks (:func:`_remote`); a system actor
pinned to the head when it keeps files there, else confined by the configured resources
(:func:`_placed`); replicas spread (:func:`_spread`); an agent on the least loaded node
(:func:`least_loaded_node`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import ray

from raytroupe.actors.lifecycle import with_lifecycle
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.actors.telemetry.tracing import actor_env
from raytroupe.protocols import ConfigError

__all__ = [
    "ACTOR_CONCURRENCY",
    "HEAD_NODE",
    "SYSTEM_RESTARTS",
    "least_loaded_node",
]

SYSTEM_RESTARTS: Final = 10
ACTOR_CONCURRENCY: Final = 1000
"""Ray-level concurrency of async actors; the classes bound their own work (semaphores)."""


@functools.cache
def _remote(cls: type) -> Any:
    """``cls`` as a Ray actor class whose ``on_start`` runs before it serves.

    Also after Ray restarts it (see :mod:`raytroupe.actors.lifecycle`).
    """
    return ray.remote(with_lifecycle(cls))


HEAD_NODE: Final = "node:__internal_head__"
"""A resource only the head node has (Ray's own name): asking for a sliver of it pins there."""


def _placed(
    name: str,
    *,
    local_files: bool,
    system_resources: Mapping[str, float] | None,
    actor_resources: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """A system actor's options: pinned to the head if it keeps files on the node's disk.

    A system actor whose state lives elsewhere (PostgreSQL, a Chroma server) may run, and
    be restarted, on any node; ``system_resources`` (e.g. ``{"troupe_system": 0.001}``)
    confine it to nodes that advertise them, and ``actor_resources`` by kind of actor
    (``router``, ``desk``, ``orchestrator``, ``llm``, ``memory``, ``tools``) do so for one kind.

    Raises:
        ConfigError: resources are given for a kind whose files pin it to the head.
    """
    kind = name.split("/", 1)[0]  # tools/0 -> tools, llm/1 -> llm, router/2 -> router
    own = (actor_resources or {}).get(kind)
    options = _options(name, max_restarts=SYSTEM_RESTARTS)
    if local_files:
        if own:
            raise ConfigError(
                f"placement.actors.{kind} is set, but {name} keeps its state in files on the "
                "head's disk and runs there: give it a PostgreSQL state URL (and memory a "
                "Chroma server) to place it elsewhere",
                field=f"placement.actors.{kind}",
            )
        options["resources"] = {HEAD_NODE: 0.001}
    elif own:
        options["resources"] = dict(own)
    elif system_resources:
        options["resources"] = dict(system_resources)
    return options


def _spread(options: dict[str, Any], replicas: int) -> dict[str, Any]:
    """``options`` of one of ``replicas`` replicas: spread over the nodes unless pinned."""
    if replicas > 1 and HEAD_NODE not in options.get("resources", {}):
        return {**options, "scheduling_strategy": "SPREAD"}
    return options


def _options(name: str, *, num_cpus: float = 0.0, max_restarts: int) -> dict[str, Any]:
    """A named actor's options; from a driver that joined a running Ray, its ``OTEL_*`` too.

    They go in the actor's Ray ``runtime_env`` (which Ray hands down to the actors it makes:
    an orchestrator's agents), so that the actors trace as the driver that starts them says,
    whatever their nodes' own environment (see ``raytroupe.actors.telemetry.tracing.actor_env``).
    Without any, no ``runtime_env`` is given: Ray may then hand the actor a worker it started
    ahead (a ``runtime_env`` costs each actor a fresh worker process).
    """
    options: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "lifetime": "detached",
        "get_if_exists": True,
        "num_cpus": num_cpus,
        "max_concurrency": ACTOR_CONCURRENCY,
        "max_restarts": max_restarts,
        # no transparent re-execution: callers see the failure and retry with attempt + 1
        "max_task_retries": 0,
    }
    if env := actor_env():
        options["runtime_env"] = {"env_vars": env}
    return options


def least_loaded_node(
    nodes: Sequence[Mapping[str, Any]], load: Mapping[str, int], num_cpus: float
) -> str | None:
    """The alive node with the fewest of our agents that has ``num_cpus`` CPUs at all.

    ``nodes`` are ``ray.nodes()`` entries; ties go to the lowest node id (reproducible).

    None when no alive node is big enough (Ray then waits for one, e.g. from the autoscaler).
    """
    fits = [
        str(n["NodeID"])
        for n in nodes
        if n.get("Alive") and float(n.get("Resources", {}).get("CPU", 0.0)) >= num_cpus
    ]
    return min(fits, key=lambda node: (load.get(node, 0), node), default=None)
