"""Ray glue: spawning and wiring the system actors (reached through :mod:`raytroupe.actors.spawn`).

The actor classes stay plain; here they are made remote, named in the ``troupe`` namespace,
given restart policies (see :mod:`raytroupe.actors.ray_placement`), and wired to each other
through Ray handles. A team's agents are spawned by
:class:`~raytroupe.actors.team_provisioner.RayTeamProvisioner`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import structlog
from ray.exceptions import RayTaskError

from raytroupe.actors.control_handles import (
    DESK,
    OrchestratorShards,
    RayDesk,
    RayShards,
    orchestrator_shard_name,
)
from raytroupe.actors.desk import FrontDesk
from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.local.ray_servers import RayLocalServers
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.orchestrator import Orchestrator
from raytroupe.actors.ray_handles import (
    NAMESPACE,
    GcsRestartStore,
    RayPoolPeers,
    discover_troupe,
    ray_mailbox,
    restarted_actor,
    through_restarts_blocking,
    unwrap,
)
from raytroupe.actors.ray_placement import _placed, _remote, _spread
from raytroupe.actors.router import MessageRouter
from raytroupe.actors.router_handles import RouterShards, router_shard_name
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.state import checked_state_url
from raytroupe.actors.team_provisioner import RayTeamProvisioner
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.protocols import ConfigError, ModelSpec, TenantPolicy
from raytroupe.protocols.config.guardrails import GuardrailsConfig
from raytroupe.protocols.config.webhooks import WebhooksConfig

__all__ = [
    "NAMESPACE",
    "SystemHandles",
    "cluster_addresses",
    "spawn_system",
]

log = structlog.get_logger("raytroupe.ray")

JOIN_RESTART_WAIT_S = 120.0
"""How long a driver joining a cluster waits for system actors Ray is restarting.

An actor of a lost node comes back once Ray has noticed the loss: seconds; after a head is
lost, once the new head's GCS has given up on the old one.
"""


@dataclass(frozen=True)
class SystemHandles:
    """Ray handles of the system actors."""

    routers: RouterShards
    llm: Any
    desk: Any
    orchestrators: OrchestratorShards
    sandboxes: list[Any]
    memory: Any


def _shard_count(first_name: str, asked: int) -> int:
    """How many shards the router or orchestrator has: a running one keeps its number.

    ``first_name`` names its shard 0, which says (``shard()``); ``asked`` is the number for
    one that does not run yet.
    """
    try:
        first = ray.get_actor(first_name, namespace=NAMESPACE)
    except ValueError:
        return asked
    running: int = through_restarts_blocking(  # a joining driver: Ray may be restarting it
        lambda: ray.get(first.shard.remote()), within_s=JOIN_RESTART_WAIT_S
    )[1]
    if running != asked:
        log.warning("shards_kept", actor=first_name, running=running, asked=asked)
    return running


def cluster_addresses() -> list[str]:
    """The addresses of the Ray cluster's live nodes (which outbound calls never reach)."""
    return sorted({str(n["NodeManagerAddress"]) for n in ray.nodes() if n.get("Alive")})


