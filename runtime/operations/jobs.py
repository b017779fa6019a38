"""A running job's operations: cancel, approvals, feedback, a graph's checkpoints and input.

A key reaches its tenant's jobs (an admin's key too); the driver reaches every tenant's.
Another tenant's job is ``JobNotFound``, as if there were none.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from raytroupe.protocols import Conflict, Feedback, JobNotFound
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint
from raytroupe.protocols.http import (
    Cancelled,
    Decided,
    Forked,
    PendingApproval,
    PendingInput,
    Resumed,
)
from raytroupe.protocols.json_data import JsonData, JsonObject
from raytroupe.runtime.operations.declare import At, JobId, operation

__all__ = [
    "approvals",
    "approve",
    "cancel",
    "checkpoints",
    "feedback",
    "feedbacks",
    "fork",
    "interrupts",
    "reject",
    "resume",
]

TAG: Final = "jobs"

Score = Annotated[float, Field(ge=0.0, le=1.0, description="0 (useless) to 1 (exactly right).")]
Comment = Annotated[str, Field(max_length=4000)]
InterruptId = Annotated[str, Field(min_length=1, max_length=1000)]
ApprovalId = Annotated[str, Field(min_length=1, max_length=200)]
Reason = Annotated[str, Field(max_length=2000)]


@operation("POST", "/v1/jobs/{job_id}/cancel", cli="cancel")
async def cancel(at: At, job_id: JobId) -> Cancelled:
    """Cancel the job: its running subtasks stop at their agents.

    Raises:
        JobNotFound: no such job (of the caller's).
        Conflict: it had finished.
    """
    cancelled = await at.system.cancel(job_id, tenant=at.jobs_of)
    status = await at.system.status(job_id, tenant=at.jobs_of)
    if not cancelled:
        raise Conflict(f"job {job_id} already finished ({status})", job_id=job_id)
    return Cancelled(id=job_id, cancelled=True, status=status)


@operation("GET", "/v1/approvals", cli="approvals")
async def approvals(at: At, job_id: JobId | None = None) -> list[PendingApproval]:
    """Tool calls waiting for a person: the job's, or every job's of the caller.

    Each with its approval id, the agent, the tool and the exact arguments it would run with.

    Raises:
        JobNotFound: ``job_id`` names no job (of the caller's).
    """
    if job_id is None:
        held, _ = await at.system.waiting(tenant=at.jobs_of)
    else:
        held = [(job_id, r) for r in await at.system.approvals(job_id, tenant=at.jobs_of)]
    return [PendingApproval(job_id=j, **r.model_dump(exclude={"kind"})) for j, r in held]


@operation("POST", "/v1/jobs/{job_id}/approvals/{approval_id}/approve", cli="approve")
async def approve(
    at: At, job_id: JobId, approval_id: ApprovalId, reason: Reason | None = None
) -> Decided:
    """Let a held tool call run (``reason`` is kept with the decision).

    Raises:
        JobNotFound: no such job (of the caller's), or nothing waits under ``approval_id``.
    """
    return await _decide(at, job_id, approval_id, approved=True, reason=reason or "")


@operation("POST", "/v1/jobs/{job_id}/approvals/{approval_id}/reject", cli="reject")
async def reject(at: At, job_id: JobId, approval_id: ApprovalId, reason: Reason) -> Decided:
    """Refuse a held tool call: the agent sees the refusal and ``reason``.

    Raises:
        JobNotFound: no such job (of the caller's), or nothing waits under ``approval_id``.
    """
    return await _decide(at, job_id, approval_id, approved=False, reason=reason)


async def _decide(at: At, job_id: str, approval_id: str, *, approved: bool, reason: str) -> Decided:
    if not await at.system.decide(
        job_id, approval_id, approved=approved, reason=reason, tenant=at.jobs_of
    ):
        raise JobNotFound(
            f"job {job_id} has no tool call waiting under {approval_id!r}",
            job_id=job_id,
            approval_id=approval_id,
        )
    return Decided(job_id=job_id, approval_id=approval_id, approved=approved)


@operation("POST", "/v1/jobs/{job_id}/feedback", cli="feedback", status=201)
async def feedback(at: At, job_id: JobId, score: Score, comment: Comment = "") -> Feedback:
    """Keep a verdict on the job's answer, with the job (and who gave it).

    Raises:
        JobNotFound: no such job (of the caller's).
        Conflict: the job has not finished.
    """
    return await at.system.feedback(job_id, score, comment, by=at.name, tenant=at.jobs_of)


@operation("GET", "/v1/jobs/{job_id}/feedback", cli="feedback")
async def feedbacks(at: At, job_id: JobId) -> list[Feedback]:
    """Every verdict given on the job, oldest first."""
    return await at.system.feedbacks(job_id, tenant=at.jobs_of)


@operation("GET", "/v1/jobs/{job_id}/checkpoints", cli="checkpoints")
async def checkpoints(at: At, job_id: JobId) -> list[GraphCheckpoint]:
    """A graph job's checkpoints, by subgraph then superstep (none: not a graph job)."""
    return await at.system.checkpoints(job_id, tenant=at.jobs_of)


@operation(
    "POST", "/v1/jobs/{job_id}/fork", cli="fork", status=202,
    location=lambda forked: f"/v1/jobs/{forked.job_id}",
)  # fmt: skip
async def fork(
    at: At, job_id: JobId, step: Annotated[int, Field(ge=0)], *, state: JsonObject | None = None
) -> Forked:
    """Start a new job from checkpoint ``step`` of a graph job, its state edited or not.

    ``step`` is the checkpoint's superstep (0: before the first); ``state``, fields of the
    checkpoint's state to change first. The new job is the same task and team, recorded as
    a fork of the original; unless an admin forks it is admitted again, under the tenant's
    policy of today.

    Raises:
        JobNotFound: no such job (of the caller's).
        Forbidden: today's policy refuses a field of the job.
        InvalidInput: the job is not a graph's, has no such checkpoint, or the edit leaves
            the state invalid.
    """
    new_id = await at.system.fork(job_id, step, state=state, tenant=at.jobs_of, admin=at.admin)
    return Forked(job_id=new_id, forked_from=job_id, step=step)


@operation("GET", "/v1/interrupts", cli="resume")
async def interrupts(at: At) -> list[PendingInput]:
    """Every graph of the caller's jobs waiting for a person's input, with its state."""
    _, waits = await at.system.waiting(tenant=at.jobs_of)
    return [PendingInput(job_id=j, interrupt=i, state=s) for j, i, s in waits]


@operation("POST", "/v1/jobs/{job_id}/resume", cli="resume")
async def resume(
    at: At,
    job_id: JobId,
    value: JsonData = None,
    *,
    state: JsonObject | None = None,
    interrupt: InterruptId | None = None,
) -> Resumed:
    """Let a graph waiting for input go on: ``value`` for the node, ``state`` edits first.

    ``interrupt`` names the one answered, needed only when several wait.

    Raises:
        JobNotFound: no such job (of the caller's).
        Conflict: it waits for no input (or not for ``interrupt``).
    """
    answered = await at.system.resume(
        job_id, value=value, state=state, interrupt=interrupt, tenant=at.jobs_of
    )
    return Resumed(job_id=job_id, interrupt=answered)
