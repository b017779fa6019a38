"""Reading jobs: one job, its events, the jobs list, its line and trace, usage by day, who asks.

A key reads its tenant's jobs (an admin's key too); the driver every tenant's. Usage by day
is the caller's tenant's, an admin's every tenant's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from raytroupe.protocols import JobEvent, JobsQuery, JobStatus, JobSummary, JobTimeout
from raytroupe.protocols.http import DailyUsage, JobSummaries, JobTrace, JobView, Me
from raytroupe.protocols.job_context import EndUser
from raytroupe.runtime.operations.declare import At, JobId, Stream, operation

__all__ = [
    "JobsShown",
    "daily_usage",
    "events",
    "job",
    "me",
    "statuses",
    "summaries",
    "summary",
    "trace",
]

TAG: Final = "jobs"

JobsShown = Literal[
    "pending", "planning", "running", "awaiting_approval", "awaiting_input", "aggregating",
    "succeeded", "failed", "cancelled", "live",
]  # fmt: skip
"""What the jobs list may be narrowed to: one status, or ``live`` (every unfinished job)."""
Text = Annotated[str, Field(max_length=200, pattern=r"^[^\x00]*$", description="Text to find.")]
PageSize = Annotated[int, Field(ge=1, le=1000)]
QUIET_S: Final = 15.0
"""Longest quiet spell on a job's event stream before it says it is still there (a None)."""


@operation("GET", "/v1/jobs/{job_id}", cli="result")
async def job(at: At, job_id: JobId) -> JobView:
    """Where the job is; its result (answer, subtasks, usage, trace) once it has one.

    The driver's ``job(id)`` is a handle on the job (wait for it, cancel it...): its
    ``info()`` answers this.

    Raises:
        JobNotFound: no such job (of the caller's).
    """
    status = await at.system.status(job_id, tenant=at.jobs_of)
    result = await at.system.wait(job_id, 0, tenant=at.jobs_of)
    return JobView(id=job_id, status=result.status if result else status, result=result)


def _late(arguments: Mapping[str, Any], seconds: float) -> JobTimeout:
    job_id = arguments["job_id"]
    return JobTimeout(f"job {job_id} still running after {seconds} s", job_id=job_id)


@operation(
    "GET", "/v1/jobs/{job_id}/events", cli="events",
    stream=Stream(id="seq", event="type", last="terminal", resume="after", follow="follow",
                  late=_late),
)  # fmt: skip
async def events(
    at: At,
    job_id: JobId,
    *,
    after: Annotated[int, Field(ge=0, description="Resume after this seq.")] = 0,
    follow: Annotated[
        bool, Field(description="False: the events so far, then the stream ends.")
    ] = True,
) -> AsyncIterator[JobEvent | None]:
    """The job's events after ``after``, in order, live, until its last one.

    Each event's ``seq`` is its place: a reader that reconnects with ``Last-Event-ID`` (or
    ``after``) gets every event after it, none twice. ``follow=False``: the events the job has
    had so far, then the stream ends. Over HTTP, Server-Sent Events: ``id`` is the event's
    seq, ``event`` its type, ``data`` the JobEvent as JSON; ``event: error`` (data: code and
    detail) if the stream fails after it began.

    Raises:
        JobNotFound: no such job (of the caller's), before the stream begins.
    """
    first = await at.system.events(job_id, after, 0, tenant=at.jobs_of)
    return _following(at, job_id, after, first, follow=follow)


async def _following(
    at: At, job_id: str, after: int, first: list[JobEvent], *, follow: bool
) -> AsyncIterator[JobEvent | None]:
    batch = first
    while True:
        for event in batch:
            after = event.seq
            yield event
            if event.terminal:
                return
        if not follow:
            return
        if not batch:
            yield None  # still there: keeps a proxy from closing a quiet stream
        batch = await at.system.events(job_id, after, QUIET_S, tenant=at.jobs_of)


@operation("GET", "/v1/jobs", cli="jobs")
async def statuses(at: At) -> dict[str, JobStatus]:
    """Every job of the caller's and its status, oldest first."""
    return await at.system.jobs(tenant=at.jobs_of)


@operation("GET", "/v1/jobs/summaries", cli="jobs")
async def summaries(
    at: At,
    status: JobsShown | None = None,
    q: Text | None = None,
    before: float | None = None,
    limit: PageSize = 100,
    *,
    user: EndUser | None = None,
) -> JobSummaries:
    """The caller's jobs newest first (status, team or skill, who, when, cost), a page.

    ``q`` finds text in the id, task, team, skill and submitter; ``status`` is one status or
    ``live`` (every unfinished job); ``user``: that end user's jobs only; ``before`` pages
    on (submitted before it). ``more``: older jobs match too.
    """
    query = JobsQuery(status=status, text=q or None, before=before, limit=limit + 1, user=user)
    lines = await at.system.summaries(query, tenant=at.jobs_of)
    return JobSummaries(jobs=lines[:limit], more=len(lines) > limit)


@operation("GET", "/v1/jobs/{job_id}/summary", cli="jobs")
async def summary(at: At, job_id: JobId) -> JobSummary:
    """The job's line of the jobs list, with its live status.

    Raises:
        JobNotFound: no such job (of the caller's).
    """
    return await at.system.summary(job_id, tenant=at.jobs_of)


@operation("GET", "/v1/jobs/{job_id}/trace", cli="result")
async def trace(at: At, job_id: JobId) -> JobTrace:
    """The job's spans so far, the root first; its root ends now while it runs.

    Plan, subtasks, attempts, model calls, tool calls (arguments and results cut at 2,000
    characters), resolutions.

    Raises:
        JobNotFound: no such job (of the caller's).
    """
    spans = await at.system.trace(job_id, tenant=at.jobs_of)
    trace_id = spans[0].trace_id if spans else ""
    return JobTrace(trace_id=trace_id, job_id=job_id, spans=list(spans))


@operation("GET", "/v1/usage/daily", cli="usage")
async def daily_usage(at: At) -> list[DailyUsage]:
    """Model usage by tenant, day (UTC, of submission) and model alias.

    The caller's tenant's; an admin's, every tenant's.
    """
    jobs = await at.system.summaries(JobsQuery(limit=1_000_000), tenant=at.scope)
    whose = {j.id: (j.tenant, time.strftime("%Y-%m-%d", time.gmtime(j.submitted_at))) for j in jobs}
    totals: dict[tuple[str, str, str], DailyUsage] = {}
    for row in await at.system.usage():
        if row.job_id not in whose:
            continue  # another tenant's, or not a job's
        tenant, day = whose[row.job_id]
        line = totals.setdefault(
            (tenant, day, row.model), DailyUsage(tenant=tenant, day=day, model=row.model)
        )
        line.calls += row.calls
        line.prompt_tokens += row.prompt_tokens
        line.completion_tokens += row.completion_tokens
        line.cost_usd += row.cost_usd
    return [totals[k] for k in sorted(totals)]


@operation("GET", "/v1/me", cli="me")
async def me(at: At) -> Me:
    """The caller: its name (the key's, or ``driver``), tenant, and whether it is an admin."""
    return Me(name=at.name, tenant=at.tenant, admin=at.admin)
