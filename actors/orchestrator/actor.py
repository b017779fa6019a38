"""The orchestrator: job lifecycle, planning, parallel dispatch, aggregation, job events.

A job runs as one asyncio task: provision the team, ask the planner for a plan, dispatch every
ready subtask through the router (in parallel up to ``TeamSpec.max_parallel`` per job and
``max_running`` overall), then ask the planner model to aggregate. Subtasks whose agent died
(a retryable delivery error) are dispatched again with ``attempt + 1``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Protocol

import structlog

from actors._endpoint import RouterClient, serve_envelope
from actors.orchestrator.jobs import Job, failed, from_task_result, skipped, wait_until
from actors.orchestrator.planning import aggregate_request, parse_plan, plan_request
from protocols import (
    AgentMessage,
    Budget,
    ErrorCode,
    ErrorPayload,
    Event,
    InvalidInput,
    JobEvent,
    JobNotFound,
    JobResult,
    JobStatus,
    LLMRequest,
    LLMResponse,
    ModelError,
    Payload,
    Plan,
    PlannedSubtask,
    SubtaskResult,
    TaskRequest,
    TaskResult,
    TeamSpec,
    Timings,
    TroupeError,
    new_id,
    team_role,
)

__all__ = ["Orchestrator", "TeamProvisioner"]

log = structlog.get_logger("raytroupe.orchestrator")

ME = "orchestrator"


class TeamProvisioner(Protocol):
    """Makes a team's agents and models ready (spawned, configured, registered)."""

    async def provision(self, team: TeamSpec) -> None:
        """Ensure every agent of ``team`` is running and reachable, and its models served."""
        ...


