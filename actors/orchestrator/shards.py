"""Orchestrator shards: jobs partitioned by id over ``orchestrator/0`` .. ``orchestrator/<K-1>``.

Shard 0 is the front desk: it admits every job (tenant policies, the team catalog, inline
teams, intent routing: state that must have one keeper) and hands it to a shard in turn,
itself included, under an id that names that shard (:func:`raytroupe.protocols.job_shard`). The
owner journals the job in its partition of the journal (the jobs whose ids name it), runs
it, streams its events and answers for it; after a restart it resumes its own partition
only. Clients ask a job's owner directly (``SystemClient`` finds it from the id); another
shard answers that it has no such job, and where it is (:func:`job_owner`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from raytroupe.protocols import (
    Budget,
    ImagePart,
    InvalidInput,
    JobNotFound,
    TeamSpec,
    job_shard,
    new_id,
)
from raytroupe.protocols.intent import IntentChoice
from raytroupe.protocols.skill import SkillSpec

__all__ = ["Admitted", "OrchestratorPeers", "front_desk", "job_owner", "new_job_id"]

T = TypeVar("T")


def new_job_id(shard: int) -> str:
    """A new id for a job of ``shard`` (``job-<hex>`` for shard 0, ``job-<hex>-<k>`` else)."""
    base = f"job-{new_id()[:16]}"
    return base if shard == 0 else f"{base}-{shard}"


@dataclass(frozen=True)
class Admitted:
    """A job the front desk admitted, as its owner starts it."""

    id: str
    task: str
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


class OrchestratorPeers(Protocol):
    """The other shards of the orchestrator (under Ray: ``raytroupe.actors.ray_handles``)."""

    async def adopt(self, shard: int, job: Admitted) -> None:
        """Have ``shard`` journal and run ``job``."""
        ...

    async def ask(self, shard: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """``shard``'s answer to a call of its ``method`` (its errors raised as they are)."""
        ...


def front_desk(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A method of the front desk (shard 0): teams, policies, skills and evals have one keeper."""

    @functools.wraps(method)
    async def only_there(self: Any, *args: Any, **kwargs: Any) -> T:
        if self._shard != 0:
            raise InvalidInput(
                f"teams and policies are kept by orchestrator/0, not /{self._shard}",
                method=method.__name__,
            )
        return await method(self, *args, **kwargs)

    return only_there


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
