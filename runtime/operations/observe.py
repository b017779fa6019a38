"""What the cluster spent and could not deliver: model usage, dead letters.

Usage is the caller's jobs' (a key's tenant's, an admin's key's too; the driver's every
job's). Dead letters are for admins, and never show an envelope's payload over HTTP.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols import InvalidInput, UsageRow, as_written
from raytroupe.protocols.http import DeadLetterView
from raytroupe.protocols.job_context import EndUser
from raytroupe.runtime.operations.declare import At, JobId, operation
from raytroupe.runtime.operations.surfaces import OLDER_FORM

__all__ = ["dead_letters", "usage", "usage_by_day"]

TAG: Final = "operations"


@operation("GET", "/v1/usage", cli="usage")
async def usage(at: At, job_id: JobId | None = None, user: EndUser | None = None) -> list[UsageRow]:
    """Model usage (calls, tokens, cost) of the caller's jobs, by job, agent and model.

    ``job_id``: that job's only; ``user``: the jobs of that end user of the caller's tenant
    only. Inline agents are named as their author wrote them (one job's, as its tenant did;
    every job's, as the caller did).

    Raises:
        JobNotFound: ``job_id`` names no job (of the caller's).
    """
    if job_id is not None:
        line = await at.system.summary(job_id, tenant=at.jobs_of)
        rows = await at.system.usage(job_id)
        return as_written([r for r in rows if user in (None, r.user)], line.tenant)
    rows = await at.system.usage(None)
    if at.jobs_of is not None:
        mine = await at.system.jobs(tenant=at.jobs_of)
        rows = [row for row in rows if row.job_id in mine]
    return as_written([r for r in rows if user in (None, r.user)], at.tenant)


@operation("GET", "/v1/dead-letters", cli="dead-letters", admin=True)
async def dead_letters(
    at: At, limit: Annotated[int, Field(ge=1, le=10_000)] = 100
) -> list[DeadLetterView]:
    """The router's newest dead letters with their reasons, newest first.

    Each says when, why, and the envelope's id, job, sender, recipient and tenant. In
    process (the driver) each also holds the envelope itself (``message``, or the ``raw``
    bytes that did not decode); over HTTP they are never sent.
    """
    letters = await at.system.dead_letters(limit)
    return [DeadLetterView.of(letter) for letter in reversed(letters)]


def usage_by_day(client: Any, job_id: str | None = None, **given: Any) -> Any:
    """The HTTP clients' older ``usage(daily=...)`` form, answered with a warning.

    ``daily=True`` is :func:`~raytroupe.runtime.operations.job_reads.daily_usage`.
    """
    if "daily" not in given:
        return OLDER_FORM
    daily = given.pop("daily")
    if given:
        raise TypeError(f"usage() got unexpected keyword arguments {sorted(given)}")
    warnings.warn(
        "usage(daily=...) is deprecated: daily_usage() for usage by day, usage() by job",
        DeprecationWarning,
        stacklevel=3,
    )
    if not daily:
        return client.usage(job_id)
    if job_id is not None:
        raise InvalidInput("daily usage totals every job: give no job_id", field="job_id")
    return client.daily_usage()
