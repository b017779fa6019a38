"""A job's state while the orchestrator runs it, and how subtask results are built."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocols import (
    Budget,
    ErrorPayload,
    JobEvent,
    JobResult,
    JobStatus,
    PlannedSubtask,
    SubtaskResult,
    TaskResult,
    TeamSpec,
    TraceContext,
    Usage,
)

__all__ = ["Job", "failed", "from_task_result", "skipped", "wait_until"]


@dataclass
class Job:
    """One job: what was asked, where it is, what happened."""

    id: str
    task: str
    team: TeamSpec
    tenant: str
    submitted_at: float
    trace: TraceContext = field(default_factory=TraceContext)
    status: JobStatus = "pending"
    events: list[JobEvent] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    result: JobResult | None = None
    usage: Usage = field(default_factory=Usage)
    """Usage of the job's own model calls (planning, aggregation)."""
    budget: Budget | None = None
    stopped: ErrorPayload | None = None
    """Why no further subtask may start (its budget ran out), if it must stop."""


async def wait_until(job: Job, ready: Callable[[], bool], timeout: float | None) -> None:
    """Wait for ``ready()`` on the job's condition, at most ``timeout`` seconds."""
    if ready() or (timeout is not None and timeout <= 0):
        return
    async with job.changed:
        try:
            await asyncio.wait_for(job.changed.wait_for(ready), timeout)
        except TimeoutError:
            return


def _subtask(sub: PlannedSubtask, **fields: Any) -> SubtaskResult:
    return SubtaskResult(
        id=sub.id,
        role=sub.role,
        instructions=sub.instructions,
        depends_on=sub.depends_on,
        **fields,
    )


def from_task_result(sub: PlannedSubtask, done: TaskResult, attempt: int) -> SubtaskResult:
    """The subtask as an agent reported it."""
    return _subtask(sub, attempt=attempt, **done.model_dump(exclude={"kind", "task_id"}))


def failed(sub: PlannedSubtask, error: ErrorPayload, attempt: int) -> SubtaskResult:
    """A subtask no agent could carry out (undeliverable, or the agent answered nonsense)."""
    return _subtask(sub, status="failed", error=error, attempt=attempt)


def skipped(sub: PlannedSubtask, error: ErrorPayload | None = None) -> SubtaskResult:
    """A subtask not run: a dependency did not succeed, or the job had to stop (``error``)."""
    return _subtask(sub, status="skipped", error=error)