class Orchestrator:
    """Runs jobs. A plain class; Ray makes it the ``orchestrator`` actor.

    Args:
        router: how it reaches agents and the LLM pool.
        provisioner: makes a job's team ready before planning.
        max_running: subtasks running at once over all jobs.
        max_attempts: deliveries of one subtask when its agent dies or is unreachable.
        keep_jobs: finished jobs remembered for status, result and events queries.
    """

    def __init__(
        self,
        router: RouterClient,
        provisioner: TeamProvisioner,
        *,
        max_running: int = 256,
        max_attempts: int = 3,
        keep_jobs: int = 10_000,
    ) -> None:
        self._router = router
        self._provisioner = provisioner
        self._running = asyncio.Semaphore(max_running)
        self._max_attempts = max_attempts
        self._keep_jobs = keep_jobs
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- driver API -----------------------------------------------------------------------

    async def submit(
        self, task: str, team: TeamSpec, *, tenant: str = "default", budget: Budget | None = None
    ) -> str:
        """Start a job and return its id at once.

        ``budget`` (default: the team's) bounds every model call made for the job; once a
        call is refused for it, no further subtask starts and the job fails with
        ``budget_exceeded``.
        """
        job = Job(
            id=f"job-{new_id()[:16]}",
            task=task,
            team=team,
            tenant=tenant,
            submitted_at=time.time(),
            budget=budget or team.budget,
        )
        self._jobs[job.id] = job
        self._forget_old_jobs()
        await self._emit(job, "job_submitted", data={"team": team.name, "task": task[:200]})
        runner = asyncio.create_task(self._run(job))
        self._tasks.add(runner)
        runner.add_done_callback(self._tasks.discard)
        log.info("job_submitted", job_id=job.id, team=team.name, tenant=tenant)
        return job.id

    async def status(self, job_id: str) -> JobStatus:
        """Where the job is.

        Raises:
            JobNotFound: no such job.
        """
        return self._job(job_id).status

    async def wait(self, job_id: str, timeout: float | None = None) -> JobResult | None:
        """The job's result once it has one, or None if ``timeout`` seconds pass first.

        ``timeout=None`` waits as long as it takes; ``timeout <= 0`` does not wait.

        Raises:
            JobNotFound: no such job.
        """
        job = self._job(job_id)
        await wait_until(job, lambda: job.result is not None, timeout)
        return job.result

    async def events(
        self, job_id: str, after: int = 0, timeout: float | None = 0.0
    ) -> list[JobEvent]:
        """Events with ``seq > after``, waiting up to ``timeout`` seconds for the first one.

        ``timeout=None`` waits as long as it takes; ``timeout <= 0`` does not wait.

        Raises:
            JobNotFound: no such job.
        """
        job = self._job(job_id)
        await wait_until(job, lambda: len(job.events) > after, timeout)
        return job.events[after:]

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point: progress events about a job (e.g. streamed model tokens)."""
        return await serve_envelope(data, self._handle, me=ME)

    async def _handle(self, message: AgentMessage) -> AgentMessage:
        if not isinstance(message.payload, Event) or message.job_id is None:
            raise InvalidInput(
                f"orchestrator takes job events, not {message.kind!r}", kind=message.kind
            )
        job = self._job(message.job_id)
        if message.payload.name != "llm_delta":
            raise InvalidInput(f"unknown job event {message.payload.name!r}")
        await self._emit(job, "llm_delta", data=message.payload.data)
        return message.reply(Event(name="ack"), sender=ME)

    async def jobs(self) -> dict[str, JobStatus]:
        """Known jobs and their status, oldest first."""
        return {job_id: job.status for job_id, job in self._jobs.items()}

    # -- the job ----------------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        provision_s = plan_s = dispatch_s = aggregate_s = 0.0
        subtasks: list[SubtaskResult] = []
        answer, error = "", None
        try:
            mark = time.perf_counter()
            job.status = "planning"
            await self._provisioner.provision(job.team)
            provision_s = time.perf_counter() - mark
            mark = time.perf_counter()
            plan = await self._plan(job)
            plan_s = time.perf_counter() - mark
            await self._emit(
                job,
                "plan_ready",
                data={"subtasks": [s.model_dump(mode="json") for s in plan.subtasks]},
            )

            mark = time.perf_counter()
            job.status = "running"
            subtasks = await self._dispatch(job, plan)
            dispatch_s = time.perf_counter() - mark
            failed = [s for s in subtasks if s.status != "succeeded"]
            if job.stopped is not None:
                error = job.stopped.model_copy(
                    update={
                        "message": f"{job.stopped.message}; {len(failed)} of {len(subtasks)} "
                        "subtasks did not finish"
                    }
                )
            elif failed:
                error = ErrorPayload(
                    code=ErrorCode.JOB_FAILED,
                    message=f"{len(failed)} of {len(subtasks)} subtasks did not succeed: "
                    + ", ".join(
                        f"{s.id} ({s.error.code if s.error else s.status})" for s in failed
                    ),
                )
            else:
                mark = time.perf_counter()
                job.status = "aggregating"
                await self._emit(job, "job_aggregating")
                answer = await self._aggregate(job, subtasks)
                aggregate_s = time.perf_counter() - mark
        except TroupeError as exc:
            error = ErrorPayload.from_exception(exc)
        except Exception as exc:  # a job must end with a result, whatever broke
            log.exception("job_crashed", job_id=job.id)
            error = ErrorPayload.from_exception(exc)
        usage = sum((s.usage for s in subtasks), job.usage)
        result = JobResult(
            job_id=job.id,
            task=job.task,
            team=job.team.name,
            status="failed" if error else "succeeded",
            answer=answer,
            subtasks=tuple(subtasks),
            usage=usage,
            error=error,
            timings=Timings(
                submitted_at=job.submitted_at,
                finished_at=time.time(),
                provision_s=provision_s,
                plan_s=plan_s,
                dispatch_s=dispatch_s,
                aggregate_s=aggregate_s,
            ),
        )
        job.status = result.status
        log.info(
            "job_finished",
            job_id=job.id,
            status=result.status,
            total_s=round(result.timings.total_s, 3),
        )
        try:  # the job's working memory goes with it (fire and forget: memory is an aid)
            await self._router.send(self._message(job, "memory", Event(name="job_ended")))
        except TroupeError as exc:
            log.warning("job_end_not_sent", job_id=job.id, code=exc.code.value)
        kind = "job_succeeded" if result.status == "succeeded" else "job_failed"
        await self._emit(job, kind, data={"error": error.message if error else None}, result=result)

    async def _plan(self, job: Job) -> Plan:
        response = await self._ask(job, plan_request(job.task, job.team))
        return parse_plan(response.text, job.team)

    async def _aggregate(self, job: Job, results: list[SubtaskResult]) -> str:
        response = await self._ask(job, aggregate_request(job.task, results, job.team))
        return response.text

    async def _ask(self, job: Job, request: LLMRequest) -> LLMResponse:
        request = request.model_copy(update={"budget": job.budget})
        reply = await self._router.request(self._message(job, "llm", request))
        match reply.payload:
            case LLMResponse() as response:
                job.usage += response.usage
                return response
            case ErrorPayload() as error:
                raise error.to_exception()
            case other:
                raise ModelError(f"llm pool answered with {other.kind!r}")

    async def _dispatch(self, job: Job, plan: Plan) -> list[SubtaskResult]:
        """Run every subtask once its dependencies succeeded; skip those whose didn't."""
        results: dict[str, SubtaskResult] = {}
        waiting = {s.id: s for s in plan.subtasks}
        running: dict[asyncio.Task[SubtaskResult], str] = {}
        job_slots = asyncio.Semaphore(job.team.max_parallel)
        try:
            await self._dispatch_ready(job, waiting, running, results, job_slots)
        finally:
            for orphan in running:  # only when the job itself is failing or cancelled
                orphan.cancel()
        return [results[s.id] for s in plan.subtasks]

    async def _dispatch_ready(
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
                        await self._emit(job, "subtask_finished", sid, {"status": "skipped"})
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
                if result.error is not None and result.error.code is ErrorCode.BUDGET_EXCEEDED:
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
                await self._emit(job, "subtask_finished", sub.id, {"status": "skipped"})
                return skipped(sub, job.stopped)
            for attempt in range(1, self._max_attempts + 1):
                await self._emit(
                    job, "subtask_started", sub.id, {"role": sub.role, "attempt": attempt}
                )
                role = team_role(job.team.name, sub.role)
                message = self._message(job, f"role:{role}", request, attempt=attempt)
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
        await self._emit(
            job,
            "subtask_finished",
            sub.id,
            {"status": result.status, "agent": result.agent, "attempt": attempt},
        )
        return result

    # -- helpers --------------------------------------------------------------------------------

    def _message(
        self,
        job: Job,
        recipient: str,
        payload: LLMRequest | TaskRequest | Event,
        *,
        attempt: int = 1,
    ) -> AgentMessage:
        return AgentMessage(
            sender=ME,
            recipient=recipient,
            job_id=job.id,
            attempt=attempt,
            trace=job.trace.child(),
            tenant=job.tenant,
            payload=payload,
        )

    async def _emit(
        self,
        job: Job,
        kind: str,
        subtask_id: str | None = None,
        data: dict[str, object] | None = None,
        *,
        result: JobResult | None = None,
    ) -> None:
        async with job.changed:
            job.events.append(
                JobEvent.model_validate(
                    {
                        "job_id": job.id,
                        "seq": len(job.events) + 1,
                        "at": time.time(),
                        "type": kind,
                        "subtask_id": subtask_id,
                        "data": data or {},
                    }
                )
            )
            if result is not None:
                job.result = result
            job.changed.notify_all()

    def _job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        return job

    def _forget_old_jobs(self) -> None:
        finished = [j for j, job in self._jobs.items() if job.result is not None]
        for job_id in finished[: max(0, len(self._jobs) - self._keep_jobs)]:
            del self._jobs[job_id]
