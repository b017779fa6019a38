"""A job shard: job lifecycle, planning, parallel dispatch, aggregation, job events.

The front desk (:mod:`raytroupe.actors.desk`) admits a job and hands it to the shard its id
names (:mod:`.shards`); the shard journals it, runs it and answers every question about it.
A job runs as one asyncio task (:class:`~raytroupe.actors.orchestrator.runner.JobRunner`): provision
the team, ask the planner for a plan, dispatch every ready subtask through the router (in
parallel up to ``TeamSpec.max_parallel`` per job and ``max_running`` overall), then ask the
planner model to aggregate. Subtasks whose agent died (a retryable delivery error) are
dispatched again with ``attempt + 1``. The shard keeps its jobs in a
:class:`~raytroupe.actors.orchestrator.shard_jobs.ShardJobs`.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from pathlib import Path
from typing import Any, assert_never

import structlog

from raytroupe.actors.endpoint import RouterClient, serve_envelope
from raytroupe.actors.evals.experiment_store import ExperimentStore
from raytroupe.actors.notify.deliverer import Deliverer
from raytroupe.actors.orchestrator.admission import PolicyBook
from raytroupe.actors.orchestrator.approvals import ApprovalDesk
from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore
from raytroupe.actors.orchestrator.graphs.control import GraphControl
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk
from raytroupe.actors.orchestrator.jobs import Job, emit, wait_until
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.runner import JobRunner, guards_output
from raytroupe.actors.orchestrator.shard_jobs import ShardJobs
from raytroupe.actors.orchestrator.shards import Admitted, Desk, Shards, TeamProvisioner, job_owner
from raytroupe.actors.orchestrator.views import (
    Interrupted,
    live_trace,
    summary_of,
    waiting_approvals,
    waiting_interrupts,
)
from raytroupe.actors.state import redact_url
from raytroupe.protocols import (
    Ack,
    AgentMessage,
    ApprovalRequest,
    Feedback,
    InvalidInput,
    JobEvent,
    JobResult,
    JobsQuery,
    JobStatus,
    JobSummary,
    LLMDeltas,
    Span,
    SubtaskTaken,
    as_written,
    job_shard,
)
from raytroupe.protocols.config.webhooks import WebhooksConfig
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt, GraphState
from raytroupe.protocols.spend import SpendAlert

__all__ = ["Orchestrator"]

log = structlog.get_logger("raytroupe.orchestrator")


class Orchestrator:
    """Runs jobs: a job shard. A plain class; Ray makes it the ``orchestrator/<k>`` actor.

    Args:
        router: how it reaches agents and the LLM pool.
        provisioner: makes a job's team ready before planning.
        desk: the front desk, which admits jobs (a graph node's child job, a fork's inline
            team) and keeps the registered teams and tenant policies.
        shards: every job shard, this one included (a graph job waits for its children
            on theirs).
        max_running: subtasks running at once over all jobs.
        max_attempts: deliveries of one subtask when its agent dies or is unreachable (and one
            more to the agent that had it, when it died or a restart left it running).
        keep_jobs: finished jobs remembered for status, result and events queries.
        journal: where jobs, plans and subtask results are recorded; with one, a restarted
            shard resumes every unfinished job of its partition (see :mod:`.journal`).
        shard: which of ``len(shards)`` shards this is (see :mod:`.shards`): it runs the
            jobs whose ids name it.
    """

    def __init__(
        self,
        router: RouterClient,
        provisioner: TeamProvisioner,
        desk: Desk,
        shards: Shards,
        *,
        max_running: int = 256,
        max_attempts: int = 3,
        keep_jobs: int = 10_000,
        journal: Journal | str | Path | None = None,
        shard: int = 0,
        webhooks: WebhooksConfig | None = None,
    ) -> None:
        if not 0 <= shard < len(shards):
            raise ValueError(f"shard {shard} of {len(shards)}")
        self._shard, self._shards = shard, len(shards)
        self._router = router
        self._provisioner = provisioner
        self._front, self._all = desk, shards
        self._keep_jobs = keep_jobs
        self._journal_at = journal
        self._limits = (max_running, max_attempts)
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._webhooks = webhooks or WebhooksConfig()
        self._delivering: asyncio.Task[None] | None = None
        self._records(None)  # in memory until on_start opens the journal

    def _records(self, journal: Journal | None) -> None:
        """Keep jobs, plans, approvals and checkpoints in ``journal`` (None: in memory only)."""
        self._journal = journal
        self._desk = ApprovalDesk(journal)
        self._graphs = GraphDesk(
            CheckpointStore(journal.db) if journal is not None else CheckpointStore.in_memory()
        )
        self._graph_control = GraphControl(self._graphs, self._front, self._all, self._shard)
        self._runner = JobRunner(
            self._router, self._provision, journal, max_running=self._limits[0],
            max_attempts=self._limits[1], graphs=self._graphs, children=self._graph_control.child,
        )  # fmt: skip
        self._held = ShardJobs(
            self._jobs, self._tasks, journal, self._runner, graphs=self._graphs,
            measures=ExperimentStore(journal.db) if journal is not None else None,
            router=self._router, keep_jobs=self._keep_jobs,
        )  # fmt: skip

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
        """Open the journal and resume every job of this shard's partition without a result."""
        if self._journal_at is None:
            return
        at = self._journal_at
        journal = (
            at if isinstance(at, Journal)
            else await asyncio.to_thread(functools.partial(Journal, at, shards=self._shards))
        )  # fmt: skip
        self._records(journal)
        deliverer = Deliverer(journal.webhooks, self._shard, self._webhooks)
        journal.delivering = deliverer.wake
        self._delivering = asyncio.create_task(deliverer.run(), name="webhook deliveries")
        policies = PolicyBook(journal.policies())  # as the desk journaled them: no call to it
        self._held.resume(journal, policies, self._owns, self._shard)

    async def on_stop(self) -> None:
        """Stop running jobs (the journal resumes them in the next process) and close it."""
        self._held.stop()
        if self._delivering is not None:
            self._delivering.cancel()
        if self._journal is not None and not isinstance(self._journal_at, Journal):
            self._journal.close()

    async def shard(self) -> tuple[int, int]:
        """Which shard this is, and of how many."""
        return self._shard, self._shards

    async def adopt(self, job: Admitted) -> None:
        """Journal and run a job the front desk admitted for this shard.

        Raises:
            InvalidInput: the job's id names another shard.
        """
        if not self._owns(job.id):
            raise InvalidInput(f"job {job.id} is not orchestrator/{self._shard}'s to run")
        await self._held.adopt(job)

    @job_owner
    async def status(self, job_id: str, *, tenant: str | None = None) -> JobStatus:
        """Where the job is.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        return self._held.job(job_id, tenant).status

    @job_owner
    async def wait(
        self, job_id: str, timeout: float | None = None, *, tenant: str | None = None
    ) -> JobResult | None:
        """The job's result once it has one, or None if ``timeout`` seconds pass first.

        ``timeout=None`` waits as long as it takes; ``timeout <= 0`` does not wait.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        job = self._held.job(job_id, tenant)
        await wait_until(job, lambda: job.result is not None, timeout)
        return as_written(job.result, job.tenant)

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
        job = self._held.job(job_id, tenant)
        await wait_until(job, lambda: len(job.events) > after, timeout)
        return as_written(job.events[after:], job.tenant)

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point: progress about a job.

        Streamed model tokens, an agent that took a subtask, a tool call held for a person.
        """
        return await serve_envelope(
            data,
            self._handle,
            me=self._address,
            accepts=(LLMDeltas, SubtaskTaken, ApprovalRequest, SpendAlert),
        )

    async def _handle(
        self,
        message: AgentMessage,
        payload: LLMDeltas | SubtaskTaken | ApprovalRequest | SpendAlert,
    ) -> AgentMessage:
        if message.job_id is None:
            raise InvalidInput(f"orchestrator takes messages about a job, not {message.kind!r}")
        job = self._held.job(message.job_id)
        match payload:
            case LLMDeltas():
                if not guards_output(job):  # else the tokens would pass round its guardrails
                    deltas = [d.model_dump(exclude={"kind"}) for d in payload.deltas]
                    await emit(job, "llm_delta", data={"agent": payload.agent, "deltas": deltas})
                return message.reply(Ack(), sender=self._address)
            case SubtaskTaken():
                if payload.agent != message.sender:
                    raise InvalidInput(
                        f"{message.sender!r} cannot say {payload.agent!r} took a subtask"
                    )
                if payload.agent not in {a.name for a in job.team.agents}:
                    raise InvalidInput(f"{payload.agent!r} is not an agent of the job's team")
                holder = self._held.taken(
                    job, payload.task_id, payload.agent,
                    attempt=message.attempt, by_role=payload.by_role,
                )  # fmt: skip
                runs = SubtaskTaken(task_id=payload.task_id, agent=holder)
                return message.reply(runs, sender=self._address)
            case ApprovalRequest():
                return message.reply(await self._desk.hold(job, payload), sender=self._address)
            case SpendAlert():
                if message.sender != "llm":  # the pool's word, as its deltas are
                    raise InvalidInput(f"{message.sender!r} cannot raise a spend alert")
                if payload.tenant != job.tenant:
                    raise InvalidInput("a spend alert names another tenant than its job's")
                await emit(job, "spend_alert", data=payload.model_dump(exclude={"kind"}))
                return message.reply(Ack(), sender=self._address)
            case _:
                assert_never(payload)

    @job_owner
    async def approvals(self, job_id: str, *, tenant: str | None = None) -> list[ApprovalRequest]:
        """The job's tool calls waiting for a human."""
        job = self._held.job(job_id, tenant)
        return as_written(self._desk.pending(job), job.tenant)

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
        job = self._held.job(job_id, tenant)
        return await self._desk.decide(job, approval_id, approved, reason)

    @job_owner
    async def cancel(self, job_id: str, *, tenant: str | None = None) -> bool:
        """Cancel a job: its running subtasks are stopped at their agents, none starts again.

        Returns False if the job had already finished, or finished otherwise meanwhile.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        return await self._held.cancel(self._held.job(job_id, tenant))

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
        return self._held.feedback(self._held.job(job_id, tenant), score, comment, by)

    @job_owner
    async def feedbacks(self, job_id: str, *, tenant: str | None = None) -> list[Feedback]:
        """People's verdicts on a job, oldest first.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        return self._held.feedbacks(self._held.job(job_id, tenant))

    async def jobs(self, *, tenant: str | None = None) -> dict[str, JobStatus]:
        """Jobs this shard knows (of ``tenant``, when given) and their status, oldest first."""
        return self._held.statuses(tenant)

    async def listed(self, *, tenant: str | None = None) -> list[tuple[float, str, JobStatus]]:
        """``(submitted_at, job id, status)`` of each job this shard knows, oldest first.

        Of ``tenant`` only, when given: what the client merges the shards' lists by.
        """
        return self._held.listed(tenant)

    # -- what people watching jobs see (the jobs list, the console) --------------------------

    @job_owner
    async def summary(self, job_id: str, *, tenant: str | None = None) -> JobSummary:
        """The job's jobs-list line, with its live status (raises ``JobNotFound``)."""
        job = self._held.job(job_id, tenant)
        kept = None
        if self._journal is not None:
            kept = await asyncio.to_thread(self._journal.summary, job_id)
        line = kept or summary_of(job)
        return as_written(line.model_copy(update={"status": job.status}), job.tenant)

    @job_owner
    async def trace(self, job_id: str, *, tenant: str | None = None) -> tuple[Span, ...]:
        """The job's trace so far: the root first (ending now, while the job runs)."""
        job = self._held.job(job_id, tenant)
        return as_written(live_trace(job), job.tenant)

    async def waiting(
        self, *, tenant: str | None = None
    ) -> tuple[list[tuple[str, ApprovalRequest]], list[Interrupted]]:
        """What this shard's jobs (of ``tenant``) wait for: held tool calls, graph inputs."""
        jobs = list(self._jobs.values())
        return waiting_approvals(jobs, tenant), waiting_interrupts(jobs, tenant)

    async def running_teams(self) -> set[str]:
        """The teams of this shard's unfinished jobs."""
        return {job.team.name for job in self._jobs.values() if job.result is None}

    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """The jobs (of ``tenant``) this shard holds in memory, newest first.

        The jobs list of a deployment without a journal (the desk merges the shards');
        with one, the desk reads the journal's, every shard's jobs at once.
        """
        return self._held.summaries(tenant, query)

    # -- graph jobs (see :mod:`.graphs.control`) --------------------------------------------

    @job_owner
    async def checkpoints(self, job_id: str, *, tenant: str | None = None) -> list[GraphCheckpoint]:
        """See :meth:`GraphControl.checkpoints`."""
        job = self._held.job(job_id, tenant)
        return as_written(await self._graph_control.checkpoints(job), job.tenant)

    @job_owner
    async def resume(
        self,
        job_id: str,
        *,
        value: Any = None,
        state: GraphState | None = None,
        interrupt: str | None = None,
        tenant: str | None = None,
    ) -> GraphInterrupt:
        """See :meth:`GraphControl.resume`."""
        job = self._held.job(job_id, tenant)
        return await self._graph_control.resume(job, value, state, interrupt)

    @job_owner
    async def fork(
        self,
        job_id: str,
        step: int,
        *,
        state: GraphState | None = None,
        tenant: str | None = None,
        admin: bool = False,
    ) -> str:
        """See :meth:`GraphControl.fork` (the fork runs on this shard)."""
        source = self._held.job(job_id, tenant)
        admitted = await self._graph_control.fork(
            source, step, state, admin=admin or tenant is None
        )
        await self._held.adopt(admitted)
        log.info("job_forked", job_id=admitted.id, parent=job_id, step=step)
        return admitted.id

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _address(self) -> str:
        """The shard's router address (``orchestrator``, ``orchestrator-<k>``)."""
        return "orchestrator" if self._shard == 0 else f"orchestrator-{self._shard}"

    def _owns(self, job_id: str) -> bool:
        return job_shard(job_id, self._shards) == self._shard

    async def _provision(self, job: Job) -> None:
        """Make the job's team ready: as registered now, if it named a registered team.

        A registered team's agents are shared by its jobs: provisioned as the job was
        admitted, they would lose a hot update made since (the desk keeps the catalog).

        Raises:
            TeamNotFound: the job named a team that has since been deleted.
        """
        team = await self._front.team(job.team.name) if job.registered else job.team
        await self._provisioner.provision(team)
