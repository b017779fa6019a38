"""Streamed model answers: deltas sent on to the job's orchestrator as events."""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from raytroupe.actors.endpoint import RouterClient
from raytroupe.protocols import AgentMessage, LLMDelta, LLMDeltas, orchestrator_address

__all__ = ["DeltaForwarder"]

log = structlog.get_logger("raytroupe.llm")


class DeltaForwarder:
    """Sends a call's deltas to the orchestrator as ``llm_delta`` events, batched, in order.

    The provider never waits for the router: deltas queue up, and one task sends whatever
    has queued as one event at a time, so events arrive in the order the deltas did.
    """

    def __init__(self, router: RouterClient, cause: AgentMessage) -> None:
        self._router = router
        self._cause = cause
        self._queue: asyncio.Queue[LLMDelta] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, delta: LLMDelta) -> None:
        """Queue ``delta``; the sending task starts with the first one."""
        self._queue.put_nowait(delta)
        if self._task is None:
            self._task = asyncio.create_task(self._drain())

    async def flush(self) -> None:
        """Wait until every queued delta was sent, then stop."""
        if self._task is None:
            return
        await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _drain(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            event = LLMDeltas(agent=self._cause.sender, deltas=tuple(batch))
            try:
                await self._router.request(
                    self._cause.derive(
                        sender="llm",
                        recipient=orchestrator_address(self._cause.job_id),  # the job's shard
                        payload=event,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - a lost progress event must not fail the call
                log.warning("delta_forward_failed", job_id=self._cause.job_id, error=repr(exc))
            finally:
                for _ in batch:
                    self._queue.task_done()
