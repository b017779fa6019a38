"""The orchestrator: job lifecycle, planning, parallel dispatch, aggregation, job events.

A job runs as one asyncio task (:class:`~raytroupe.actors.orchestrator.runner.JobRunner`): provision
the team, ask the planner for a plan, dispatch every ready subtask through the router (in
parallel up to ``TeamSpec.max_parallel`` per job and ``max_running`` overall), then ask the
planner model to aggregate. Subtasks whose agent died (a retryable delivery error) are
dispatched again with ``attempt + 1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, assert_never

import structlog
from pydantic import ValidationError

from raytroupe.actors.endpoint import RouterClient, serve_envelope
from raytroupe.actors.evals.desk import EvalDesk, EvalStore
from raytroupe.actors.evals.experiments import Assignment, ExperimentDesk, ExperimentStore
from raytroupe.actors.offload import on_loop
from raytroupe.actors.orchestrator.admission import (
    InlineTeams,
    PolicyBook,
    admit_attachments,
    admit_budget,
    admit_inline,
    admit_registered,
    admit_skill,
    readmit,
)
from raytroupe.actors.orchestrator.approvals import ApprovalDesk
from raytroupe.actors.orchestrator.catalog import TeamCatalog, TeamProvisioner
from raytroupe.actors.orchestrator.episodes import with_examples
from raytroupe.actors.orchestrator.evolution import Evolution
from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore
from raytroupe.actors.orchestrator.graphs.control import GraphControl
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk, first_checkpoint
from raytroupe.actors.orchestrator.intent import TeamChooser, pool_asker
from raytroupe.actors.orchestrator.jobs import (
    Job,
    emit,
    job_message,
    wait_until,
)
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.runner import JobRunner
from raytroupe.actors.orchestrator.sessions import SessionControl, SessionDesk, SessionStore
from raytroupe.actors.orchestrator.shards import (
    Admitted,
    OrchestratorPeers,
    front_desk,
    job_owner,
    new_job_id,
)
from raytroupe.actors.orchestrator.views import (
    Interrupted,
    listed,
    live_trace,
    summary_of,
    waiting_approvals,
    waiting_interrupts,
)
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.skills.desk import SkillDesk
from raytroupe.actors.skills.registry import SkillStore
from raytroupe.actors.skills.routing import routing_config
from raytroupe.actors.skills.run import check_input, skill_team
from raytroupe.actors.state import redact_url
from raytroupe.actors.telemetry import metrics
from raytroupe.actors.telemetry.tracing import received
from raytroupe.protocols import (
    LLM_POOL,
    Ack,
    AgentInfo,
    AgentMessage,
    AgentSpec,
    ApprovalRequest,
    Attachment,
    Budget,
    CancelJob,
    Conflict,
    Feedback,
    Forbidden,
    InvalidInput,
    JobEvent,
    JobNotFound,
    JobResult,
    JobsQuery,
    JobStatus,
    JobSummary,
    LLMDeltas,
    SkillNotFound,
    Span,
    TeamSpec,
    TenantPolicy,
    TroupeError,
    job_shard,
    with_files,
)
from raytroupe.protocols.bounded import ADMISSION_WORK_S
from raytroupe.protocols.intent import IntentChoice, IntentConfig
from raytroupe.protocols.jobs import check_output_schema
from raytroupe.protocols.skill import SkillEvent, SkillInfo, SkillProblemInfo, SkillSpec

__all__ = ["Orchestrator", "TeamProvisioner"]

log = structlog.get_logger("raytroupe.orchestrator")


class Orchestrator(Evolution, GraphControl, SessionControl):
    """Runs jobs. A plain class; Ray makes it the ``orchestrator`` actor.

    Args:
        router: how it reaches agents and the LLM pool.
        provisioner: makes a job's team ready before planning.
        max_running: subtasks running at once over all jobs.
        max_attempts: deliveries of one subtask when its agent dies or is unreachable.
        keep_jobs: finished jobs remembered for status, result and events queries.
        journal: where jobs, plans and subtask results are recorded; with one, a restarted
            orchestrator resumes every unfinished job (see :mod:`.journal`).
        shard: which of ``shards`` shards this is (see :mod:`.shards`): shard 0 admits every
            job and keeps teams and policies; each shard runs the jobs whose ids name it.
        peers: how a shard reaches the others (needed with more than one).
    """

    def __init__(
        self,
        router: RouterClient,
        provisioner: TeamProvisioner,
        *,
        max_running: int = 256,
        max_attempts: int = 3,
        keep_jobs: int = 10_000,
        journal: Journal | str | Path | None = None,
        shard: int = 0,
        shards: int = 1,
        peers: OrchestratorPeers | None = None,
        skills: SkillsConfig | None = None,
    ) -> None:
        if not 0 <= shard < shards or (shards > 1 and peers is None):
            raise ValueError(f"shard {shard} of {shards}, peers {peers!r}")
        self._shard, self._shards, self._peers = shard, shards, peers
        self._turn = 0
        self._router = router
        self._provisioner = provisioner
        self._keep_jobs = keep_jobs
        self._journal_at = journal
        self._limits = (max_running, max_attempts)
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._chooser = TeamChooser(router)
        self._skills_config = skills or SkillsConfig()
        self._records(None)  # in memory until on_start opens the journal

    def _records(self, journal: Journal | None) -> None:
        """Keep teams, policies, approvals and jobs in ``journal`` (None: in memory only)."""
        self._journal = journal
        self._desk = ApprovalDesk(journal)
        self._graphs = GraphDesk(
            CheckpointStore(journal.db) if journal is not None else CheckpointStore.in_memory()
        )
        self._sessions = SessionDesk(
            SessionStore(journal.db) if journal is not None else SessionStore.in_memory()
        )
        self._catalog = TeamCatalog(journal, self._provisioner)
        self._policies = PolicyBook(journal.policies() if journal else None)
        self._inline = InlineTeams(journal, self._provisioner)
        self._skills = SkillDesk(
            self._skills_config,
            SkillStore(journal.db) if journal is not None else None,
            self._provisioner,
            self._catalog.team,
        )
        self._evals = EvalDesk(
            EvalStore(journal.db) if journal is not None else None,
            lambda run_id, tenant: pool_asker(self._router, run_id, tenant),
        )
        self._measures = (
            ExperimentStore(journal.db) if journal is not None else ExperimentStore.in_memory()
        )
        self._experiments = ExperimentDesk(
            self._measures,
            self._skills.registry,
            journal.known if journal is not None else self._known,
            shared=journal is not None or self._shards == 1,
        )
        self._runner = JobRunner(
            self._router,
            lambda job: self._provisioner.provision(self._team_of(job)),
            journal,
            max_running=self._limits[0],
            max_attempts=self._limits[1],
            graphs=self._graphs,
            children=self.graph_child,
        )

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        at = self._journal_at
        journal = "in memory" if at is None else at if isinstance(at, Journal) else redact_url(at)
        return (
            f"Orchestrator(shard {self._shard} of {self._shards}, journal {journal}, "
            f"up to {self._limits[0]} subtasks running)"
        )

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open the journal, resume every job it holds without a result, load the skills."""
        await self._resume()
        if self._shard == 0:
            await self._skills.start()
            await self._experiments.start_checking()

    async def _resume(self) -> None:
        if self._journal_at is None:
            return
        at = self._journal_at
        journal = at if isinstance(at, Journal) else await asyncio.to_thread(Journal, at)
        self._records(journal)
        for job in journal.resumable(self._owns):
            if job_shard(job.id, 10_000) != self._shard:  # its shard is gone: fewer run now
                log.warning(  # its streamed tokens and approvals go to its shard's address
                    "job_of_a_gone_shard_resumed", job_id=job.id, shard=self._shard
                )
            self._jobs[job.id] = job
            metrics.job_status(None, job.status)
            refused = self._refused(job)
            if refused is None:
                log.info("job_resumed", job_id=job.id, finished_subtasks=len(job.done))
            else:  # its end is a refusal, not a measure of the version it runs
                log.warning("job_refused_on_resume", job_id=job.id, field=refused.detail["field"])
                self._measures.forget(job.id)
            self._start(job, refused)

    def _refused(self, job: Job) -> Forbidden | None:
        """Why today's policy (as the journal has it) refuses a job resumed after a restart."""
        if job.admin:  # an admin's job runs as it was admitted
            return None
        try:
            readmit(job, *self._policies.policy(job.tenant))
        except Forbidden as exc:
            return exc
        return None

    async def on_stop(self) -> None:
        """Stop running jobs (the journal resumes them in the next process) and close it."""
        await self._skills.stop()
        await self._experiments.stop_checking()
        for task in list(self._tasks):
            task.cancel()
        if self._journal is not None:
            self._journal.close()

    def _start(self, job: Job, refused: Forbidden | None = None) -> None:
        """Run ``job``; ``refused`` (no longer admitted): it ends failed with that, nothing run."""
        runner = job.runner = asyncio.create_task(self._runner.run(job, refused=refused))
        self._tasks.add(runner)
        runner.add_done_callback(self._tasks.discard)
        if job.skill is not None:
            runner.add_done_callback(lambda _: self._measured(job))

    def _known(self, job_id: str) -> tuple[bool, JobResult | None]:
        """(whether this shard knows the job, its result if it has one): without a journal."""
        job = self._jobs.get(job_id)
        return (False, None) if job is None else (True, job.result)

    def _measured(self, job: Job) -> None:
        """Record a finished skill job's outcome, should an experiment have assigned it."""
        if job.result is None:  # stopped with its process: the next one resumes it
            return
        try:
            self._measures.outcome(job.result)
        except TroupeError as exc:  # the job stands; its experiment is a job short
            log.warning("experiment_outcome_not_recorded", job_id=job.id, code=exc.code.value)

    async def shard(self) -> tuple[int, int]:
        """Which shard this is, and of how many."""
        return self._shard, self._shards

    # -- driver API -----------------------------------------------------------------------

    async def submit(
        self,
        task: str,
        team: TeamSpec | str | None = None,
        *,
        tenant: str = "default",
        budget: Budget | None = None,
        teams: Mapping[str, TeamSpec] | None = None,
        intent: IntentConfig | None = None,
        attachments: Sequence[Attachment] = (),
        request_id: str | None = None,
        admin: bool = True,
        skill: str | None = None,
        input: Any = None,  # noqa: A002 - the job's structured input, as the API calls it
        account: str | None = None,
        session: str | None = None,
        by: str | None = None,
        output_schema: dict[str, Any] | None = None,
        stream_answer: bool = False,
        traceparent: str | None = None,
    ) -> str:
        """Start a job and return its id.

        ``skill`` (``name`` or ``name@version``) runs a registered skill: its current version
        (or that one), kept by the job whatever happens to the registry meanwhile; ``input``
        is its structured input, checked against its ``input_schema``. A job that names no
        skill, no team and no ``intent`` is routed among the tenant's skills and registered
        teams (see :mod:`raytroupe.actors.skills.routing`); the route is on the result.

        ``team`` is a team, or the name of a registered one. ``budget`` (default: the
        team's) bounds every model call made for the job; once a call is refused for it, no
        further subtask starts and the job fails with ``budget_exceeded``. Without a
        ``team``, ``intent`` chooses one of ``teams`` (by keyword, then embedding
        similarity, then a model classifier) before the job starts; the route is kept on the
        result. Text ``attachments`` join the task; images are shown to every agent.
        ``request_id`` (e.g. of the HTTP request) is kept on the job's events and trace.

        ``session`` (an id of the tenant's sessions) shows the job the session's history
        before its task (see :mod:`.sessions`) and records it as the session's next turn.

        ``by`` (an API key's name, ``driver``) is who submitted it, on jobs lists.

        ``traceparent`` (W3C, e.g. an HTTP request's) is the caller's OpenTelemetry span: with
        tracing on, the job's spans continue its trace, the job's root a child of that span.

        ``output_schema`` (a driver's ``output_type``) is the JSON Schema the job's answer
        must satisfy, in place of its team's or skill's: the aggregation is held to it by the
        quality gate, and the answer's data is normalized by it.

        ``stream_answer`` (a caller that streams the answer, e.g. the OpenAI endpoint) has the
        aggregation stream its tokens as ``llm_delta`` events of the job's orchestrator
        address, when its text is the answer as it comes (see ``runner.streams_answer``).

        ``account`` (the orchestrator's own, for a graph node's child job) is the job whose
        budget account its model calls draw on; a ``budget`` naming one is refused.

        ``admin=False`` submits for ``tenant`` as a tenant: the job must pass the tenant's
        policy (see :mod:`.admission`); its inline teams run under names scoped to it.

        Raises:
            Forbidden: (a tenant's job) a field its policy refuses; nothing was started.
            ConfigError: no team and no intent configuration, or a target not in ``teams``.
            TeamNotFound: ``team`` names no registered team.
            PlanError: the classifier's answer names no target.
            InvalidInput: the task or a text attachment holds a NUL character; a skill and
                a team both named; ``input`` failing the skill's input schema
                (``detail['fields']``); ``output_schema`` not a valid JSON Schema.
            SkillNotFound: ``skill`` names no registered skill or version.
            SessionNotFound: ``tenant`` has no session ``session``.
        """
        full_task = _checked_task(task, attachments)
        output_schema = _checked_schema(output_schema)
        _no_account(budget)
        if self._shard != 0:
            raise InvalidInput(f"jobs are submitted to orchestrator/0, not /{self._shard}")
        owner = self._turn % self._shards  # in turn, this front desk included
        self._turn += 1
        job_id = new_job_id(owner)
        policy_name, policy = self._policies.policy(tenant)
        if skill is not None and (team is not None or intent is not None or teams):
            raise InvalidInput("a job names a skill or a team, not both", field="skill")
        if not admin:  # the tenant's own documents: off the loop, in its share, within time
            team, teams = await on_loop().run(
                tenant, ADMISSION_WORK_S, "admission_work_s", _admitted,
                tenant, policy_name, policy, attachments, team=team, teams=teams or {},
            )  # fmt: skip
        with received(traceparent):  # a routing model's calls: in the caller's trace
            spec, named, route, arm = await self._skill_for(
                job_id, full_task, tenant=tenant, admin=admin, skill=skill, input=input,
                routed=team is None and intent is None and not teams,
            )  # fmt: skip
        team = named or team
        registered = isinstance(team, str)
        if isinstance(team, str):
            if not admin:  # a team skill runs its team: the tenant must be allowed that team
                admit_registered(team, policy_name, policy)
            team = self._catalog.team(team)
        elif team is None:
            with received(traceparent):
                team, route = await self._chooser.choose(job_id, task, tenant, teams or {}, intent)
        elif spec is None:
            self._catalog.check_unregistered(team)
        team, spec = _shaped(team, spec, output_schema)
        if spec is None and team.graph is not None and input is not None:
            # the door checks it, against the state's schema: the tenant's patterns
            await on_loop().run(
                tenant, ADMISSION_WORK_S, "admission_work_s",
                first_checkpoint, job_id, team.graph, _state_input(input),
            )  # fmt: skip
        if not admin:
            budget = admit_budget(budget, team, policy_name, policy)
        if not registered and spec is None:  # an admin's too: its idle teams make room
            await self._inline.use(
                tenant, team, policy_name, policy, self._running_teams(), refuse=not admin
            )
        with received(traceparent):
            shown = await self._in_context(
                job_id, full_task, tenant=tenant, session=session, team=team, skill=spec
            )
        admitted = Admitted(
            id=job_id,
            task=shown,
            team=team,
            tenant=tenant,
            submitted_at=time.time(),
            budget=_drawing_on(budget or team.budget, account),
            route=route,
            images=tuple(image for a in attachments if (image := a.image()) is not None),
            request_id=request_id,
            registered=registered,
            skill=spec,
            input=input,
            submitted_by=by,
            admin=admin,
            stream_answer=stream_answer,
            traceparent=traceparent,
        )
        await self._hand_off(owner, admitted, arm, (session, full_task) if session else None)
        log.info(
            "job_submitted",
            job_id=job_id,
            team=team.name,
            tenant=tenant,
            request_id=request_id,
            shard=owner,
            session=session,
        )
        return job_id

    async def _in_context(
        self,
        job_id: str,
        task: str,
        *,
        tenant: str,
        session: str | None,
        team: TeamSpec,
        skill: SkillSpec | None,
    ) -> str:
        """``task`` as the job is given it, followed by its context.

        The context is the session's history, then the episodes the job's team or skill
        offers it (see :mod:`.sessions`, :mod:`.episodes`).

        Raises:
            SessionNotFound: ``tenant`` has no session ``session``.
        """
        asker = pool_asker(self._router, job_id, tenant)
        shown = await self._sessions.shown(task, tenant, session, self._result_of(tenant), asker)
        return await with_examples(
            self._router, job_id, shown, tenant=tenant, team=team, skill=skill
        )

    async def _hand_off(
        self,
        owner: int,
        admitted: Admitted,
        arm: Assignment | None,
        turn: tuple[str, str] | None = None,
    ) -> None:
        """Start an admitted job on its shard, counted in its experiment (if any) first.

        The assignment is written before the job can finish (its outcome updates it) and
        dropped again if the job could not be started. So is the job's ``turn`` of a
        session (the session's id, the task as the caller wrote it): the job is its next
        turn, a failed one if it could not be started.
        """
        if arm is not None:
            self._experiments.record(admitted.id, arm)
        seq = None
        if turn is not None:
            seq = self._sessions.store.add_turn(admitted.tenant, turn[0], admitted.id, turn[1])
        try:
            if owner == self._shard:
                await self._adopt(admitted)
            else:
                await self._other().adopt(owner, admitted)
        except BaseException:
            if arm is not None:
                self._experiments.forget(admitted.id)
            if turn is not None and seq is not None:
                self._sessions.store.settle(admitted.tenant, turn[0], seq, "failed", None)
            raise

    async def adopt(self, job: Admitted) -> None:
        """Journal and run a job the front desk admitted for this shard.

        Raises:
            InvalidInput: the job's id names another shard.
        """
        if not self._owns(job.id):
            raise InvalidInput(f"job {job.id} is not orchestrator/{self._shard}'s to run")
        await self._adopt(job)

    async def _adopt(self, admitted: Admitted) -> None:
        job = Job(
            id=admitted.id,
            task=admitted.task,
            team=admitted.team,
            tenant=admitted.tenant,
            submitted_at=admitted.submitted_at,
            budget=admitted.budget,
            route=admitted.route,
            images=admitted.images,
            request_id=admitted.request_id,
            registered=admitted.registered,
            skill=admitted.skill,
            input=admitted.input,
            submitted_by=admitted.submitted_by,
            admin=admitted.admin,
            stream_answer=admitted.stream_answer,
            traceparent=admitted.traceparent,
        )
        if self._journal is not None:
            self._journal.job(
                job.id,
                task=job.task,
                team=job.team,
                tenant=job.tenant,
                budget=job.budget,
                submitted_at=job.submitted_at,
                images=job.images,
                skill=job.skill,
                input=job.input,
                submitted_by=job.submitted_by,
                admin=job.admin,
            )
        if job.team.graph is not None and job.skill is None and job.input is not None:
            self._graphs.start(job.id, job.team.graph, job.input)  # its input, in its state
        self._jobs[job.id] = job
        metrics.job_status(None, job.status)
        self._forget_old_jobs()
        submitted: dict[str, object] = {"team": job.team.name, "task": job.task[:200]}
        if job.skill is not None:
            submitted["skill"] = job.skill.ref
        if job.request_id is not None:
            submitted["request_id"] = job.request_id
        if admitted.forked_from is not None:
            submitted["forked_from"] = admitted.forked_from
        await emit(job, "job_submitted", data=submitted)
        if job.route is not None:
            await emit(job, "job_routed", data=job.route.model_dump(mode="json"))
        self._start(job)

    @job_owner
    async def status(self, job_id: str, *, tenant: str | None = None) -> JobStatus:
        """Where the job is.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        return self._job(job_id, tenant).status

    @job_owner
    async def wait(
        self, job_id: str, timeout: float | None = None, *, tenant: str | None = None
    ) -> JobResult | None:
        """The job's result once it has one, or None if ``timeout`` seconds pass first.

        ``timeout=None`` waits as long as it takes; ``timeout <= 0`` does not wait.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        job = self._job(job_id, tenant)
        await wait_until(job, lambda: job.result is not None, timeout)
        return job.result

    @job_owner
    async def events(
        self,
        job_id: str,
        after: int = 0,
        timeout: float | None = 0.0,
        *,
        tenant: str | None = None,
    ) -> list[JobEvent]:
        """Events with ``seq > after``, waiting up to ``timeout`` seconds for the first one.

        ``timeout=None`` waits as long as it takes; ``timeout <= 0`` does not wait.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        job = self._job(job_id, tenant)
        await wait_until(job, lambda: len(job.events) > after, timeout)
        return job.events[after:]

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point: progress events about a job (e.g. streamed model tokens)."""
        return await serve_envelope(
            data, self._handle, me=self._address, accepts=(LLMDeltas, ApprovalRequest)
        )

    async def _handle(
        self, message: AgentMessage, payload: LLMDeltas | ApprovalRequest
    ) -> AgentMessage:
        if message.job_id is None:
            raise InvalidInput(f"orchestrator takes messages about a job, not {message.kind!r}")
        job = self._job(message.job_id)
        match payload:
            case LLMDeltas():
                deltas = [d.model_dump(exclude={"kind"}) for d in payload.deltas]
                await emit(job, "llm_delta", data={"agent": payload.agent, "deltas": deltas})
                return message.reply(Ack(), sender=self._address)
            case ApprovalRequest():
                return message.reply(await self._desk.hold(job, payload), sender=self._address)
            case _:
                assert_never(payload)

    @job_owner
    async def approvals(self, job_id: str, *, tenant: str | None = None) -> list[ApprovalRequest]:
        """The job's tool calls waiting for a human."""
        return self._desk.pending(self._job(job_id, tenant))

    @job_owner
    async def decide(
        self,
        job_id: str,
        approval_id: str,
        *,
        approved: bool,
        reason: str = "",
        tenant: str | None = None,
    ) -> bool:
        """Approve or reject a waiting tool call; False if nothing waits under that id.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        job = self._job(job_id, tenant)
        return await self._desk.decide(job, approval_id, approved, reason)

    @job_owner
    async def cancel(self, job_id: str, *, tenant: str | None = None) -> bool:
        """Cancel a job: its running subtasks are stopped at their agents, none starts again.

        Returns False if the job had already finished, or finished otherwise meanwhile.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        job = self._job(job_id, tenant)
        if job.result is not None or job.runner is None:
            return False
        job.cancel_requested = True
        # whoever runs one of its subtasks, or work delegated for them, stops it
        for agent in (*(a.name for a in job.team.agents), *job.team.delegates):
            with contextlib.suppress(TroupeError):
                await self._router.send(job_message(job, agent, CancelJob()))
        job.runner.cancel()
        await wait_until(job, lambda: job.result is not None, 30.0)
        # the job has its outcome: the pool may now drop the model calls still running for it
        with contextlib.suppress(TroupeError):
            await self._router.send(job_message(job, LLM_POOL, CancelJob()))
        # still winding down after 30 s: cancelled all the same, it ends as soon as it can
        return job.result is None or job.result.status == "cancelled"

    @job_owner
    async def feedback(
        self, job_id: str, score: float, comment: str = "", *, by: str = "",
        tenant: str | None = None,
    ) -> Feedback:  # fmt: skip
        """Keep a person's verdict on a finished job (any number of them, each with its time).

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
            Conflict: the job has not finished.
            InvalidInput: ``score`` outside 0-1.
        """
        job = self._job(job_id, tenant)
        if job.result is None:
            raise Conflict(f"job {job_id} has not finished: feedback is on its answer",
                           job_id=job_id)  # fmt: skip
        try:
            given = Feedback(score=score, comment=comment, by=by, at=time.time())
        except ValidationError as exc:
            raise InvalidInput(f"feedback: {exc.errors()[0]['msg']}", field="score") from None
        job.feedback.append(given)
        if self._journal is not None:
            self._journal.feedback(job_id, given)
        if job.skill is not None:
            self._measures.feedback(job_id, given.score)
        log.info("job_feedback", job_id=job_id, score=score, by=by)
        return given

    @job_owner
    async def feedbacks(self, job_id: str, *, tenant: str | None = None) -> list[Feedback]:
        """People's verdicts on a job, oldest first.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        job = self._job(job_id, tenant)
        if self._journal is not None:
            return self._journal.feedbacks(job_id)
        return list(job.feedback)

    # -- tenant policies ------------------------------------------------------------------

    @front_desk
    async def policy(self, tenant: str) -> TenantPolicy:
        """The policy that binds ``tenant`` (its own, else the default)."""
        return self._policies.policy(tenant)[1]

    @front_desk
    async def policies(self) -> dict[str, TenantPolicy]:
        """Every policy set, by tenant (``*``: the default for tenants without one)."""
        return self._policies.all()

    @front_desk
    async def put_policy(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Set the policy of ``tenant`` (``*``: the default); None drops it. Journaled."""
        self._policies.put(tenant, policy)
        if self._journal is not None:
            self._journal.put_policy(tenant, policy)

    async def _readmit(self, job: Job, *, by_admin: bool) -> None:
        """Admit ``job`` again under its tenant's policy of today, before it runs again.

        See :func:`.admission.readmit`; ``by_admin``: an admin asks (taken as it is). The
        front desk keeps the policies: another shard asks it for them.

        Raises:
            Forbidden: a field today's policy refuses.
        """
        if by_admin:
            return
        book = self._policies
        if self._shard != 0:
            book = PolicyBook(await self._other().ask(0, "policies"))
        readmit(job, *book.policy(job.tenant))

    @front_desk
    async def use_inline(self, tenant: str, team: TeamSpec) -> None:
        """Count a fork's inline ``team`` among its tenant's live agents, as submit does.

        Raises:
            Forbidden: the tenant would run more agents than its policy allows.
        """
        policy_name, policy = self._policies.policy(tenant)
        await self._inline.use(tenant, team, policy_name, policy, self._running_teams())

    def _running_teams(self) -> set[str]:
        """The teams of unfinished jobs: this shard's, and with others, the journal's."""
        mine = {job.team.name for job in self._jobs.values() if job.result is None}
        if self._shards > 1 and self._journal is not None:
            mine |= self._journal.running_teams()
        return mine

    async def jobs(self, *, tenant: str | None = None) -> dict[str, JobStatus]:
        """Jobs this shard knows (of ``tenant``, when given) and their status, oldest first."""
        return {
            job_id: job.status
            for job_id, job in self._jobs.items()
            if tenant is None or job.tenant == tenant
        }

    async def listed(self, *, tenant: str | None = None) -> list[tuple[float, str, JobStatus]]:
        """``(submitted_at, job id, status)`` of each job this shard knows, oldest first.

        Of ``tenant`` only, when given: what the client merges the shards' lists by.
        """
        return [
            (job.submitted_at, job_id, job.status)
            for job_id, job in self._jobs.items()
            if tenant is None or job.tenant == tenant
        ]

    # -- what people watching jobs see (the jobs list, the console) --------------------------

    @front_desk
    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """Jobs newest first, every shard's, as the journal has them (``Journal.summaries``).

        Unfinished jobs show ``pending`` here: their live status is their shard's (the client
        puts it in). Without a journal: the jobs this shard holds.
        """
        if self._journal is not None:
            return await asyncio.to_thread(self._journal.summaries, tenant, query)
        found = [
            line
            for job in reversed(self._jobs.values())
            if (tenant is None or job.tenant == tenant)
            and (query.before is None or job.submitted_at < query.before)
            and listed(line := summary_of(job), query)
        ]
        return found[: query.limit]

    @job_owner
    async def summary(self, job_id: str, *, tenant: str | None = None) -> JobSummary:
        """The job's jobs-list line, with its live status (raises ``JobNotFound``)."""
        job = self._job(job_id, tenant)
        kept = None
        if self._journal is not None:
            kept = await asyncio.to_thread(self._journal.summary, job_id)
        line = kept or summary_of(job)
        return line.model_copy(update={"status": job.status})

    @job_owner
    async def trace(self, job_id: str, *, tenant: str | None = None) -> tuple[Span, ...]:
        """The job's trace so far: the root first (ending now, while the job runs)."""
        return live_trace(self._job(job_id, tenant))

    async def waiting(
        self, *, tenant: str | None = None
    ) -> tuple[list[tuple[str, ApprovalRequest]], list[Interrupted]]:
        """What this shard's jobs (of ``tenant``) wait for: held tool calls, graph inputs."""
        jobs = list(self._jobs.values())
        return waiting_approvals(jobs, tenant), waiting_interrupts(jobs, tenant)

    # -- teams registered at run time ---------------------------------------------------------

    @front_desk
    async def teams(self) -> dict[str, TeamSpec]:
        """Every registered team, by name."""
        return self._catalog.teams()

    @front_desk
    async def team(self, name: str) -> TeamSpec:
        """The team registered as ``name`` (raises ``TeamNotFound``)."""
        return self._catalog.team(name)

    @front_desk
    async def put_team(self, team: TeamSpec, *, create: bool = False) -> bool:
        """Register or hot-update a team; True if new. See :meth:`TeamCatalog.put`."""
        return await self._catalog.put(team, create=create)

    @front_desk
    async def delete_team(self, name: str) -> TeamSpec:
        """Unregister a team and stop its agents. See :meth:`TeamCatalog.delete`."""
        return await self._catalog.delete(name)

    @front_desk
    async def agents(self) -> list[AgentInfo]:
        """Every agent of every registered team."""
        return self._catalog.agents()

    @front_desk
    async def put_agent(self, team: str, agent: AgentSpec, *, create: bool = False) -> bool:
        """Add or hot-update one agent of a team. See :meth:`TeamCatalog.put_agent`."""
        return await self._catalog.put_agent(team, agent, create=create)

    @front_desk
    async def delete_agent(self, name: str) -> AgentInfo:
        """Remove one agent from its team. See :meth:`TeamCatalog.delete_agent`."""
        return await self._catalog.delete_agent(name)

    # -- skills (the front desk keeps them) -------------------------------------------------

    @front_desk
    async def skills(self, *, tenant: str | None = None) -> list[SkillInfo]:
        """Registered skills (for ``tenant``: those its policy lets it run), by name."""
        allowed = None if tenant is None else self._policies.policy(tenant)[1]
        return [self._skills.registry.info(s.name) for s in self._skills.visible(allowed)]

    @front_desk
    async def skill(
        self, name: str, version: str | None = None, *, tenant: str | None = None
    ) -> SkillSpec:
        """The current version of skill ``name`` (or ``version`` of it).

        Raises:
            SkillNotFound: no such skill or version (or ``tenant`` may not run it).
        """
        if tenant is not None:
            _, policy = self._policies.policy(tenant)
            if policy.skills is not None and name not in policy.skills:
                raise SkillNotFound(f"no skill is registered as {name!r}", skill=name)
        return self._skills.registry.get(name, version)

    @front_desk
    async def skill_history(self, name: str | None = None) -> list[SkillEvent]:
        """What happened to skills (one, or all), oldest first."""
        return self._skills.registry.history(name)

    @front_desk
    async def skill_problems(self) -> list[SkillProblemInfo]:
        """Skill files of the watched directory that could not be loaded."""
        return self._skills.registry.problems()

    @front_desk
    async def put_skill(self, spec: SkillSpec, *, source: str = "api") -> bool:
        """Check and register ``spec`` as its skill's current version; True if it is new.

        Raises:
            Conflict: that version exists with other content (versions are immutable).
            TeamNotFound: a ``team:<name>`` skill's team is not registered.
            ConfigError: a required tool is missing, or its agent cannot be provisioned.
        """
        return await self._skills.apply(spec, source=source)

    @front_desk
    async def rollback_skill(
        self, name: str, version: str | None = None, *, source: str = "api"
    ) -> SkillSpec:
        """Make an earlier version current again (default: the one before the current).

        Raises:
            SkillNotFound: no such skill or version.
            ConfigError: no earlier version.
        """
        return self._skills.registry.rollback(name, version, source=source)

    @front_desk
    async def delete_skill(self, name: str, *, source: str = "api") -> SkillInfo:
        """Unregister a skill and every version of it (running jobs keep theirs).

        Raises:
            SkillNotFound: no such skill.
        """
        self._experiments.stop_skill(name, by=f"skill deleted ({source})")
        return self._skills.registry.delete(name, source=source)

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _address(self) -> str:
        """The shard's router address (``orchestrator``, ``orchestrator-<k>``)."""
        return "orchestrator" if self._shard == 0 else f"orchestrator-{self._shard}"

    def _owns(self, job_id: str) -> bool:
        return job_shard(job_id, self._shards) == self._shard

    def _other(self) -> OrchestratorPeers:
        assert self._peers is not None  # noqa: S101 - required with shards > 1 (__init__)
        return self._peers

    async def _at_owner(self, job_id: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method`` about ``job_id`` (its id first), of the shard that owns the job.

        For this shard's own callers (a session's turns, an eval's cases, a graph's child
        jobs: jobs the front desk handed to any shard); a shard asked from outside about
        another's job refuses (``shards.job_owner``).
        """
        if self._owns(job_id):
            return await getattr(self, method)(job_id, *args, **kwargs)
        owner = job_shard(job_id, self._shards)
        return await self._other().ask(owner, method, job_id, *args, **kwargs)

    async def _skill_for(
        self,
        job_id: str,
        task: str,
        *,
        tenant: str,
        admin: bool,
        skill: str | None,
        input: Any,  # noqa: A002 - as submit names it
        routed: bool,
    ) -> tuple[SkillSpec | None, TeamSpec | str | None, IntentChoice | None, Assignment | None]:
        """(skill, its team or the routed team, route, experiment arm) of a job.

        What ``skill`` names, or, if ``routed`` (the job names nothing), what the intent
        cascade chooses; a skill asked for by name runs the version a running experiment on
        it chooses for the job (not yet recorded: the job has still to be admitted), if the
        tenant's policy admits that version as it does the one asked for; else the one asked
        for, in no experiment.
        """
        policy_name, policy = self._policies.policy(tenant)
        spec: SkillSpec | None = None
        team: TeamSpec | str | None = None
        route: IntentChoice | None = None
        arm: Assignment | None = None
        if skill is not None:
            spec = self._skills.resolve(skill, policy_name, None if admin else policy)
        elif routed:
            spec, team, route = await self._route(job_id, task, tenant, None if admin else policy)
        if spec is not None and (skill is None or "@" not in skill):  # a version named stays
            arm = self._experiments.choose(spec.name, tenant, job_id)
            if arm is not None:
                chosen = self._skills.registry.get(spec.name, arm.version)
                try:  # admitted as the version asked for is (an arm's team may not be)
                    if not admin:
                        admit_skill(chosen, policy_name, policy)
                    spec = chosen
                except Forbidden as exc:  # the operator's split, not the tenant's ask
                    log.info("experiment_arm_not_admitted", job_id=job_id, skill=spec.name,
                             version=arm.version, field=exc.detail["field"])  # fmt: skip
                    arm = None
        if spec is not None:
            check_input(spec, input)
            team = spec.team or skill_team(spec)
        return spec, team, route, arm

    async def _route(
        self, job_id: str, task: str, tenant: str, allowed: TenantPolicy | None
    ) -> tuple[SkillSpec | None, str | None, IntentChoice]:
        """(skill, team name, route) of a job that names neither, among what it may run."""
        teams = {
            name: team
            for name, team in self._catalog.teams().items()
            if allowed is None or allowed.teams is None or name in allowed.teams
        }
        config, kinds = routing_config(
            self._skills.visible(allowed), teams, self._skills_config.routing
        )
        route = await self._chooser.route(job_id, task, tenant, config)
        route = route.model_copy(update={"kind": kinds[route.target]})
        if route.kind == "skill":
            return self._skills.registry.get(route.target), None, route
        return None, route.target, route

    def _team_of(self, job: Job) -> TeamSpec:
        """The team to provision for ``job``.

        On the front desk: as registered now, if the job named a registered team. On another
        shard: as the front desk admitted it.
        """
        return self._catalog.current(job) if self._shard == 0 else job.team

    def _job(self, job_id: str, tenant: str | None = None) -> Job:
        job = self._jobs.get(job_id)
        if job is None and self._journal is not None:
            job = self._journal.finished(job_id)  # finished before this process started
            if job is not None:
                self._jobs[job_id] = job
        if job is None or (tenant is not None and job.tenant != tenant):
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        return job

    def _forget_old_jobs(self) -> None:
        finished = [j for j, job in self._jobs.items() if job.result is not None]
        for job_id in finished[: max(0, len(self._jobs) - self._keep_jobs)]:
            del self._jobs[job_id]


def _no_account(budget: Budget | None) -> None:
    """Refuse a caller's budget that names an account (another job's budget to draw on).

    Raises:
        InvalidInput: it does.
    """
    if budget is not None and budget.account is not None:
        raise InvalidInput("budget.account is the orchestrator's to set", field="budget")


def _drawing_on(budget: Budget | None, account: str | None) -> Budget | None:
    """A graph child's budget: its parent's, drawing on its parent's account."""
    if budget is None or account is None:
        return budget
    return budget.model_copy(update={"account": account})


