"""Provisioning a team under Ray: its agents spawned or reused, placed, granted their tools.

:class:`RayTeamProvisioner` is the orchestrator's and the desk's
:class:`~raytroupe.actors.orchestrator.shards.TeamProvisioner` over Ray handles.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import Counter
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Final

import ray
import structlog
from ray.exceptions import RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytroupe.actors.agent import AgentActor
from raytroupe.actors.ray_handles import NAMESPACE, GcsRestartStore, through_restarts, unwrap
from raytroupe.actors.ray_placement import _options, _remote, least_loaded_node
from raytroupe.actors.router_handles import RouterShards
from raytroupe.protocols import AgentSpec, TeamSpec, team_role

__all__ = [
    "PLACE_TRIES",
    "RayTeamProvisioner",
    "agent_actor_name",
]

AGENT_RESTARTS: Final = 10
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

        def configured(handle: Any) -> Awaitable[Any]:
            # an agent killed as it starts is started again by Ray: the call is asked again
            return through_restarts(lambda: handle.configure.remote(spec, tools, roles))

        if node is not None and not await asyncio.to_thread(_exists, agent_actor_name(spec.name)):
            handle = await self._spawn_on(team, spec, tools, node)
            await configured(handle)
        else:  # there already (kept where it is), or no node is big enough: Ray waits for one
            handle = self._spawn(team, spec, tools, "SPREAD")
            landed, _ = await asyncio.gather(
                through_restarts(handle.started.remote), configured(handle)
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
            landed = await through_restarts(handle.started.remote)
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
        gone = set(agents)  # their teams are set up afresh by their next job
        self._provisioned = {
            name: team
            for name, team in self._provisioned.items()
            if not gone.intersection(a.name for a in team.agents)
        }
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
