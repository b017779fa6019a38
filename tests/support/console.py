"""Stored history for the console tests: jobs written to the session's journal as finished.

A thousand jobs through the whole system would take minutes on two cores; the jobs page reads
the journal, so these are written there directly, as an orchestrator writes a finished job
(``Journal.job`` then ``Journal.finish``), under a tenant of their own.
"""

from __future__ import annotations

import time

from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    AgentSpec,
    JobResult,
    Span,
    SubtaskResult,
    TeamSpec,
    Timings,
    TraceContext,
    Usage,
)
from raytroupe.protocols.job_context import JobContext

TEAM = TeamSpec(name="history", agents=(AgentSpec(name="historian", role="worker"),))


def subtask(index: int, depends_on: tuple[str, ...]) -> SubtaskResult:
    """A finished subtask ``s<index>``."""
    return SubtaskResult(
        id=f"s{index}",
        role="worker",
        instructions=f"part {index}",
        depends_on=depends_on,
        status="failed" if index % 17 == 5 else "succeeded",
        agent="historian",
        output=f"answer {index}",
        attempt=1 + index % 2,
    )


def wide_plan(count: int) -> tuple[SubtaskResult, ...]:
    """``count`` subtasks in layers of up to 16, each depending on two of the layer before."""
    subtasks = []
    for index in range(count):
        layer, at = divmod(index, 16)
        parents = () if layer == 0 else (f"s{(layer - 1) * 16 + at}", f"s{(layer - 1) * 16}")
        subtasks.append(subtask(index, tuple(dict.fromkeys(parents))))
    return tuple(subtasks)


def stored_job(
    journal: Journal,
    job_id: str,
    *,
    tenant: str,
    task: str,
    at: float,
    subtasks: tuple[SubtaskResult, ...] = (),
    by: str = "bulk-user",
) -> JobResult:
    """Journal ``job_id`` as submitted at ``at`` and finished a few seconds later."""
    journal.job(
        job_id,
        context=JobContext(request=task),
        team=TEAM,
        tenant=tenant,
        budget=None,
        submitted_at=at,
        submitted_by=by,
    )
    root = TraceContext()
    spans = [
        Span(span_id=root.span_id, trace_id=root.trace_id, name=f"job {job_id}", kind="job",
             start=at, end=at + 3.0, attributes={"job_id": job_id, "tenant": tenant}),
        Span(parent_id=root.span_id, trace_id=root.trace_id, name="plan", kind="plan",
             start=at + 0.1, end=at + 0.4, attributes={"subtasks": len(subtasks)}),
    ]  # fmt: skip
    for n, sub in enumerate(subtasks[:32]):  # a bounded trace: the DAG is what is measured
        spans.append(
            Span(parent_id=root.span_id, trace_id=root.trace_id, name=f"subtask {sub.id}",
                 kind="subtask", start=at + 0.5 + n * 0.05, end=at + 1.0 + n * 0.05)
        )  # fmt: skip
    failed = any(s.status == "failed" for s in subtasks)
    result = JobResult(
        job_id=job_id,
        task=task,
        team=TEAM.name,
        status="failed" if failed else "succeeded",
        answer=f"the answer to {task}",
        subtasks=subtasks,
        usage=Usage(prompt_tokens=120, completion_tokens=30, cost_usd=0.0012, calls=2),
        timings=Timings(submitted_at=at, finished_at=at + 3.0),
        trace=tuple(spans),
    )
    journal.finish(result)
    return result


def fill_history(url: str, tenant: str, count: int) -> list[str]:
    """Journal ``count`` finished jobs of ``tenant`` (one a minute back from now); their ids."""
    journal = Journal(url)
    now = time.time()
    ids = []
    try:
        for n in range(count):
            job_id = f"job-hist{n:04d}"
            stored_job(journal, job_id, tenant=tenant, task=f"Report number {n} on topic {n % 7}",
                       at=now - 60.0 * (count - n), subtasks=(subtask(0, ()),))  # fmt: skip
            ids.append(job_id)
    finally:
        journal.close()
    return ids


def store_wide_job(url: str, tenant: str, job_id: str, count: int) -> JobResult:
    """Journal one finished job of ``tenant`` whose plan has ``count`` subtasks."""
    journal = Journal(url)
    try:
        return stored_job(journal, job_id, tenant=tenant, task=f"A plan of {count} parts",
                          at=time.time() - 30.0, subtasks=wide_plan(count))  # fmt: skip
    finally:
        journal.close()
