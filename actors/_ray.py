"""Ray glue: the one module of ``actors`` that imports Ray.

The actor classes stay plain; here they are made remote, named in the ``troupe`` namespace,
given restart policies, and wired to each other through Ray handles.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import ray
from ray.exceptions import RayActorError, RayTaskError

from actors.agent import AgentActor
from actors.llm import LLMAdapterPool
from actors.llm.config import LLMConfig
from actors.orchestrator import Orchestrator
from actors.router import MessageRouter
from protocols import (
    AgentMessage,
    AgentSpec,
    ConfigError,
    ModelSpec,
    RecipientUnavailable,
    TeamSpec,
    TroupeError,
    decode,
    encode,
    team_role,
)

__all__ = [
    "NAMESPACE",
    "RayMailbox",
    "RayRouterClient",
    "RayTeamProvisioner",
    "SystemHandles",
    "agent_actor_name",
    "spawn_system",
    "unwrap",
]

NAMESPACE: Final = "troupe"
SYSTEM_RESTARTS: Final = 10
AGENT_RESTARTS: Final = 10
ACTOR_CONCURRENCY: Final = 1000
"""Ray-level concurrency of async actors; the classes bound their own work (semaphores)."""


def agent_actor_name(name: str) -> str:
    """The Ray actor name of agent ``name``."""
    return f"agent/{name}"


def unwrap(exc: BaseException) -> BaseException:
    """The ``TroupeError`` inside a ``RayTaskError``, else ``exc`` itself."""
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, TroupeError):
        return exc.cause
    return exc


class RayMailbox:
    """A router-side :class:`~actors.Mailbox` over a Ray actor handle."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def receive(self, data: bytes, /) -> bytes | None:
        """Call the actor's ``receive``; a dead or restarting actor is ``RecipientUnavailable``."""
        try:
            reply: bytes | None = await self._handle.receive.remote(data)
        except RayActorError as exc:
            raise RecipientUnavailable(f"recipient actor is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None
        return reply


class RayRouterClient:
    """An actor-side :class:`~actors.RouterClient` over the router's Ray handle."""

    def __init__(self, router: Any) -> None:
        self._router = router

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver through the router and wait for the reply."""
        try:
            return decode(await self._router.request.remote(encode(message)))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver through the router without waiting for a reply."""
        try:
            status: str = await self._router.send.remote(encode(message))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None
        return status


@functools.cache
def _remote(cls: type) -> Any:
    return ray.remote(cls)


def _options(name: str, *, num_cpus: float = 0.0, max_restarts: int) -> dict[str, Any]:
    return {
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


class RayTeamProvisioner:
    """Spawns (or reuses) a team's agent actors, registers them, and serves its models."""

    def __init__(self, router: Any, llm: Any) -> None:
        self._router = router
        self._llm = llm

    async def provision(self, team: TeamSpec) -> None:
        """Make every agent of ``team`` reachable through the router by name and role."""
        try:
            if team.models:
                await self._llm.configure.remote(team.models)
            await asyncio.gather(*(self._ensure(team.name, spec) for spec in team.agents))
        except RayTaskError as exc:
            raise unwrap(exc) from None

    async def _ensure(self, team: str, spec: AgentSpec) -> None:
        options = _options(
            agent_actor_name(spec.name), num_cpus=spec.num_cpus, max_restarts=AGENT_RESTARTS
        )
        handle = _remote(AgentActor).options(**options).remote(spec, RayRouterClient(self._router))
        if await handle.spec.remote() != spec:
            await handle.configure.remote(spec)
        await self._router.register.remote(spec.name, handle, [team_role(team, spec.role)])


@dataclass(frozen=True)
class SystemHandles:
    """Ray handles of the system actors."""

    router: Any
    llm: Any
    orchestrator: Any


def spawn_system(
    models: Mapping[str, ModelSpec] | None = None, config: LLMConfig | None = None
) -> SystemHandles:
    """Start the system actors, or find the running ones, and wire them together.

    ``config`` configures a pool this call starts (a running pool keeps its own); ``models``
    are served by the pool, replacing aliases of the same name.
    """
    router = (
        _remote(MessageRouter)
        .options(**_options("router", max_restarts=SYSTEM_RESTARTS))
        .remote(mailbox_factory=RayMailbox)
    )
    llm = (
        _remote(LLMAdapterPool)
        .options(**_options("llm", max_restarts=SYSTEM_RESTARTS))
        .remote(config=config, router=RayRouterClient(router))
    )
    orchestrator = (
        _remote(Orchestrator)
        .options(**_options("orchestrator", max_restarts=SYSTEM_RESTARTS))
        .remote(RayRouterClient(router), RayTeamProvisioner(router, llm))
    )
    pending = [
        router.register.remote("llm", llm, []),
        router.register.remote("orchestrator", orchestrator, []),
    ]
    if models:
        pending.append(llm.configure.remote(dict(models), replace=True))
    try:
        ray.get(pending)
        problems: dict[str, str] = ray.get(llm.problems.remote())
    except RayTaskError as exc:
        raise unwrap(exc) from None
    if problems:
        raise ConfigError(
            "the LLM pool cannot serve: "
            + "; ".join(f"{alias}: {why}" for alias, why in sorted(problems.items())),
            problems=problems,
        )
    return SystemHandles(router=router, llm=llm, orchestrator=orchestrator)
