"""A job's run, from provisioning its team to its result: plan, dispatch, aggregate, finish.

The orchestrator starts one :meth:`JobRunner.run` task per job; the runner is the part of
the orchestrator that talks to the planner model, the dispatcher and the journal. A skill
job's gate, lessons and reflection are :mod:`.skill_runs`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, assert_never

import structlog

from raytroupe.actors.endpoint import RouterClient, expected, request_through_restarts
from raytroupe.actors.guardrails.check import decision_of, guard
from raytroupe.actors.guardrails.store import GuardrailStore
from raytroupe.actors.orchestrator.dispatch import Dispatcher
from raytroupe.actors.orchestrator.episodes import episode_write, policy_of
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk
from raytroupe.actors.orchestrator.graphs.engine import GraphHost, GraphRun, graph_answer
from raytroupe.actors.orchestrator.graphs.nodes import RunChild
from raytroupe.actors.orchestrator.jobs import Job, emit, job_message, last_event, set_status
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.planner import aggregate, make_plan
from raytroupe.actors.orchestrator.skill_runs import SkillRuns
from raytroupe.actors.skills.run import (
    request_text,
    with_lessons,
)
from raytroupe.actors.skills.standard import standard_output
from raytroupe.actors.telemetry.genai import job_finished, job_run
from raytroupe.actors.telemetry.jobs import add_span, done_subtask_spans, job_trace
from raytroupe.actors.telemetry.tracing import note, span
from raytroupe.protocols import (
    LLM_POOL,
    ErrorCode,
    ErrorPayload,
    GuardrailTripped,
    JobEnded,
    JobResult,
    LLMRequest,
    LLMResponse,
    ModelError,
    Plan,
    SubtaskResult,
    Timings,
    TroupeError,
)
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.guardrails import GuardrailDecision

__all__ = ["JobRunner", "guards_output", "streams_answer"]

log = structlog.get_logger("raytroupe.orchestrator")

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]

_TOLD: Final = frozenset({"plan", "aggregate", "skill"})
"""The calls a team skill's recalled lessons go with: planning, aggregating, revising."""


