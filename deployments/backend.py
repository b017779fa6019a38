"""How the HTTP application reaches raytroupe's actors: the same ones drivers and the CLI use."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from actors.llm.config import LLMConfig
from actors.ray_handles import unwrap
from actors.spawn import spawn_system
from deployments.config import APIConfig
from protocols import RecipientUnavailable

__all__ = ["Backend"]

_READY_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class Backend:
    """Ray handles of the system actors, and one way to call them."""

    orchestrator: Any
    router: Any
    llm: Any

    @classmethod
    def start(cls, config: APIConfig) -> Backend:
        """Find the running system actors (namespace ``troupe``), or start them.

        An app deployed next to a running raytroupe (``troupe up``, a driver's
        ``runtime.connect()``) shares its actors, so HTTP, drivers and the CLI see the same
        jobs; ``config.llm_config`` and ``config.journal`` apply only to actors it starts.
        """
        llm = None if config.llm_config is None else LLMConfig.from_yaml(config.llm_config)
        handles = spawn_system(None, llm, None, None, config.journal)
        for tenant, policy in config.tenant_policies.items():
            ray.get(handles.orchestrator.put_policy.remote(tenant, policy))
        return cls(orchestrator=handles.orchestrator, router=handles.router, llm=handles.llm)

    async def call(self, ref: Any) -> Any:
        """Await a remote call; raises the ``TroupeError`` it raised, typed.

        Raises:
            RecipientUnavailable: the actor died or is restarting (the client may retry).
        """
        try:
            return await ref
        except RayTaskError as exc:
            raise unwrap(exc) from None
        except RayActorError as exc:
            raise RecipientUnavailable(f"a system actor is unavailable: {exc}") from None

    async def ready(self) -> dict[str, bool]:
        """Whether each system actor answers within a few seconds."""

        async def answers(ref: Any) -> bool:
            try:
                await asyncio.wait_for(asyncio.wrap_future(ref.future()), _READY_TIMEOUT_S)
            except (TimeoutError, GetTimeoutError, RayActorError, RayTaskError):
                return False
            return True

        checks = {
            "router": self.router.stats.remote(),
            "orchestrator": self.orchestrator.jobs.remote(tenant="-"),
            "llm": self.llm.unservable.remote(),
        }
        results = await asyncio.gather(*(answers(ref) for ref in checks.values()))
        return dict(zip(checks, results, strict=True))
