"""The model calls one pool replica runs per job, and the jobs cancelled there."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

import structlog

from raytroupe.protocols import AgentMessage, JobCancelled

__all__ = ["CANCELLED_KEPT", "JobCalls"]

log = structlog.get_logger("raytroupe.llm")

CANCELLED_KEPT = 10_000
"""Cancelled jobs a replica remembers (their late calls are refused)."""


class JobCalls:
    """Which calls of each job run here, so that a cancel stops them and refuses late ones."""

    def __init__(self) -> None:
        self._by_job: dict[str, set[asyncio.Task[object]]] = {}
        self._cancelled: deque[str] = deque(maxlen=CANCELLED_KEPT)
        """Jobs cancelled here: a call of theirs that arrives late is refused, not served."""

    def cancel(self, job_id: str) -> int:
        """Stop the job's calls here and refuse its later ones; how many were running."""
        if job_id not in self._cancelled:
            self._cancelled.append(job_id)
        running = self._by_job.pop(job_id, set())
        for call in running:
            call.cancel()
        return len(running)

    async def run(
        self, message: AgentMessage, serve: Callable[[], Awaitable[AgentMessage]]
    ) -> AgentMessage:
        """Await ``serve()``, known as one of the message's job's calls.

        Raises:
            JobCancelled: the job was cancelled, before the call or during it.
        """
        task = asyncio.current_task()
        if message.job_id is None or task is None:
            return await serve()
        if message.job_id in self._cancelled:
            log.info("call_of_cancelled_job", job_id=message.job_id, agent=message.sender)
            raise JobCancelled("the job was cancelled", job_id=message.job_id)
        running = self._by_job.setdefault(message.job_id, set())
        running.add(task)
        try:
            return await serve()
        except asyncio.CancelledError:
            if task.cancelling() and running is not self._by_job.get(message.job_id):
                task.uncancel()  # cancelled by cancel(): answer, the caller may still listen
                raise JobCancelled("the job was cancelled", job_id=message.job_id) from None
            raise
        finally:
            running.discard(task)
            if not running and self._by_job.get(message.job_id) is running:
                del self._by_job[message.job_id]