class JobRunner:
    """Runs one job at a time per call of :meth:`run`; holds nothing of its own per job.

    Args:
        router: how it reaches the LLM pool, the agents (through ``dispatcher``) and memory.
        provision: makes a job's team ready (the catalog's current team, provisioned).
        journal: where plans, subtask results and results are recorded (None: nowhere).
        max_running: subtasks running at once over all jobs.
        max_attempts: deliveries of one subtask when its agent dies or is unreachable (and one
            more to the agent that had it, when it died or a restart left it running).
        graphs: graph checkpoints and interrupts.
        children: runs a graph's team or skill node as a child job.
    """

    def __init__(
        self,
        router: RouterClient,
        provision: Callable[[Job], Awaitable[None]],
        journal: Journal | None,
        *,
        max_running: int,
        max_attempts: int,
        graphs: GraphDesk,
        children: RunChild,
    ) -> None:
        self._router = router
        self._graphs, self._children = graphs, children
        self._provision = provision
        self._journal = journal
        self._guardrails = GuardrailStore(journal.db) if journal is not None else None
        self._finishing: set[asyncio.Future[None]] = set()
        self._dispatcher = Dispatcher(
            router, max_running=max_running, max_attempts=max_attempts, record=self.record,
            decided=self._decided,
        )  # fmt: skip
        self._skills = SkillRuns(router, self._dispatcher, self._ask)

    async def run(self, job: Job, *, refused: TroupeError | None = None) -> None:
        """Run ``job`` to its result: provision, plan, dispatch, aggregate, finish.

        With tracing on, under the job's root span (a child of its caller's span, if it came
        with one): every span of its work, in every actor, hangs below it. A job ``refused``
        (no longer admitted: see ``admission.readmit``) ends failed with that error at once:
        nothing of it is provisioned or asked of a model, no lesson written about it.
        """
        with job_run(
            job.id,
            job.team.name,
            tenant=job.tenant,
            submitted_at=job.submitted_at,
            parent=job.traceparent,
            request_id=job.request_id,
        ) as root:
            await self._run(job, refused)
            job_finished(root, job.result)

    async def _run(self, job: Job, refused: TroupeError | None = None) -> None:
        done = _Progress()
        error = None
        try:
            if refused is None:
                error = await self._work(job, done)
                if error is None:
                    await self._guarded(job, done)
            else:  # no longer admitted: it ends with the refusal, nothing of it run
                error = ErrorPayload.from_exception(refused)
        except TroupeError as exc:
            error = ErrorPayload.from_exception(exc)
        except Exception as exc:  # a job must end with a result, whatever broke
            log.exception("job_crashed", job_id=job.id)
            error = ErrorPayload.from_exception(exc)
        except asyncio.CancelledError:
            runner = asyncio.current_task()
            if not job.cancel_requested or runner is None:
                raise  # the actor is going away: the journal resumes the job later
            runner.uncancel()
            error = _cancelled()
            done.subtasks = list(job.done.values())
        subtasks, answer = done.subtasks, done.answer
        timings = Timings(
            submitted_at=job.submitted_at,
            finished_at=time.time(),
            provision_s=done.provision_s,
            plan_s=done.plan_s,
            dispatch_s=done.dispatch_s,
            aggregate_s=done.aggregate_s,
        )
        # a cancel arriving now must not cut the result short: the job would never end
        finishing = asyncio.ensure_future(
            self._finish(job, subtasks, answer, error, timings, reflect=refused is None)
        )
        self._finishing.add(finishing)  # kept: a cancelled runner no longer holds it
        finishing.add_done_callback(self._finishing.discard)
        await asyncio.shield(finishing)

    async def _work(self, job: Job, done: _Progress) -> ErrorPayload | None:
        """Provision, then the skill's or the team's way to an answer; why it failed, if so."""
        mark = time.perf_counter()
        set_status(job, "planning")
        skill = job.skill
        if skill is None or skill.execution_mode != "direct":
            await self._provision(job)
        done.provision_s = time.perf_counter() - mark
        ask = functools.partial(self._ask, job)
        if skill is not None and skill.team is None:  # react or direct: the skill answers
            mark = time.perf_counter()
            set_status(job, "running")
            await self._skills.skill(job, skill, ask, done)
            done.dispatch_s = time.perf_counter() - mark
            return _dispatch_error(job, done.subtasks) if done.subtasks else None
        if skill is not None:  # a team skill: its planner, aggregator and reviser see lessons
            lessons = await self._skills.lessons(job, skill, request_text(job.asked, job.input))
            job.context = job.context.model_copy(update={"lessons": lessons})
        error = await self._team(job, ask, done)
        if error is None and skill is not None:  # a team's answer, gated by the skill
            await self._skills.revised(job, skill, ask, done)
        return error

    async def _guarded(self, job: Job, done: _Progress) -> None:
        """The job's answer, and its subtasks' outputs, after its ``output`` guardrails.

        The subtasks' outputs are delivered with the answer (on the result), so they are
        redacted as it is; a tripwire withholds them all (the result keeps only who did what).
        Each decision is a job event.

        Raises:
            GuardrailTripped: a blocking guardrail's rule matched (the job fails with it).
        """
        bound = job.context.guardrails
        if not guards_output(job):
            return
        ask = functools.partial(self._ask, job)
        try:
            answer = await guard(done.answer, "output", bound, ask=ask)
            outputs = [await guard(s.output, "output", bound, ask=ask) for s in done.subtasks]
        except GuardrailTripped as exc:
            done.subtasks = [s.model_copy(update={"output": ""}) for s in done.subtasks]
            await self._decided(job, decision_of(exc))
            raise
        for decision in answer.decisions:
            await self._decided(job, decision)
        for sub, output in zip(done.subtasks, outputs, strict=True):
            for decision in output.decisions:
                await self._decided(job, decision, sub.id)
        done.answer = answer.text
        done.subtasks = [
            s.model_copy(update={"output": o.text}) if o.decisions else s
            for s, o in zip(done.subtasks, outputs, strict=True)
        ]

    async def _decided(
        self, job: Job, decision: GuardrailDecision, subtask: str | None = None
    ) -> None:
        """Tell the job's watchers of a guardrail's decision, and keep it with the others."""
        await emit(job, "guardrail", subtask, decision.model_dump(mode="json", exclude_none=True))
        if self._guardrails is not None:
            try:
                await asyncio.to_thread(self._guardrails.record, job.tenant, job.id, decision)
            except TroupeError as exc:  # the event has it: the list is an aid
                log.warning("guardrail_not_recorded", job_id=job.id, code=exc.code.value)

    async def _team(self, job: Job, ask: Ask, done: _Progress) -> ErrorPayload | None:
        """Plan (or walk the graph), dispatch, aggregate."""
        if job.team.graph is not None:
            return await self._graph(job, job.team.graph, ask, done)
        mark = time.perf_counter()
        with span("plan", attributes={"raytroupe.job.id": job.id}) as planning:
            plan = await self._planned(job)
            note(planning, **{"raytroupe.plan.subtasks": len(plan.subtasks)})
        done.plan_s = time.perf_counter() - mark

        mark = time.perf_counter()
        set_status(job, "running")
        done.subtasks = await self._dispatcher.run(job, plan, ask)
        done.dispatch_s = time.perf_counter() - mark
        error = _dispatch_error(job, done.subtasks)
        if error is None:
            mark, aggregating = time.perf_counter(), time.time()
            set_status(job, "aggregating")
            await emit(job, "job_aggregating")
            with span("aggregate", attributes={"raytroupe.job.id": job.id}):
                done.answer = await self._aggregate(job, done.subtasks)
            add_span(job, "aggregate", "aggregate", aggregating, time.time())
            done.aggregate_s = time.perf_counter() - mark
        return error

    async def _graph(
        self, job: Job, graph: GraphSpec, ask: Ask, done: _Progress
    ) -> ErrorPayload | None:
        """Walk the graph from its last checkpoint; its answer and final state."""
        mark = time.perf_counter()
        set_status(job, "running")
        host = GraphHost(
            run_subtask=functools.partial(self._dispatcher.run_one, ask=ask),
            run_child=self._children,
            desk=self._graphs,
        )
        outcome = await GraphRun(host, job, graph).run()
        ran = {r.id for r in outcome.results}
        earlier = [r for r in job.done.values() if r.id not in ran]  # before a restart
        done.subtasks, job.state = [*earlier, *outcome.results], outcome.state
        done.dispatch_s = time.perf_counter() - mark
        error = _cancelled() if job.cancel_requested else outcome.error or job.stopped
        done.answer = graph_answer(graph, outcome) if error is None else ""
        return error

    async def _finish(
        self,
        job: Job,
        subtasks: list[SubtaskResult],
        answer: str,
        error: ErrorPayload | None,
        timings: Timings,
        *,
        reflect: bool = True,
    ) -> None:
        """Build the job's result, journal it, let memory drop the job, emit the last event.

        ``reflect=False``: no lesson is asked for, whatever the skill's policy (a refused job).
        """
        cancelled = job.cancel_requested and error is not None and error.code is ErrorCode.CANCELLED
        result = JobResult(
            job_id=job.id,
            task=job.context.request,
            team=job.team.name,
            status="cancelled" if cancelled else "failed" if error else "succeeded",
            answer=answer,
            subtasks=tuple(subtasks),
            usage=sum((s.usage for s in subtasks), job.usage),
            error=error,
            timings=timings,
            route=job.route,
            state=job.state,
        )
        result = result.model_copy(update={"trace": job_trace(job, timings, result.status, error)})
        schema = job.skill.output_schema if job.skill is not None else job.team.output_schema
        output = standard_output(result, skill=job.skill, quality=job.quality, schema=schema)
        result = result.model_copy(update={"output": output})
        if reflect and not cancelled:
            await self._skills.reflect(job, result)
        set_status(job, result.status)
        log.info(
            "job_finished",
            job_id=job.id,
            status=result.status,
            total_s=round(result.timings.total_s, 3),
        )
        policy, owner = policy_of(job.team, job.skill)
        episode = episode_write(result, policy, owner, request_text(job.asked, job.input))
        try:  # its notes go with it, its episode stays (fire and forget: memory is an aid)
            if episode is not None:
                await self._router.send(job_message(job, "memory", episode))
            ended = JobEnded(keep_notes=job.team.keep_notes)
            await self._router.send(job_message(job, "memory", ended))
        except TroupeError as exc:
            log.warning("job_end_not_sent", job_id=job.id, code=exc.code.value)
        if self._journal is not None:
            self._journal.finish(result)
        kind, data = last_event(result)
        await emit(job, kind, data=data, result=result)

    async def _planned(self, job: Job) -> Plan:
        """The job's plan: journaled or made now (then journaled), announced to watchers."""
        planned = time.time()
        if job.plan is None:
            job.plan = await self._plan(job)
            if self._journal is not None:
                self._journal.plan(job.id, job.plan)
        plan = job.plan
        noted: dict[str, str] = {}  # what repair or the fallback did: on the result's trace
        if plan.repairs:
            noted["repairs"] = "; ".join(plan.repairs)
        if plan.fallback:
            noted["fallback"] = plan.fallback
        add_span(job, "plan", "plan", planned, time.time(), subtasks=len(plan.subtasks), **noted)
        done_subtask_spans(job)  # those that finished before a restart are not run again
        data: dict[str, object] = {"subtasks": [s.model_dump(mode="json") for s in plan.subtasks]}
        if plan.repairs or plan.fallback:
            data |= {"repairs": list(plan.repairs), "fallback": plan.fallback}
            log.warning("plan_repaired", job_id=job.id, repairs=plan.repairs,
                        fallback=plan.fallback)  # fmt: skip
        await emit(job, "plan_ready", data=data)
        return plan

    async def _plan(self, job: Job) -> Plan:
        return await make_plan(job.context, job.team, lambda request: self._ask(job, request))

    async def _aggregate(self, job: Job, results: list[SubtaskResult]) -> str:
        streamed = streams_answer(job)

        async def ask(request: LLMRequest) -> LLMResponse:
            return await self._ask(
                job, request.model_copy(update={"stream": True}) if streamed else request
            )

        return await aggregate(
            job.context, results, job.team, ask, tenant=job.tenant, plan=job.plan
        )

    async def _ask(self, job: Job, request: LLMRequest) -> LLMResponse:
        if job.context.lessons and request.purpose in _TOLD:
            request = with_lessons(request, job.context.lessons)
        request = request.model_copy(update={"budget": job.budget})
        reply = await request_through_restarts(
            self._router, lambda: job_message(job, LLM_POOL, request)
        )
        match expected(reply, LLMResponse, unexpected=ModelError):
            case LLMResponse() as response:
                job.usage += response.usage
                return response
            case ErrorPayload() as error:
                raise error.to_exception()
            case unexpected:
                assert_never(unexpected)

    def record(self, job: Job, result: SubtaskResult) -> None:
        """Keep a finished subtask's result, and journal it."""
        job.done[result.id] = result
        if self._journal is not None:
            self._journal.subtask(job.id, result)


