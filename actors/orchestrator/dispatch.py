"""Dispatch of a job's subtasks.

Dependency-aware and parallel within limits; a subtask whose agent died is dispatched again
(``attempt + 1``); each result is recorded the moment it exists.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from actors._endpoint import RouterClient
from actors.orchestrator.jobs import (
    Job,
    emit,
    failed,
    from_task_result,
    job_message,
    skipped,
)
from protocols import (
    ErrorCode,
    ErrorPayload,
    Payload,
    Plan,
    PlannedSubtask,
    SubtaskResult,
    TaskRequest,
    TaskResult,
    TroupeError,
    team_role,
)

__all__ = ["Dispatcher"]

log = structlog.get_logger("raytroupe.orchestrator")


class Dispatcher:
    """Runs the subtasks of plans.

    Args:
        max_running: subtasks running at once over all jobs.
        max_attempts: deliveries of one subtask when its agent dies or is unreachable.
        record: called with each finished subtask (the journal), before its slot frees.
    """

    def __init__(
        self,
        router: RouterClient,
        *,
        max_running: int,
        max_attempts: int,
        record: Callable[[Job, SubtaskResult], None],
    ) -> None:
        self._router = router
        self._running = asyncio.Semaphore(max_running)
        self._max_attempts = max_attempts
        self._record = record

    async def run(self, job: Job, plan: Plan) -> list[SubtaskResult]:
        """Run every subtask once its dependencies succeeded; skip those whose didn't."""
        results: dict[str, SubtaskResult] = {}
        results.update({sid: r for sid, r in job.done.items() if r.status == "succeeded"})
        waiting = {s.id: s for s in plan.subtasks if s.id not in results}
        running: dict[asyncio.Task[SubtaskResult], str] = {}
        job_slots = asyncio.Semaphore(job.team.max_parallel)
        try:
            await self._ready(job, waiting, running, results, job_slots)
        finally:
            for orphan in running:  # only when the job itself is failing or cancelled
                orphan.cancel()
        return [results[s.id] for s in plan.subtasks]

    async def _ready(
        self,
        job: Job,
        waiting: dict[str, PlannedSubtask],
        running: dict[asyncio.Task[SubtaskResult], str],
        results: dict[str, SubtaskResult],
        job_slots: asyncio.Semaphore,
    ) -> None:
        while waiting or running:
            progressed = True
            while progressed:
                progressed = False
                for sid, sub in list(waiting.items()):
                    deps = [results.get(d) for d in sub.depends_on]
                    if job.stopped or any(d is not None and d.status != "succeeded" for d in deps):
                        del waiting[sid]
                        results[sid] = skipped(sub, job.stopped)
                        self._record(job, results[sid])
                        await emit(job, "subtask_finished", sid, {"status": "skipped"})
                        progressed = True
                    elif all(d is not None for d in deps):
                        del waiting[sid]
                        inputs = {d: results[d].output for d in sub.depends_on}
                        coro = self._run_subtask(job, sub, inputs, job_slots)
                        running[asyncio.create_task(coro)] = sid
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                result = results[running.pop(finished)] = finished.result()
                # the job's budget (refused by the pool) stops the job; an agent's own
                # per-subtask limit (stop_reason 'budget') only fails that subtask
                budget = result.error is not None and result.error.code is ErrorCode.BUDGET_EXCEEDED
                if budget and result.stop_reason != "budget":
                    job.stopped = job.stopped or result.error

    async def _run_subtask(
        self, job: Job, sub: PlannedSubtask, inputs: dict[str, str], job_slots: asyncio.Semaphore
    ) -> SubtaskResult:
        request = TaskRequest(
            task_id=sub.id,
            instructions=sub.instructions,
            job_task=job.task,
            inputs=inputs,
            budget=job.budget,
        )
        async with job_slots, self._running:
            if job.stopped is not None:  # the budget ran out while this one waited for a slot
                await emit(job, "subtask_finished", sub.id, {"status": "skipped"})
                return skipped(sub, job.stopped)
            for attempt in range(1, self._max_attempts + 1):
                await emit(job, "subtask_started", sub.id, {"role": sub.role, "attempt": attempt})
                role = team_role(job.team.name, sub.role)
                message = job_message(job, f"role:{role}", request, attempt=attempt)
                try:
                    answer: Payload = (await self._router.request(message)).payload
                except TroupeError as exc:  # the router itself is unreachable or restarting
                    answer = ErrorPayload.from_exception(exc)
                match answer:
                    case TaskResult() as done:
                        result = from_task_result(sub, done, attempt)
                    case ErrorPayload() as error if (
                        error.retryable and attempt < self._max_attempts
                    ):
                        log.warning(
                            "subtask_retry",
                            job_id=job.id,
                            task_id=sub.id,
                            attempt=attempt,
                            code=error.code.value,
                        )
                        continue
                    case ErrorPayload() as error:
                        result = failed(sub, error, attempt)
                    case other:
                        result = failed(
                            sub,
                            ErrorPayload(
                                code=ErrorCode.INTERNAL,
                                message=f"agent answered with {other.kind!r}",
                            ),
                            attempt,
                        )
                break
            self._record(job, result)  # before the slot frees: the next may start
        await emit(
            job,
            "subtask_finished",
            sub.id,
            {"status": result.status, "agent": result.agent, "attempt": attempt},
        )
        return result
