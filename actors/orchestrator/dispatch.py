"""Dispatch of a job's subtasks.

Dependency-aware and parallel within limits; a subtask whose agent died is dispatched again
(``attempt + 1``); each result is recorded the moment it exists.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import assert_never

import structlog

from raytroupe.actors.answer_gate import checked_gate, gate_feedback
from raytroupe.actors.endpoint import RouterClient, expected
from raytroupe.actors.guardrails.check import decision_of
from raytroupe.actors.orchestrator.jobs import (
    Job,
    emit,
    failed,
    from_task_result,
    job_message,
    skipped,
)
from raytroupe.actors.orchestrator.resolve import (
    Ask,
    confidence_weighted,
    first_valid,
    judge,
    majority,
    make_candidate,
    merge,
)
from raytroupe.actors.orchestrator.sizing import subtask_context
from raytroupe.actors.telemetry.genai import subtask_finished, subtask_run
from raytroupe.actors.telemetry.jobs import (
    attempt_span,
    resolution_span,
    subtask_span,
)
from raytroupe.protocols import (
    ErrorCode,
    ErrorPayload,
    GuardrailTripped,
    InvalidInput,
    Plan,
    PlannedSubtask,
    SubtaskResult,
    TaskRequest,
    TaskResult,
    TroupeError,
    Usage,
    new_span_id,
    team_role,
)
from raytroupe.protocols.guardrails import GuardrailDecision
from raytroupe.protocols.resolution import Candidate

__all__ = ["Decided", "Dispatcher"]

Decided = Callable[[Job, GuardrailDecision, str | None], Awaitable[None]]
"""Told of each guardrail decision of a job's subtasks (its event, and the record)."""

log = structlog.get_logger("raytroupe.orchestrator")