@dataclass
class _Progress:
    """What a job's run has come to so far (kept when it fails half-way)."""

    subtasks: list[SubtaskResult] = field(default_factory=list)
    answer: str = ""
    provision_s: float = 0.0
    plan_s: float = 0.0
    dispatch_s: float = 0.0
    aggregate_s: float = 0.0


def streams_answer(job: Job) -> bool:
    """Whether the job's aggregation streams its tokens: its caller asked, and they are the answer.

    They are when the aggregation's text becomes the answer unchanged: no skill gates or
    revises it, no output schema or required fields can send it back for another try. (A
    blank text is replaced by the subtasks' outputs: a streaming reader holds back leading
    whitespace.) Only this call of the orchestrator's streams, so a job's ``llm_delta`` events
    from its orchestrator address are the answer's tokens, in order.
    """
    team = job.team
    return (
        job.stream_answer
        and job.skill is None
        and team.output_schema is None
        and not team.required
        and not guards_output(job)  # its tokens would reach the caller before the check
    )


def guards_output(job: Job) -> bool:
    """Whether a guardrail checks the job's output: then no token of it is streamed."""
    return any(g.at("output") for g in job.context.guardrails)


def _cancelled() -> ErrorPayload:
    return ErrorPayload(code=ErrorCode.CANCELLED, message="the job was cancelled")


def _dispatch_error(job: Job, subtasks: list[SubtaskResult]) -> ErrorPayload | None:
    """Why the job failed or stopped in dispatch (None: every subtask succeeded).

    A subtask failed by its tools' host (``tool_infrastructure``) gives the job its code and
    its words (which name what to fix): the operator must act before any job can use the tools.
    """
    failed = [s for s in subtasks if s.status != "succeeded"]
    if job.cancel_requested:  # its agents stopped the subtasks before the runner was told
        return _cancelled()
    if job.stopped is not None:
        return job.stopped.model_copy(
            update={
                "message": f"{job.stopped.message}; {len(failed)} of {len(subtasks)} "
                "subtasks did not finish"
            }
        )
    if not failed:
        return None
    summary = f"{len(failed)} of {len(subtasks)} subtasks did not succeed: " + ", ".join(
        f"{s.id} ({s.error.code if s.error else s.status})" for s in failed
    )
    for sub in failed:
        if sub.error is not None and sub.error.code is ErrorCode.TOOL_INFRASTRUCTURE:
            return sub.error.model_copy(
                update={"message": f"{summary}; {sub.id}: {sub.error.message}"}
            )
    return ErrorPayload(code=ErrorCode.JOB_FAILED, message=summary)
