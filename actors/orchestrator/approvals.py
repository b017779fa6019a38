"""Human approval of tool calls: held, decided, journaled, replayed.

A sandbox asks the orchestrator before running a tool marked ``requires_approval``; the call
waits until a person approves or rejects that exact call (its id is bound to the job, the
subtask, the loop step, the tool and the normalized arguments). Decisions are journaled, so
the same call asked again (a retry, a restart) gets the recorded answer.
"""

from __future__ import annotations

import asyncio
import json
import time

from raytroupe.actors.orchestrator.jobs import Job, emit, set_status
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import ApprovalDecision, ApprovalRequest

__all__ = ["ApprovalDesk"]


class ApprovalDesk:
    """Where tool calls wait for people."""

    def __init__(self, journal: Journal | None) -> None:
        self._journal = journal

    async def hold(self, job: Job, request: ApprovalRequest) -> ApprovalDecision:
        """Wait for the decision on ``request`` (at once, if one was recorded).

        A decision answers only the call it was made on: a request under the same id for
        another subtask, tool or arguments is refused (the sandbox derives the id from all of
        them, so only a forged or garbled request can do that).
        """
        known = self._journal.decided(job.id, request.approval_id) if self._journal else None
        if known is not None:
            asked, decision = known
            return decision if _same_call(asked, request) else _not_this_call(request)
        pending = job.approvals.get(request.approval_id)
        if pending is not None and not _same_call(pending[0], request):
            return _not_this_call(request)
        if pending is None:
            future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
            pending = job.approvals[request.approval_id] = (request, future)
            set_status(job, "awaiting_approval")
            data = request.model_dump(mode="json", exclude={"kind"})
            await emit(job, "approval_requested", request.task_id, data)
        return await asyncio.shield(pending[1])

    def pending(self, job: Job) -> list[ApprovalRequest]:
        """The job's calls still waiting."""
        return [request for request, future in job.approvals.values() if not future.done()]

    async def decide(self, job: Job, approval_id: str, approved: bool, reason: str) -> bool:
        """Answer a waiting call; False if nothing waits under ``approval_id``."""
        pending = job.approvals.get(approval_id)
        if pending is None or pending[1].done():
            return False
        request, future = pending
        decision = ApprovalDecision(
            approval_id=approval_id, approved=approved, reason=reason, decided_at=time.time()
        )
        if self._journal is not None:
            self._journal.decide(job.id, request, decision)
        future.set_result(decision)
        if not self.pending(job) and job.status == "awaiting_approval":
            set_status(job, "running")
        data = {"approval_id": approval_id, "approved": approved, "reason": reason,
                "tool": request.tool}  # fmt: skip
        await emit(job, "approval_decided", request.task_id, data)
        return True


def _same_call(asked: ApprovalRequest, request: ApprovalRequest) -> bool:
    def call(r: ApprovalRequest) -> str:
        return json.dumps([r.task_id, r.tool, r.arguments], sort_keys=True, default=str)

    return call(asked) == call(request)


def _not_this_call(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(
        approval_id=request.approval_id,
        approved=False,
        reason="the decision under this approval id was made on another call",
        decided_at=time.time(),
    )
