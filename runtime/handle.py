"""A submitted job, as the driver holds it: status, result, events, approvals, cancel, resume."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Final

from raytroupe.protocols import (
    ApprovalRequest,
    Feedback,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobResult,
    JobStatus,
    JobTimeout,
    RecipientUnavailable,
)
from raytroupe.protocols.graph import GraphCheckpoint, GraphInterrupt
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.client import SystemClient

__all__ = ["JobHandle"]

_EVENT_POLL_S: Final = 5.0
_GRACE_S: Final = 10.0
_RESTART_RETRIES: Final = 30


class JobHandle:
    """A submitted job. Returned at once by :meth:`Runtime.submit`.

    A handle from a :class:`~runtime.tenant.TenantView` reaches the job only as its tenant.
    """

    def __init__(
        self, job_id: str, client: SystemClient, portal: Portal, *, tenant: str | None = None
    ) -> None:
        self.job_id = job_id
        self._client = client
        self._portal = portal
        self._tenant = tenant

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r})"

    def status(self) -> JobStatus:
        """Where the job is now."""
        return self._portal.run(self._client.status(self.job_id, tenant=self._tenant))

    def result(self, timeout: float | None = 60.0) -> JobResult:
        """Wait for the job's result.

        Raises:
            JobTimeout: the job did not finish within ``timeout`` seconds (it keeps running).
            JobFailed: the job ended without an answer; ``detail['result']`` has the
                ``JobResult`` with every subtask and its error.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        result: JobResult | None = None
        for _ in range(_RESTART_RETRIES):  # an orchestrator that died comes back and resumes
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            waiting = self._client.wait(self.job_id, left, tenant=self._tenant)
            try:
                result = self._portal.run(waiting, None if left is None else left + _GRACE_S)
            except TimeoutError:
                result = None
            except RecipientUnavailable:
                continue
            break
        if result is None:
            raise JobTimeout(
                f"job {self.job_id} did not finish within {timeout} s", job_id=self.job_id
            )
        if result.status == "cancelled":
            raise JobCancelled(
                f"job {self.job_id} was cancelled", job_id=self.job_id, result=result
            )
        if result.status != "succeeded":
            message = result.error.message if result.error else "job failed"
            raise JobFailed(
                f"job {self.job_id} failed: {message}", job_id=self.job_id, result=result
            )
        return result

    def approvals(self) -> list[ApprovalRequest]:
        """Tool calls of the job waiting for a human (tool, exact arguments, approval id)."""
        return self._portal.run(self._client.approvals(self.job_id, tenant=self._tenant))

    def approve(self, approval_id: str, reason: str = "") -> bool:
        """Let the held call run; False if nothing waits under ``approval_id``."""
        decided = self._client.decide(
            self.job_id, approval_id, approved=True, reason=reason, tenant=self._tenant
        )
        return self._portal.run(decided)

    def reject(self, approval_id: str, reason: str = "") -> bool:
        """Refuse the held call (the agent sees the refusal); False if nothing waits."""
        decided = self._client.decide(
            self.job_id, approval_id, approved=False, reason=reason, tenant=self._tenant
        )
        return self._portal.run(decided)

    def checkpoints(self) -> list[GraphCheckpoint]:
        """A graph job's checkpoints, by subgraph then superstep (none: not a graph job)."""
        return self._portal.run(self._client.checkpoints(self.job_id, tenant=self._tenant))

    def resume(
        self,
        value: Any = None,
        *,
        state: dict[str, Any] | None = None,
        interrupt: str | None = None,
    ) -> GraphInterrupt:
        """Let the graph waiting for input go on: ``value`` for the node, a ``state`` edit.

        ``interrupt`` names the interrupt answered (needed only when several wait).

        Raises:
            Conflict: the job waits for no input (or not at ``interrupt``), or several
                interrupts wait and none is named.
            InvalidInput: the value or edit would leave the state invalid
                (``detail['problems']``).
        """
        resumed = self._client.resume(
            self.job_id, value=value, state=state, interrupt=interrupt, tenant=self._tenant
        )
        return self._portal.run(resumed)

    def fork(self, step: int, *, state: dict[str, Any] | None = None) -> JobHandle:
        """Start a new job of the same task and team from checkpoint ``step``; its handle.

        ``state`` edits the checkpoint's state first (a "what if").

        Raises:
            InvalidInput: the job is not a graph's, has no checkpoint ``step``, or the edit
                would leave the state invalid.
        """
        forked = self._client.fork(self.job_id, step, state=state, tenant=self._tenant)
        job_id = self._portal.run(forked)
        return JobHandle(job_id, self._client, self._portal, tenant=self._tenant)

    def cancel(self) -> bool:
        """Cancel the job: running subtasks stop at their agents; False if it had finished."""
        return self._portal.run(self._client.cancel(self.job_id, tenant=self._tenant))

    def feedback(self, score: float, comment: str = "", *, by: str = "driver") -> Feedback:
        """Give a verdict on the finished job's answer (0 useless .. 1 exactly right).

        Raises:
            Conflict: the job has not finished.
        """
        call = self._client.feedback(self.job_id, score, comment, by=by, tenant=self._tenant)
        return self._portal.run(call)

    def feedbacks(self) -> list[Feedback]:
        """Every verdict given on the job, oldest first."""
        return self._portal.run(self._client.feedbacks(self.job_id, tenant=self._tenant))

    def events(self, timeout: float | None = None) -> Iterator[JobEvent]:
        """Yield the job's events in order, as they happen, until its last one.

        Raises:
            JobTimeout: ``timeout`` seconds passed before the job's last event.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = 0
        while True:
            wait = _EVENT_POLL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise JobTimeout(
                        f"job {self.job_id} still running after {timeout} s", job_id=self.job_id
                    )
            batch = self._portal.run(
                self._client.events(self.job_id, seen, wait, tenant=self._tenant),
                wait + _GRACE_S,
            )
            for event in batch:
                seen = event.seq
                yield event
                if event.terminal:
                    return
