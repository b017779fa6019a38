"""Job shards: jobs partitioned by id over ``orchestrator/0`` .. ``orchestrator/<K-1>``.

The front desk (:mod:`raytroupe.actors.desk`) admits every job (tenant policies, the team
catalog, inline teams, intent routing: state that must have one keeper) and hands it to a
shard in turn, under an id that names that shard (:func:`raytroupe.protocols.job_shard`).
The owner journals the job in its partition of the journal (the jobs whose ids name it),
runs it, streams its events and answers for it; after a restart it resumes its own
partition only. Callers ask a job's owner directly (``SystemClient``, :class:`Shards`); another
shard answers that it has no such job, and where it is (:func:`job_owner`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from raytroupe.protocols import (
    Budget,
    ImagePart,
    JobNotFound,
    JobResult,
    JobsQuery,
    JobSummary,
    TeamSpec,
    TenantPolicy,
    job_shard,
    new_id,
)
from raytroupe.protocols.intent import IntentChoice
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.skill import SkillSpec

__all__ = ["Admitted", "Desk", "Shards", "TeamProvisioner", "job_owner", "new_job_id"]

T = TypeVar("T")


def new_job_id(shard: int) -> str:
    """A new id for a job of ``shard`` (``job-<hex>`` for shard 0, ``job-<hex>-<k>`` else)."""
    base = f"job-{new_id()[:16]}"
    return base if shard == 0 else f"{base}-{shard}"


@dataclass(frozen=True)
class Admitted:
    """A job the front desk admitted (or a shard forked), as its owner starts it."""

    id: str
    context: JobContext
    team: TeamSpec
    tenant: str
    submitted_at: float
    budget: Budget | None
    route: IntentChoice | None
    images: tuple[ImagePart, ...]
    request_id: str | None
    registered: bool
    skill: SkillSpec | None = None
    input: Any = None
    submitted_by: str | None = None
    """Who submitted it (an API key's name, ``driver``), for jobs lists."""
    admin: bool = False
    """Admitted as an admin's: no tenant policy applies to it (see ``Job.admin``)."""
    forked_from: dict[str, Any] | None = None
    """A fork's origin (job id, checkpoint step, state edit): on its ``job_submitted`` event."""
    stream_answer: bool = False
    """Its caller streams the answer: the aggregation streams its tokens (see ``Job``)."""
    traceparent: str | None = None
    """The caller's OpenTelemetry span (W3C), which the job's root span is a child of."""


class TeamProvisioner(Protocol):
    """Makes teams' agents ready, and stops agents no team needs any more."""

    async def provision(self, team: TeamSpec) -> None:
        """Ensure every agent of ``team`` is running and reachable, and its models served."""
        ...

    async def retire(self, agents: Sequence[str]) -> None:
        """Unregister and stop the named agents (unknown names are ignored)."""
        ...

    async def tool_names(self) -> set[str]:
        """Every tool the sandboxes offer (what agents may be given)."""
        ...


class Desk(Protocol):
    """The front desk, as a job shard reaches it (under Ray: ``control_handles.RayDesk``)."""

    async def submit(self, order: JobOrder, caller: Submitter) -> str:
        """Admit a graph node's child job (see ``FrontDesk.submit``); its id."""
        ...

    async def team(self, name: str) -> TeamSpec:
        """The team registered as ``name`` now (raises ``TeamNotFound``)."""
        ...

    async def policies(self) -> dict[str, TenantPolicy]:
        """Every tenant policy set, by tenant (``*``: the default)."""
        ...

    async def use_inline(self, tenant: str, team: TeamSpec, *, refuse: bool = True) -> None:
        """Count an inline ``team`` among its tenant's live agents.

        Raises ``Forbidden`` (``refuse``, as an admin's fork does not) if it leaves no room.
        """
        ...


class Shards(Protocol):
    """The job shards, as the desk and each shard reach them (under Ray: ``RayShards``).

    A call about one job goes to the shard its id names (:func:`raytroupe.protocols.job_shard`).
    """

    def __len__(self) -> int: ...

    async def adopt(self, job: Admitted) -> None:
        """Have the job's shard journal and run ``job``."""
        ...

    async def wait(
        self, job_id: str, timeout: float | None, *, tenant: str | None = None
    ) -> JobResult | None:
        """The job's result once it has one, or None after ``timeout`` seconds."""
        ...

    async def cancel(self, job_id: str) -> bool:
        """Cancel the job (see ``Orchestrator.cancel``)."""
        ...

    async def running_teams(self) -> set[str]:
        """The teams of every shard's unfinished jobs."""
        ...

    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """Every shard's jobs-list lines from memory, newest first, ``query.limit`` at most."""
        ...


def job_owner(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A method about one job (its id first): only the shard that owns the job answers.

    Asked on another shard, it raises ``JobNotFound`` naming the owner: a shard holds its
    own partition only, and nothing is passed on from one shard to another.
    """

    @functools.wraps(method)
    async def only_owner(self: Any, job_id: str, *args: Any, **kwargs: Any) -> T:
        if not self._owns(job_id):
            owner = job_shard(job_id, self._shards)
            raise JobNotFound(
                f"no job {job_id!r} on orchestrator/{self._shard}: its owner is "
                f"orchestrator/{owner}",
                job_id=job_id,
            )
        return await method(self, job_id, *args, **kwargs)

    return only_owner
