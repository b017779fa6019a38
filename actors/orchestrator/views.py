"""What people watching jobs see of them: jobs-list lines, a live trace, what waits for them.

Plain functions of the orchestrator's jobs (and journal), for the API's jobs list and the
console; nothing here changes a job.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.telemetry.jobs import job_trace
from raytroupe.protocols import ApprovalRequest, JobsQuery, JobSummary, Span, Timings, as_written
from raytroupe.protocols.graph_checkpoints import Interrupted
from raytroupe.protocols.jobs import TERMINAL

__all__ = [
    "Interrupted",
    "listed",
    "live_trace",
    "summary_of",
    "waiting_approvals",
    "waiting_interrupts",
]


def summary_of(job: Job) -> JobSummary:
    """The job's jobs-list line, from the job as the orchestrator holds it."""
    result = job.result
    return JobSummary(
        id=job.id,
        status=job.status,
        tenant=job.tenant,
        team=job.team.name,
        skill=None if job.skill is None else job.skill.ref,
        submitted_by=job.submitted_by,
        user=job.context.user,
        submitted_at=job.submitted_at,
        finished_at=None if result is None else result.timings.finished_at,
        cost_usd=None if result is None else result.usage.cost_usd,
        tokens=None if result is None else result.usage.total_tokens,
        subtasks=None if result is None else len(result.subtasks),
        task=job.context.request[:200],
    )


def listed(line: JobSummary, query: JobsQuery) -> bool:
    """Whether a jobs list filtered by ``query``'s status and text shows ``line``."""
    if query.status == "live" and line.status in TERMINAL:
        return False
    if query.status not in {None, "live", line.status}:
        return False
    if query.user is not None and line.user != query.user:
        return False
    if not query.text:
        return True
    text = query.text.lower()
    fields = (line.id, line.task, line.team, line.skill or "", line.submitted_by or "")
    return any(text in field.lower() for field in fields)


def live_trace(job: Job) -> tuple[Span, ...]:
    """The job's trace: its result's once it has one, else the spans so far (root ends now)."""
    if job.result is not None:
        return job.result.trace
    now = time.time()
    timings = Timings(submitted_at=job.submitted_at, finished_at=max(now, job.submitted_at))
    return job_trace(job, timings, job.status, None)


def waiting_approvals(jobs: Iterable[Job], tenant: str | None) -> list[tuple[str, ApprovalRequest]]:
    """``(job id, request)`` of every tool call held for a person, of ``tenant``'s jobs."""
    return [
        (job.id, as_written(request, job.tenant))
        for job in jobs
        if tenant is None or job.tenant == tenant
        for request, answered in job.approvals.values()
        if not answered.done()
    ]


def waiting_interrupts(jobs: Iterable[Job], tenant: str | None) -> list[Interrupted]:
    """Every graph waiting for a person, of ``tenant``'s (all: ``None``)."""
    return [
        Interrupted(job.id, waiting.interrupt, waiting.state)
        for job in jobs
        if tenant is None or job.tenant == tenant
        for waiting in job.waiting.values()
    ]
