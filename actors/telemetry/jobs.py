"""Spans of a job, collected on the job as things happen (see ``raytroupe.protocols.trace``).

The job's root span has the job's trace ids (``job.trace``); every other span hangs below it:
plan, subtasks (with their delivery attempts, the agents' model and tool calls under each
attempt, and a resolution with redundancy), aggregate. A job is anything with the fields of
:class:`TracedJob` (the orchestrator's ``Job``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from raytroupe.protocols import (
    ErrorPayload,
    PlannedSubtask,
    Span,
    SpanKind,
    SubtaskResult,
    TeamSpec,
    Timings,
    TraceContext,
    new_span_id,
)
from raytroupe.protocols.resolution import Resolution
from raytroupe.protocols.trace import Attribute

__all__ = [
    "TracedJob",
    "add_span",
    "attempt_span",
    "done_subtask_spans",
    "job_trace",
    "resolution_span",
    "subtask_span",
]


class TracedJob(Protocol):
    """What the spans of a job are made of (the orchestrator's ``Job`` has it all)."""

    id: str
    tenant: str
    team: TeamSpec
    request_id: str | None
    submitted_at: float
    trace: TraceContext
    spans: list[Span]
    done: dict[str, SubtaskResult]


def add_span(  # noqa: PLR0917 - a span's fields
    job: TracedJob,
    kind: SpanKind,
    name: str,
    start: float,
    end: float,
    parent: str | None = None,
    span_id: str | None = None,
    **attributes: Attribute,
) -> Span:
    """Record a span of ``job`` (under the job's root unless ``parent`` says otherwise)."""
    span = Span(
        span_id=span_id or new_span_id(),
        parent_id=parent or job.trace.span_id,
        trace_id=job.trace.trace_id,
        name=name,
        kind=kind,
        start=start,
        end=max(start, end),
        attributes=attributes,
    )
    job.spans.append(span)
    return span


def subtask_span(
    job: TracedJob, span_id: str, result: SubtaskResult, start: float, end: float
) -> Span:
    """The span of one subtask, under the job (its attempts were recorded under ``span_id``)."""
    return add_span(
        job,
        "subtask",
        f"subtask {result.id}",
        start,
        end,
        span_id=span_id,
        subtask_id=result.id,
        role=result.role,
        agent=result.agent,
        status=result.status,
        attempt=result.attempt,
    )


def done_subtask_spans(job: TracedJob) -> None:
    """Spans, from their timestamps, of the subtasks that succeeded before a restart."""
    for result in job.done.values():
        if result.status == "succeeded":
            start = result.started_at or job.submitted_at
            subtask_span(job, new_span_id(), result, start, result.finished_at or start)


def attempt_span(
    job: TracedJob,
    parent: str,
    *,
    attempt: int,
    routed_to: str,
    start: float,
    end: float,
    agent: str | None,
    error: ErrorPayload | None,
    agent_spans: Sequence[Span] = (),
) -> Span:
    """One delivery of a subtask; the agent's own spans are placed under it."""
    span = add_span(
        job,
        "attempt",
        f"attempt {attempt}",
        start,
        end,
        parent,
        attempt=attempt,
        agent=agent,
        routed_to=routed_to,
        error_code=error.code.value if error else None,
    )
    for child in agent_spans:  # clamped into the attempt: the agent's clock may differ
        child_start = min(max(child.start, span.start), span.end)
        job.spans.append(
            child.model_copy(
                update={
                    "parent_id": span.span_id,
                    "trace_id": span.trace_id,
                    "start": child_start,
                    "end": min(max(child.end, child_start), span.end),
                }
            )
        )
    return span


def resolution_span(
    job: TracedJob,
    parent: str,
    sub: PlannedSubtask,
    resolution: Resolution,
    *,
    start: float,
    end: float,
) -> Span:
    """How the answers of a redundant subtask became one."""
    return add_span(
        job,
        "resolution",
        f"resolution {sub.id}",
        start,
        end,
        parent,
        strategy=resolution.strategy,
        chosen_agent=resolution.chosen_agent,
        resolved=resolution.resolved,
        rationale=resolution.rationale[:500],
        candidates=len(resolution.candidates),
    )


def job_trace(
    job: TracedJob, timings: Timings, status: str, error: ErrorPayload | None
) -> tuple[Span, ...]:
    """The job's root span, then every span recorded for it, by start time."""
    root = Span(
        span_id=job.trace.span_id,
        trace_id=job.trace.trace_id,
        name=f"job {job.id}",
        kind="job",
        start=timings.submitted_at,
        end=max(timings.submitted_at, timings.finished_at),
        attributes={
            "job_id": job.id,
            "team": job.team.name,
            "tenant": job.tenant,
            "request_id": job.request_id,
            "status": status,
            "error_code": error.code.value if error else None,
        },
    )
    return (root, *sorted(job.spans, key=lambda s: s.start))