def spawn_system(
    models: Mapping[str, ModelSpec] | None = None,
    config: LLMConfig | None = None,
    tools: ToolsConfig | None = None,
    memory: MemoryConfig | None = None,
    journal: Path | None = None,
    *,
    state_url: str | None = None,
    system_resources: Mapping[str, float] | None = None,
    actor_resources: Mapping[str, Mapping[str, float]] | None = None,
    replace_models: bool = False,
    policies: Mapping[str, TenantPolicy] | None = None,
    router_shards: int = 1,
    orchestrator_shards: int = 1,
    skills: SkillsConfig | None = None,
    webhooks: WebhooksConfig | None = None,
    guardrails: GuardrailsConfig | None = None,
) -> SystemHandles:
    """Start the system actors, or find the running ones, and wire them together.

    ``config`` configures a pool this call starts (a running pool keeps its own), and
    ``tools`` the tool sandboxes and ``memory`` the memory store it starts, and
    ``journal`` is the orchestrator's journal file (default ``~/.raytroupe/journal.sqlite``;
    the pool keeps its budget ledger and usage beside it, in ``llm.sqlite``), unless
    ``state_url`` names a PostgreSQL database: then the journal, the ledger and usage, and the
    sandboxes' idempotency records and grants all live there, and a system actor Ray restarts
    on another node finds them. Placement: an actor that keeps files on its node's disk (the
    journal, ledger and tools' records in SQLite; memory in an embedded Chroma) is pinned to
    the head node, where they are; the others (the router always; the rest with PostgreSQL
    state and a Chroma server) run on any node, or on nodes with ``system_resources``, or
    ``actor_resources`` for their kind (see ``ray_placement._placed``).
    ``models``
    are served by the pool as the operator's; an alias a running pool already serves
    differently is a ``ConfigError`` unless ``replace_models`` (other drivers and tenants
    may be using it). The actors this call starts trace as the ``OTEL_*`` variables say
    (a joining driver's are handed on: see ``ray_placement._options``). ``policies`` (by
    tenant, ``*`` for the default) are set on the front desk, started or found. ``router_shards``
    router actors (``router/0`` ..) share the envelopes between them; a running router
    keeps its number of shards.
    ``orchestrator_shards`` job shards (``orchestrator/0`` ..) run the jobs, the front desk
    (``desk``) admitting each and handing it to a shard in turn (see
    ``raytroupe.actors.orchestrator.shards``); a running orchestrator keeps its number too.
    ``skills`` says where the desk loads skill files from (and whether it watches them) and
    how unnamed jobs are routed. ``webhooks``: how the shards send webhooks (and where the
    desk lets their URLs point).

    Raises:
        ConfigError: the pool cannot serve its configuration, or ``models`` would replace
            an alias without ``replace_models``, or ``state_url`` is not a PostgreSQL URL.
    """
    tools = tools or ToolsConfig()
    journal = journal or Path.home() / ".raytroupe" / "journal.sqlite"
    if state_url is not None:
        state_url = checked_state_url(state_url, field="state_url")
        if tools.state_url is None:
            tools = tools.model_copy(update={"state_url": state_url})
    local_state = state_url is None  # the journal and the pool's ledger: SQLite files
    own = cluster_addresses()
    placed = functools.partial(
        _placed, system_resources=system_resources, actor_resources=actor_resources
    )
    shards = _shard_count(router_shard_name(0), router_shards)
    routers = RouterShards(
        [
            _remote(MessageRouter)
            .options(**_spread(placed(router_shard_name(k), local_files=False), shards))
            .remote(
                mailbox_factory=ray_mailbox,
                discover=discover_troupe,
                restarted=restarted_actor,
                shard=k,
                shards=shards,
            )
            for k in range(shards)
        ]
    )
    replicas = config.replicas if config is not None else 1
    pools = [
        _remote(LLMAdapterPool)
        .options(**_spread(placed(f"llm/{n}", local_files=local_state), replicas))
        .remote(
            dict(models or {}),
            config=config,
            router=routers.client(),
            restart_store=GcsRestartStore("llm"),  # one for all: each serves what all do
            state=state_url or journal.parent / "llm.sqlite",
            own_addresses=own,
            replica=n,
            peers=RayPoolPeers(n, replicas) if replicas > 1 else None,
            local_servers=RayLocalServers(),
        )
        for n in range(replicas)
    ]
    llm = pools[0]
    from raytroupe.actors.memory.store import MemoryStore  # noqa: PLC0415 - only the driver spawns it
    from raytroupe.actors.tools.sandbox import ToolSandbox  # noqa: PLC0415

    memory_actor = (
        _remote(MemoryStore)
        .options(**placed("memory", local_files=memory is None or memory.server is None))
        .remote(memory)
    )

    sandboxes = [
        _remote(ToolSandbox)
        .options(**placed(f"tools/{n}", local_files=tools.state_url is None))
        .remote(tools, name=f"tools-{n}", router=routers.client(), own_addresses=own)
        for n in range(tools.sandboxes)
    ]
    count = _shard_count(orchestrator_shard_name(0), orchestrator_shards)
    provisioner = RayTeamProvisioner(routers, llm, sandboxes)
    orchestrators = OrchestratorShards(
        [
            _remote(Orchestrator)
            .options(**_spread(placed(orchestrator_shard_name(k), local_files=local_state), count))
            .remote(
                routers.client(),
                provisioner,
                RayDesk(),
                RayShards(count),
                journal=state_url or journal,
                shard=k,
                webhooks=webhooks,
            )
            for k in range(count)
        ]
    )
    desk = (
        _remote(FrontDesk)
        .options(**placed(DESK, local_files=local_state))
        .remote(
            routers.client(),
            provisioner,
            RayShards(count),
            journal=state_url or journal,
            skills=skills,
            webhooks=webhooks,
            guardrails=guardrails,
        )
    )
    everyone = [*routers.handles, *pools, memory_actor, desk, *orchestrators.handles, *sandboxes]
    registrations = [
        *((f"llm-{n}", pool, ["llm"]) for n, pool in enumerate(pools)),
        *(
            ("orchestrator" if k == 0 else f"orchestrator-{k}", shard, [])
            for k, shard in enumerate(orchestrators.handles)
        ),
        ("memory", memory_actor, []),
        *((f"tools-{n}", s, ["tools"]) for n, s in enumerate(sandboxes)),
    ]

    def settle() -> dict[str, str]:
        pending = [
            *(actor.started.remote() for actor in everyone),  # a start-up failure shows here
            *(r.register.remote(*entry) for r in routers.handles for entry in registrations),
        ]
        pending += [desk.put_policy.remote(t, p) for t, p in (policies or {}).items()]
        if models:  # a pool that was running already: its aliases are others' too
            pending.append(
                llm.configure.remote(dict(models), replace=replace_models, operator=True)
            )
        ray.get(pending)
        unservable: dict[str, str] = ray.get(llm.unservable.remote())
        return unservable

    try:
        # each call is idempotent: all are made again while an actor of a cluster this
        # driver joins is being restarted (its node lost, the head's included)
        problems = through_restarts_blocking(settle, within_s=JOIN_RESTART_WAIT_S)
    except RayTaskError as exc:
        raise unwrap(exc) from None
    if problems:
        raise ConfigError(
            "the LLM pool cannot serve: "
            + "; ".join(f"{alias}: {why}" for alias, why in sorted(problems.items())),
            problems=problems,
        )
    return SystemHandles(
        routers=routers,
        llm=llm,
        desk=desk,
        orchestrators=orchestrators,
        sandboxes=sandboxes,
        memory=memory_actor,
    )
