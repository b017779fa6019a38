"""Ray glue: spawning and wiring the system actors.

The actor classes stay plain; here they are made remote, named in the ``troupe`` namespace,
given restart policies, and wired to each other through Ray handles.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import ray
import structlog
from ray.exceptions import RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytroupe.actors.agent import AgentActor
from raytroupe.actors.control_handles import (
    DESK,
    OrchestratorShards,
    RayDesk,
    RayShards,
    orchestrator_shard_name,
)
from raytroupe.actors.desk import FrontDesk
from raytroupe.actors.lifecycle import with_lifecycle
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
    through_restarts,
    unwrap,
)
from raytroupe.actors.router import MessageRouter
from raytroupe.actors.router_handles import RouterShards, router_shard_name
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.state import checked_state_url
from raytroupe.actors.telemetry.tracing import actor_env
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.protocols import (
    AgentSpec,
    ConfigError,
    ModelSpec,
    TeamSpec,
    TenantPolicy,
    team_role,
)

__all__ = [
    "NAMESPACE",
    "RayTeamProvisioner",
    "SystemHandles",
    "agent_actor_name",
    "cluster_addresses",
    "spawn_system",
]

SYSTEM_RESTARTS: Final = 10
AGENT_RESTARTS: Final = 10
ACTOR_CONCURRENCY: Final = 1000
"""Ray-level concurrency of async actors; the classes bound their own work (semaphores)."""
STOP_WAIT_S: Final = 5.0
"""How long an agent being retired gets for its ``on_stop``."""
PROVISION_CHECK_S: Final = 5.0
"""How long a provisioned team's actors get to confirm they are still set up."""
PLACE_TRIES: Final = 6
"""How many times a new agent is made on the node chosen for it before it stays elsewhere."""
PLACE_BYTES: Final = 1
"""The memory an agent placed on a chosen node asks Ray for. Soft node affinity put a third of
CPU-less actors (an empty resource request) on the owner's node even on a settled two-node
cluster; any non-empty request (one byte of the ``memory`` resource here) went where asked."""
PLACE_RETRY_S: Final = 1.0
"""The pause before making it again, times the attempt (1 + 2 + ... + 5 = 15 s in all): a
backstop for a node the scheduler does not know yet, or cannot fit."""

log = structlog.get_logger("raytroupe.ray")


def agent_actor_name(name: str) -> str:
    """The Ray actor name of agent ``name``."""
    return f"agent/{name}"


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