class Dispatcher:
    """Runs the subtasks of plans.

    Args:
        max_running: subtasks running at once over all jobs.
        max_attempts: deliveries of one subtask when its agent dies or is unreachable (and one
            more to the agent that had it, when it died or a restart left it running).
        record: called with each finished subtask (the journal), before its slot frees.
        decided: told of what the job's guardrails decided in a subtask's tool calls.
    """

    def __init__(
        self,
        router: RouterClient,
        *,
        max_running: int,
        max_attempts: int,
        record: Callable[[Job, SubtaskResult], None],
        decided: Decided | None = None,
    ) -> None:
        self._router = router
        self._running = asyncio.Semaphore(max_running)
        self._max_attempts = max_attempts
        self._record = record
        self._decided = decided

    async def run(self, job: Job, plan: Plan, ask: Ask) -> list[SubtaskResult]:
        """Run every subtask once its dependencies succeeded; skip those whose didn't.

        ``ask`` reaches the job's model (judge and merge strategies use it).
        """
        results: dict[str, SubtaskResult] = {}
        results.update({sid: r for sid, r in job.done.items() if r.status == "succeeded"})
        waiting = {s.id: s for s in plan.subtasks if s.id not in results}
        running: dict[asyncio.Task[SubtaskResult], str] = {}
        job_slots = asyncio.Semaphore(job.team.max_parallel)
        try:
            await self._start_ready(job, waiting, running, results, job_slots, ask)
        finally:
            for orphan in running:  # only when the job itself is failing or cancelled
                orphan.cancel()
        return [results[s.id] for s in plan.subtasks]

    async def _start_ready(  # noqa: PLR0917 - one job's dispatch state, passed down once
        self,
        job: Job,
        waiting: dict[str, PlannedSubtask],
        running: dict[asyncio.Task[SubtaskResult], str],
        results: dict[str, SubtaskResult],
        job_slots: asyncio.Semaphore,
        ask: Ask,
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
                        now = time.time()
                        subtask_span(job, new_span_id(), results[sid], now, now)
                        await emit(job, "subtask_finished", sid, {"status": "skipped"})
                        progressed = True
                    elif all(d is not None for d in deps):
                        del waiting[sid]
                        inputs = {d: results[d].output for d in sub.depends_on}
                        coro = self.run_one(job, sub, inputs, job_slots, ask)
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
                if result.error is not None and result.error.code is ErrorCode.GUARDRAIL:
                    job.stopped = job.stopped or result.error  # a tripwire ends the job

    async def run_one(
        self,
        job: Job,
        sub: PlannedSubtask,
        inputs: dict[str, str],
        job_slots: asyncio.Semaphore,
        ask: Ask,
    ) -> SubtaskResult:
        """Run one subtask (of a plan, or a graph's node) within ``job_slots``; recorded."""
        request = TaskRequest(
            task_id=sub.id,
            instructions=sub.instructions,
            job=subtask_context(job.context, sub),
            images=job.images,
            inputs=inputs,
            budget=job.budget,
        )
        async with job_slots, self._running:
            span, started = new_span_id(), time.time()
            if job.stopped is not None:  # the budget ran out while this one waited for a slot
                await emit(job, "subtask_finished", sub.id, {"status": "skipped"})
                result = skipped(sub, job.stopped)
                subtask_span(job, span, result, started, started)
                return result
            with subtask_run(job.id, sub) as live:  # the agents' spans: its children
                if sub.redundancy > 1:
                    result = await self._redundant(job, sub, request, ask, span)
                else:
                    result = await self._gated(job, sub, request, span)
                subtask_finished(live, result)
            self._record(job, result)  # before the slot frees: the next may start
            subtask_span(job, span, result, started, time.time())
        await self._guardrails_decided(job, sub.id, result)
        await emit(
            job,
            "subtask_finished",
            sub.id,
            {"status": result.status, "agent": result.agent, "attempt": result.attempt},
        )
        return result

    async def _guardrails_decided(self, job: Job, sid: str, result: SubtaskResult) -> None:
        """Tell of what the job's guardrails did in the subtask's tool calls (and a trip)."""
        if self._decided is None:
            return
        for decision in result.guardrails:
            await self._decided(job, decision, sid)
        error = result.error
        if error is not None and error.code is ErrorCode.GUARDRAIL:
            tripped = error.to_exception()
            if isinstance(tripped, GuardrailTripped):
                await self._decided(job, decision_of(tripped), sid)

    async def _gated(
        self,
        job: Job,
        sub: PlannedSubtask,
        request: TaskRequest,
        span: str,
        to: str | None = None,
    ) -> SubtaskResult:
        """Deliver; an output failing the subtask's schema goes back with its problems."""
        for retries in range(job.team.gate_retries + 1):
            result = await self._deliver(job, sub, request, span, to)
            result = result.model_copy(update={"gate_retries": retries})
            if result.status != "succeeded" or (sub.output_schema is None and not sub.required):
                return result
            problems = await checked_gate(
                result.output, sub.output_schema, sub.required, tenant=job.tenant
            )
            if not problems:
                return result
            log.info("gate_rejected", job_id=job.id, task_id=sub.id, problems=problems[:3])
            feedback = gate_feedback(problems, schema=sub.output_schema)
            inputs = {**request.inputs, "your rejected answer": result.output,
                      "why it was rejected": feedback}  # fmt: skip
            request = request.model_copy(update={"inputs": inputs})
        error = ErrorPayload(
            code=ErrorCode.QUALITY_GATE,
            message=f"output failed its checks: {'; '.join(problems[:5])}",
            detail={"problems": problems},
        )
        return result.model_copy(update={"status": "failed", "error": error})

    async def _redundant(
        self, job: Job, sub: PlannedSubtask, request: TaskRequest, ask: Ask, span: str
    ) -> SubtaskResult:
        """Ask ``redundancy`` agents at once; resolve their answers by the subtask's strategy.

        The candidates go to the role's agents by name, in turn, so that they come from as
        many different agents as the role has: the router's balancing by load (per shard,
        with several) does not promise that. An answer failed by its tools' host
        (``tool_infrastructure``) fails the subtask as it is, whatever the others said: the
        operator must hear of it.
        """
        holders: list[str | None] = [
            *sorted(a.name for a in job.team.agents if a.role == sub.role)
        ] or [None]
        asked = [request.model_copy(update={"candidate": n}) for n in range(sub.redundancy)]
        results = await asyncio.gather(
            *(
                self._gated(job, sub, candidate, span, holders[n % len(holders)])
                for n, candidate in enumerate(asked)
            )
        )
        for result in results:  # the tools' host failed: no vote over the others may hide it
            if result.error is not None and result.error.code is ErrorCode.TOOL_INFRASTRUCTURE:
                return result.model_copy(update={"usage": sum((r.usage for r in results), Usage())})
        resolving = time.time()
        candidates = [await _candidate(r, sub, job.tenant) for r in results]
        model = job.team.planner_model
        match sub.strategy:
            case "majority":
                resolution = majority(candidates)
            case "confidence":
                resolution = confidence_weighted(candidates)
            case "first_valid":
                resolution = first_valid(candidates)
            case "judge":
                resolution = await judge(candidates, job.prompt, ask, model, budget=job.budget)
            case "merge":
                resolution = await merge(candidates, job.prompt, ask, model,
                                         schema=sub.output_schema, required=sub.required,
                                         budget=job.budget, tenant=job.tenant)  # fmt: skip
        log.info("resolved", job_id=job.id, task_id=sub.id, strategy=resolution.strategy,
                 chosen=resolution.chosen_agent)  # fmt: skip
        resolution_span(job, span, sub, resolution, start=resolving, end=time.time())
        usage = sum((r.usage for r in results), resolution.usage)
        if not resolution.resolved:
            error = ErrorPayload(code=ErrorCode.QUALITY_GATE, message=resolution.rationale)
            return failed(sub, error, 1).model_copy(
                update={"resolution": resolution, "usage": usage}
            )
        chosen = next(
            (r for r in results if r.agent == resolution.chosen_agent and r.status == "succeeded"),
            next(r for r in results if r.status == "succeeded"),
        )
        return chosen.model_copy(
            update={"output": resolution.chosen, "resolution": resolution, "usage": usage}
        )

    async def _deliver(
        self,
        job: Job,
        sub: PlannedSubtask,
        request: TaskRequest,
        span: str,
        to: str | None = None,
    ) -> SubtaskResult:
        """One answer from an agent of the role (or agent ``to``), sent again while it is gone.

        Each attempt is a span under ``span`` (the subtask's), with the agent's spans below it.
        A subtask an agent of its role took before (this shard restarted since) goes back to
        that agent first, and so does one whose agent died (Ray restarts it) or whose answer
        the router lost as it died (the agent said it took it: ``SubtaskTaken``): there, it joins
        the run under way or resumes it at the turn it reached, its model calls answered from
        the pool's record; another agent of the role would start it over. While Ray is
        restarting that agent, the subtask waits for it (:data:`RESTART_WAIT_S` at most). If
        that fails too, the role. The tries at the agent that had it are not among
        ``max_attempts``: a subtask may still go to the role as often as before.
        """
        again = None if to is not None else _holder(job, sub, job.taken.get(sub.id))
        extra = 0 if again is None else 1  # a try at the agent that had it: one more
        waiting = _RestartWait()
        for attempt in itertools.count(1):
            await emit(job, "subtask_started", sub.id, {"role": sub.role, "attempt": attempt})
            recipient = to or again or f"role:{team_role(job.team.name, sub.role)}"
            timeout = sub.timeout_s or job.team.subtask_timeout_s
            deadline = None if timeout is None else time.time() + timeout
            message = job_message(job, recipient, request, attempt=attempt, deadline=deadline)
            started = time.time()
            answer: TaskResult | ErrorPayload
            try:
                reply = await self._router.request(message)
                answer = expected(reply, TaskResult, unexpected=InvalidInput)
            except TroupeError as exc:  # the router is unreachable, or the agent talks nonsense
                answer = ErrorPayload.from_exception(exc)
            answered = answer if isinstance(answer, TaskResult) else None
            attempt_span(
                job,
                span,
                attempt=attempt,
                routed_to=recipient,
                start=started,
                end=time.time(),
                agent=answered.agent if answered else None,
                error=answered.error if answered else _error(answer),
                agent_spans=answered.spans if answered else (),
            )
            match answer:
                case TaskResult() as done:
                    return from_task_result(sub, done, attempt)
                case ErrorPayload() as error if (
                    error.retryable and attempt < self._max_attempts + extra
                ):
                    log.warning("subtask_retry", job_id=job.id, task_id=sub.id,
                                attempt=attempt, code=error.code.value)  # fmt: skip
                    if again is not None and await waiting.for_restart(error):
                        extra += 1  # Ray is restarting it: that agent again, in a moment
                    elif again is not None:  # it was tried: the role now
                        again = None
                    elif to is None and not extra:
                        again = _died_with_it(job, sub, error)
                        extra = 0 if again is None else 1
                case ErrorPayload() as error:
                    return failed(sub, error, attempt)
                case unexpected:
                    assert_never(unexpected)
        raise AssertionError("unreachable: the last attempt returns")  # pragma: no cover


RESTART_WAIT_S = 30.0
"""How long a subtask waits for the agent that had it while Ray restarts that agent."""


class _RestartWait:
    """Waits, in growing pauses and :data:`RESTART_WAIT_S` in all, for a restarting agent.

    An agent that died is called again by Ray at once, and answered "restarting" at once
    (``RecipientUnavailable`` with ``restarting``) until its new incarnation is up: a second
    or so, longer on a busy node. Sent to the role meanwhile, the subtask would start over.
    """

    def __init__(self) -> None:
        self._waited, self._pause = 0.0, 0.1

    async def for_restart(self, error: ErrorPayload) -> bool:
        """Wait a pause and say True if ``error`` says the agent is restarting and time is left."""
        if error.code is not ErrorCode.RECIPIENT_UNAVAILABLE or not error.detail.get("restarting"):
            return False
        if self._waited + self._pause > RESTART_WAIT_S:
            return False
        await asyncio.sleep(self._pause)
        self._waited += self._pause
        self._pause = min(self._pause * 2, 2.0)
        return True


def _died_with_it(job: Job, sub: PlannedSubtask, error: ErrorPayload) -> str | None:
    """The agent of ``sub``'s role that died with it, or whose answer the router lost.

    The router names an agent that died; a router that died itself holding the dispatch or
    its answer names none: then the agent that said it took it (``SubtaskTaken``), if one did.
    Not one that was too slow (``deadline_exceeded``): it may still be running the subtask.
    """
    if error.code is not ErrorCode.RECIPIENT_UNAVAILABLE:
        return None
    named = error.detail.get("recipient")
    return _holder(job, sub, job.taken.get(sub.id) if named is None else named)


def _holder(job: Job, sub: PlannedSubtask, agent: object) -> str | None:
    """``agent``, if it is an agent of ``sub``'s role."""
    holders = {a.name for a in job.team.agents if a.role == sub.role}
    return agent if isinstance(agent, str) and agent in holders else None


def _error(answer: TaskResult | ErrorPayload) -> ErrorPayload | None:
    return answer if isinstance(answer, ErrorPayload) else None


async def _candidate(result: SubtaskResult, sub: PlannedSubtask, tenant: str) -> Candidate:
    """One redundant answer, gated; a failed one is an invalid candidate saying why."""
    if result.status == "succeeded":
        problems = await checked_gate(result.output, sub.output_schema, sub.required, tenant=tenant)
        return make_candidate(result.agent or "", result.output, problems=problems)
    why = result.error.message if result.error else result.status
    return Candidate(agent=result.agent or "", valid=False, problems=(why,))
