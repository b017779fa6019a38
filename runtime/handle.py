"""A submitted job, as the driver holds it: status, result, events, approvals, cancel, resume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from raytroupe.protocols import (
    ApprovalRequest,
    ConfigError,
    Feedback,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobResult,
    JobStatus,
    JobTimeout,
    RecipientUnavailable,
)
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt, GraphState
from raytroupe.protocols.http import JobView
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations.declare import At
from raytroupe.runtime.operations.surfaces import pulled, pulled_async

__all__ = ["JobHandle"]

_GRACE_S: Final = 10.0
_RESTART_RETRIES: Final = 30

M = TypeVar("M", bound=BaseModel)


class JobHandle:
    """A submitted job. Returned at once by :meth:`Runtime.submit` (and ``asubmit``).

    Each blocking method has an ``a``-prefixed coroutine twin (``aresult``, ``aevents``,
    ``astatus``, ``acancel``, ``aapprove``, ``areject``, ``aoutput``) for code running on
    an event loop. A handle from a :class:`~raytroupe.runtime.tenant.TenantView` reaches the job
    only as its tenant.
    """

    def __init__(
        self,
        job_id: str,
        client: SystemClient,
        portal: Portal,
        *,
        tenant: str | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> None:
        self.job_id = job_id
        self.output_type = output_type
        """The model the job's answer was asked to be (``submit(output_type=...)``)."""
        self._client = client
        self._portal = portal
        self._tenant = tenant

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r})"

    def info(self) -> JobView:
        """Where the job is, and its result once it has one (the operation ``job``)."""
        from raytroupe.runtime.operations import job_reads  # noqa: PLC0415 - a handle's reads

        return self._portal.run(job_reads.job.run_for(self._at(), {"job_id": self.job_id}))

    def _at(self) -> At:
        """Who the handle reads the job as: the driver (every tenant's jobs), or its tenant."""
        mine = self._tenant is None
        return At(self._client, tenant=self._tenant or "default", admin=mine, source="driver",
                  every_tenant=mine)  # fmt: skip

    def status(self) -> JobStatus:
        """Where the job is now."""
        return self._portal.run(self._client.status(self.job_id, tenant=self._tenant))

    async def astatus(self) -> JobStatus:
        """:meth:`status`, awaited."""
        return await self._portal.arun(self._client.status(self.job_id, tenant=self._tenant))

    def result(self, timeout: float | None = 60.0) -> JobResult:
        """Wait for the job's result.

        Raises:
            JobTimeout: the job did not finish within ``timeout`` seconds (it keeps running).
            JobFailed: the job ended without an answer; ``detail['result']`` has the
                ``JobResult`` with every subtask and its error.
            JobCancelled: it was cancelled.
        """
        return self._portal.run(self._finished(timeout))

    async def aresult(self, timeout: float | None = 60.0) -> JobResult:
        """:meth:`result`, awaited."""
        return await self._portal.arun(self._finished(timeout))

    def output(self, timeout: float | None = 60.0) -> Any:
        """The answer as an instance of the job's ``output_type``.

        Raises:
            ConfigError: the job was submitted without an ``output_type``.
            QualityGateFailed: the answer is not a valid instance of it.
            JobTimeout, JobFailed, JobCancelled: as :meth:`result`.
        """
        model = self._output_type()
        return self.result(timeout).output_as(model)

    async def aoutput(self, timeout: float | None = 60.0) -> Any:
        """:meth:`output`, awaited."""
        model = self._output_type()
        return (await self.aresult(timeout)).output_as(model)

    def _output_type(self) -> type[BaseModel]:
        if self.output_type is None:
            raise ConfigError(
                f"job {self.job_id} was submitted without an output_type: read result().answer"
                " or give submit(output_type=...)",
                field="output_type",
            )
        return self.output_type

    async def _finished(self, timeout: float | None) -> JobResult:
        """The job's result, on the portal's loop (see :meth:`result`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        result: JobResult | None = None
        for _ in range(_RESTART_RETRIES):  # an orchestrator that died comes back and resumes
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            waiting = self._client.wait(self.job_id, left, tenant=self._tenant)
            try:
                result = await asyncio.wait_for(waiting, None if left is None else left + _GRACE_S)
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

    async def aapprovals(self) -> list[ApprovalRequest]:
        """:meth:`approvals`, awaited."""
        return await self._portal.arun(self._client.approvals(self.job_id, tenant=self._tenant))

    async def aapprove(self, approval_id: str, reason: str = "") -> bool:
        """:meth:`approve`, awaited."""
        decided = self._client.decide(
            self.job_id, approval_id, approved=True, reason=reason, tenant=self._tenant
        )
        return await self._portal.arun(decided)

    async def areject(self, approval_id: str, reason: str = "") -> bool:
        """:meth:`reject`, awaited."""
        decided = self._client.decide(
            self.job_id, approval_id, approved=False, reason=reason, tenant=self._tenant
        )
        return await self._portal.arun(decided)

    def checkpoints(self) -> list[GraphCheckpoint]:
        """A graph job's checkpoints, by subgraph then superstep (none: not a graph job)."""
        return self._portal.run(self._client.checkpoints(self.job_id, tenant=self._tenant))

    def resume(
        self,
        value: Any = None,
        *,
        state: GraphState | None = None,
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

    def fork(self, step: int, *, state: GraphState | None = None) -> JobHandle:
        """Start a new job of the same task and team from checkpoint ``step``; its handle.

        ``state`` edits the checkpoint's state first (a "what if").

        Raises:
            InvalidInput: the job is not a graph's, has no checkpoint ``step``, or the edit
                would leave the state invalid.
        """
        # a driver's own handle forks as the admin it is; a tenant view's, as its tenant
        forked = self._client.fork(
            self.job_id, step, state=state, tenant=self._tenant, admin=self._tenant is None
        )
        job_id = self._portal.run(forked)
        return JobHandle(job_id, self._client, self._portal, tenant=self._tenant)

    def cancel(self) -> bool:
        """Cancel the job: running subtasks stop at their agents; False if it had finished."""
        return self._portal.run(self._client.cancel(self.job_id, tenant=self._tenant))

    async def acancel(self) -> bool:
        """:meth:`cancel`, awaited."""
        return await self._portal.arun(self._client.cancel(self.job_id, tenant=self._tenant))

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
        """Yield the job's events in order, as they happen, until its last one (``events``).

        Raises:
            JobTimeout: ``timeout`` seconds passed before the job's last event.
        """
        from raytroupe.runtime.operations import job_reads  # noqa: PLC0415 - a handle's reads

        every = job_reads.events.bind(self.job_id)
        return pulled(self._portal.run, job_reads.events, self._at(), every, timeout)

    def aevents(self, timeout: float | None = None) -> AsyncIterator[JobEvent]:
        """:meth:`events` for ``async for``."""
        from raytroupe.runtime.operations import job_reads  # noqa: PLC0415 - a handle's reads

        every = job_reads.events.bind(self.job_id)
        return pulled_async(self._portal.arun, job_reads.events, self._at(), every, timeout)