class RayTeamProvisioner:
    """Spawns (or reuses) a team's agent actors, grants their tools, serves their models.

    Every job provisions its team. A team provisioned before, unchanged since, whose agents
    still hold their roles and whose models the pool still serves, is checked with one call
    per actor instead of set up again (a restarted agent or pool has lost its configuration
    and fails the check; sandboxes keep their grants across restarts).
    """

    def __init__(self, routers: RouterShards, llm: Any, sandboxes: list[Any]) -> None:
        self._routers = routers
        self._llm = llm
        self._sandboxes = sandboxes
        self._provisioned: dict[str, TeamSpec] = {}
        self._agents: dict[str, Any] = {}
        self._nodes: dict[str, str] = {}
        """The node each agent was created on, to balance the next ones."""

    async def provision(self, team: TeamSpec) -> None:
        """Make every agent of ``team`` reachable through the router by name and role."""
        if await self._still_provisioned(team):
            return
        self._provisioned.pop(team.name, None)
        try:
            if team.models:
                await through_restarts(lambda: self._llm.configure.remote(team.models))
            nodes = await asyncio.to_thread(ray.nodes)  # asks the GCS: off the event loop
            await asyncio.gather(
                *(self._ensure(team, spec, self._place(spec, nodes)) for spec in team.agents)
            )
        except RayTaskError as exc:
            raise unwrap(exc) from None
        self._provisioned[team.name] = team

    async def _still_provisioned(self, team: TeamSpec) -> bool:
        if self._provisioned.get(team.name) != team:
            return False
        calls = [self._agents[spec.name].registration.remote() for spec in team.agents]
        try:
            serves = await asyncio.wait_for(
                asyncio.gather(
                    self._llm.serves_exactly.remote(team.models) if team.models else _true(), *calls
                ),
                PROVISION_CHECK_S,
            )
        except (TimeoutError, RayActorError, RayTaskError):
            return False
        expected = [[team_role(team.name, spec.role)] for spec in team.agents]
        return bool(serves[0]) and list(serves[1:]) == expected

    def _place(self, spec: AgentSpec, nodes: Sequence[Mapping[str, Any]]) -> str | None:
        """The node a new agent goes to: the least loaded one.

        None if the agent exists already, or if no node has the CPUs it asks for.

        Ray would pack 0-CPU actors onto this node, and its SPREAD strategy is best effort
        (seen putting all of a team's agents on the head of a two-node cluster).
        """
        if spec.name in self._agents:  # exists: get_if_exists keeps it where it is
            return None
        node = least_loaded_node(nodes, Counter(self._nodes.values()), spec.num_cpus)
        if node is not None:
            self._nodes[spec.name] = node
        return node

    async def _ensure(self, team: TeamSpec, spec: AgentSpec, node: str | None) -> None:
        # every sandbox learns the agent's allow-list; the agent only learns the tools' specs
        granted = await asyncio.gather(
            *(through_restarts(functools.partial(_grant, s, team, spec)) for s in self._sandboxes)
        )
        tools = granted[0]
        roles = [team_role(team.name, spec.role)]
        if node is not None and not await asyncio.to_thread(_exists, agent_actor_name(spec.name)):
            handle = await self._spawn_on(team, spec, tools, node)
            await handle.configure.remote(spec, tools, roles)
        else:  # there already (kept where it is), or no node is big enough: Ray waits for one
            handle = self._spawn(team, spec, tools, "SPREAD")
            landed, _ = await asyncio.gather(
                handle.started.remote(), handle.configure.remote(spec, tools, roles)
            )
            self._nodes[spec.name] = landed
        await self._routers.register(spec.name, handle, roles)
        self._agents[spec.name] = handle

    async def _spawn_on(
        self, team: TeamSpec, spec: AgentSpec, tools: Sequence[Any], node: str
    ) -> Any:
        """A new agent on ``node``, softly (it moves if the node dies).

        Ray falls back to the local node when its raylet does not (yet) know ``node``, for a
        while after the node joined: an agent that landed elsewhere while ``node`` is alive
        is stopped and made again, a few times, before it is left where it is.
        """
        name = agent_actor_name(spec.name)
        strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=True)
        for attempt in range(1, PLACE_TRIES + 1):
            handle = self._spawn(team, spec, tools, strategy, memory=PLACE_BYTES)
            landed = await handle.started.remote()
            if landed == node:
                return handle
            alive = await asyncio.to_thread(_alive_nodes)
            log.warning(
                "agent.placed_elsewhere",
                agent=spec.name,
                asked=node,
                landed=landed,
                asked_alive=node in alive,
                attempt=attempt,
            )
            if node not in alive or attempt == PLACE_TRIES:
                self._nodes[spec.name] = landed
                return handle
            ray.kill(handle, no_restart=True)
            await _until_gone(name)
            await asyncio.sleep(PLACE_RETRY_S * attempt)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns

    def _spawn(
        self,
        team: TeamSpec,
        spec: AgentSpec,
        tools: Sequence[Any],
        strategy: Any,
        memory: int | None = None,
    ) -> Any:
        options = _options(
            agent_actor_name(spec.name), num_cpus=spec.num_cpus, max_restarts=AGENT_RESTARTS
        )
        options["scheduling_strategy"] = strategy
        if memory is not None:
            options["memory"] = memory
        return (
            _remote(AgentActor)
            .options(**options)
            .remote(
                spec,
                self._routers.client(),
                tools,
                restart_store=GcsRestartStore(agent_actor_name(spec.name)),
                team=team.name,
            )
        )

    async def tool_names(self) -> set[str]:
        """Every tool the sandboxes offer (they all offer the same)."""
        found = await through_restarts(self._sandboxes[0].find.remote)
        return {d.name for d in found}

    async def retire(self, agents: Sequence[str]) -> None:
        """Unregister the named agents from the router and stop their actors for good."""
        self._provisioned.clear()  # their teams are set up afresh by their next job
        for name in agents:
            self._agents.pop(name, None)
            self._nodes.pop(name, None)
            GcsRestartStore(agent_actor_name(name)).forget()
            await self._routers.unregister(name)
            try:
                handle = ray.get_actor(agent_actor_name(name), namespace=NAMESPACE)
            except ValueError:  # never started, or gone already
                continue
            with contextlib.suppress(TimeoutError, RayActorError, RayTaskError):
                await asyncio.wait_for(handle.on_stop.remote(), STOP_WAIT_S)
            ray.kill(handle, no_restart=True)


async def _true() -> bool:
    return True


def _exists(name: str) -> bool:
    try:
        ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def _alive_nodes() -> set[str]:
    return {str(n["NodeID"]) for n in ray.nodes() if n.get("Alive")}


async def _until_gone(name: str, *, tries: int = 50) -> None:
    """Until the killed actor ``name`` has given its name up (bounded: 50 x 0.1 s)."""
    for _ in range(tries):
        if not await asyncio.to_thread(_exists, name):
            return
        await asyncio.sleep(0.1)


def _grant(sandbox: Any, team: TeamSpec, spec: AgentSpec) -> Any:
    functions = {n: d for n, d in team.functions.items() if n in spec.tools}
    return sandbox.grant.remote(spec.name, spec.tools, team.peers(spec.name), functions)


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
    running: int = ray.get(first.shard.remote())[1]
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
    ``actor_resources`` for their kind (see ``_placed``).
    ``models``
    are served by the pool as the operator's; an alias a running pool already serves
    differently is a ``ConfigError`` unless ``replace_models`` (other drivers and tenants
    may be using it). The actors this call starts trace as the ``OTEL_*`` variables say
    (a joining driver's are handed on: see ``_options``). ``policies`` (by tenant, ``*``
    for the default) are set on the front desk, started or found. ``router_shards``
    router actors (``router/0`` ..) share the envelopes between them; a running router
    keeps its number of shards.
    ``orchestrator_shards`` job shards (``orchestrator/0`` ..) run the jobs, the front desk
    (``desk``) admitting each and handing it to a shard in turn (see
    ``raytroupe.actors.orchestrator.shards``); a running orchestrator keeps its number too.
    ``skills`` says where the desk loads skill files from (and whether it watches them) and
    how unnamed jobs are routed.

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
    pending = [
        *(actor.started.remote() for actor in everyone),  # a start-up failure shows here
        *(r.register.remote(*entry) for r in routers.handles for entry in registrations),
    ]
    pending += [desk.put_policy.remote(t, p) for t, p in (policies or {}).items()]
    if models:  # a pool that was running already: its aliases are others' too
        pending.append(llm.configure.remote(dict(models), replace=replace_models, operator=True))
    try:
        ray.get(pending)
        problems: dict[str, str] = ray.get(llm.unservable.remote())
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