def _state_input(given: Any) -> dict[str, Any]:
    """A graph job's input: an object of its state's fields.

    Raises:
        InvalidInput: it is not an object.
    """
    if not isinstance(given, dict):
        raise InvalidInput("a graph job's input is an object of its state's fields", field="input")
    return given


def _admitted(
    tenant: str,
    policy_name: str,
    policy: TenantPolicy,
    attachments: Sequence[Attachment],
    *,
    team: TeamSpec | str | None,
    teams: Mapping[str, TeamSpec],
) -> tuple[TeamSpec | str | None, dict[str, TeamSpec]]:
    """A tenant's job's documents, admitted: its attachments, its inline team(s), scoped.

    Raises:
        Forbidden: a field the policy refuses.
        ConfigError: names too long once scoped.
        WorkLimitExceeded: (run within a budget) its schemas' patterns took too long.
    """
    admit_attachments(attachments, policy_name, policy)
    if isinstance(team, TeamSpec):
        team = admit_inline(team, tenant, policy_name, policy)
    return team, {k: admit_inline(t, tenant, policy_name, policy) for k, t in teams.items()}


def _shaped(
    team: TeamSpec, skill: SkillSpec | None, schema: dict[str, Any] | None
) -> tuple[TeamSpec, SkillSpec | None]:
    """The job's team and skill, held to the job's own answer ``schema`` if it has one."""
    if schema is None:
        return team, skill
    update = {"output_schema": schema}
    return team.model_copy(update=update), skill and skill.model_copy(update=update)


def _checked_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A job's ``output_schema``, if it is a usable JSON Schema.

    Raises:
        InvalidInput: it is not (the problem is named).
    """
    try:
        return check_output_schema(schema)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="output_schema") from None


def _checked_task(task: str, attachments: Sequence[Attachment]) -> str:
    """The task with its text attachments.

    Raises:
        InvalidInput: it holds a NUL character (PostgreSQL keeps none in text).
    """
    full_task = with_files(task, tuple(attachments))
    if "\x00" in full_task:
        raise InvalidInput(
            "the task (or a text attachment) contains a NUL character (U+0000), which "
            "the job's journal cannot keep: remove it",
            field="task",
        )
    return full_task
