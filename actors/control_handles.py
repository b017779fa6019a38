"""Ray handles of the control plane: the front desk and the job shards, each by its name.

The desk and each shard reach one another through these (the ``Desk`` and ``Shards``
protocols of :mod:`raytroupe.actors.orchestrator.shards`); the system client sends each
job's calls to the shard that owns it through :class:`OrchestratorShards`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Sequence
from typing import Any, Final

import ray
from ray.exceptions import RayActorError, RayTaskError

from raytroupe.actors.ray_handles import NAMESPACE, through_restarts, unwrap
from raytroupe.protocols import (
    JobResult,
    JobsQuery,
    JobSummary,
    RecipientUnavailable,
    TeamSpec,
    TenantPolicy,
    job_shard,
)
from raytroupe.protocols.job_order import JobOrder, Submitter

__all__ = ["DESK", "OrchestratorShards", "RayDesk", "RayShards", "orchestrator_shard_name"]


class _ByName:
    """Named system actors of the namespace, each looked up once, called through restarts."""

    def __init__(self) -> None:
        self._handles: dict[str, Any] = {}
        """Looked up once: a handle stays valid through its actor's restarts."""

    async def _handle(self, name: str) -> Any:
        if name not in self._handles:  # asks the GCS: off the event loop
            found = await asyncio.to_thread(ray.get_actor, name, namespace=NAMESPACE)
            self._handles[name] = found
        return self._handles[name]

    async def _ask(self, name: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``name``'s answer to its ``method``; its errors raised as they are.

        Raises:
            RecipientUnavailable: the actor is gone for good (not restarting).
        """

        async def attempt() -> Any:
            handle = await self._handle(name)
            return await getattr(handle, method).remote(*args, **kwargs)

        try:
            return await through_restarts(attempt)
        except (ValueError, RayActorError) as exc:
            raise RecipientUnavailable(f"{name} is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None


class RayShards(_ByName):
    """The job shards (actors ``orchestrator/<k>``) as the desk and the shards reach them.

    See :class:`raytroupe.actors.orchestrator.shards.Shards`: a call about a job goes to the
    shard its id names. Calls wait through a shard's restart (:func:`through_restarts`); a
    shard gone for good is ``RecipientUnavailable``.
    """

    def __init__(self, count: int) -> None:
        super().__init__()
        self._count = count

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayShards, (self._count,))

    def __len__(self) -> int:
        return self._count

    def _of(self, job_id: str) -> str:
        return orchestrator_shard_name(job_shard(job_id, self._count))

    async def adopt(self, job: Any) -> None:
        """Have the job's shard journal and run the admitted ``job``."""
        await self._ask(self._of(job.id), "adopt", job)

    async def wait(
        self, job_id: str, timeout: float | None, *, tenant: str | None = None
    ) -> JobResult | None:
        """The job's result once it has one, or None after ``timeout`` seconds."""
        result: JobResult | None = await self._ask(
            self._of(job_id), "wait", job_id, timeout, tenant=tenant
        )
        return result

    async def cancel(self, job_id: str) -> bool:
        """Cancel the job at its shard."""
        return bool(await self._ask(self._of(job_id), "cancel", job_id))

    async def running_teams(self) -> set[str]:
        """The teams of every shard's unfinished jobs."""
        names = [orchestrator_shard_name(k) for k in range(self._count)]
        found = await asyncio.gather(*(self._ask(n, "running_teams") for n in names))
        return set().union(*found)

    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """Every shard's jobs-list lines from memory, newest first, ``query.limit`` at most."""
        names = [orchestrator_shard_name(k) for k in range(self._count)]
        found = await asyncio.gather(*(self._ask(n, "summaries", tenant, query) for n in names))
        lines = heapq.merge(*found, key=lambda line: -line.submitted_at)
        return list(itertools.islice(lines, query.limit))


class RayDesk(_ByName):
    """The front desk (actor ``desk``) as a job shard reaches it.

    See :class:`raytroupe.actors.orchestrator.shards.Desk`; calls wait through its restart.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayDesk, ())

    async def submit(self, order: JobOrder, caller: Submitter) -> str:
        """Admit a graph node's child job; its id."""
        return str(await self._ask(DESK, "submit", order, caller))

    async def team(self, name: str) -> TeamSpec:
        """The team registered as ``name`` now."""
        team: TeamSpec = await self._ask(DESK, "team", name)
        return team

    async def policies(self) -> dict[str, TenantPolicy]:
        """Every tenant policy set, by tenant."""
        policies: dict[str, TenantPolicy] = await self._ask(DESK, "policies")
        return policies

    async def use_inline(self, tenant: str, team: TeamSpec, *, refuse: bool = True) -> None:
        """Count an inline ``team`` among its tenant's live agents."""
        await self._ask(DESK, "use_inline", tenant, team, refuse=refuse)


DESK: Final = "desk"
"""The Ray actor name of the front desk."""


class OrchestratorShards:
    """The job shards' handles, ``orchestrator/0`` .. ``/<K-1>``, for the control plane.

    A job's questions go to the shard its id names (:func:`raytroupe.protocols.job_shard`).
    """

    def __init__(self, handles: Sequence[Any]) -> None:
        if not handles:
            raise ValueError("an orchestrator has one shard at least")
        self.handles: tuple[Any, ...] = tuple(handles)

    def __len__(self) -> int:
        return len(self.handles)

    def of(self, job_id: str) -> Any:
        """The shard that owns ``job_id``."""
        return self.handles[job_shard(job_id, len(self.handles))]


def orchestrator_shard_name(shard: int) -> str:
    """The Ray actor name of orchestrator shard ``shard``."""
    return f"orchestrator/{shard}"
