"""The jobs one shard holds: adopted or resumed, run, found, listed, cancelled, forgotten.

:class:`ShardJobs` keeps the job table of a shard
(:class:`~raytroupe.actors.orchestrator.actor.Orchestrator` answers from it): it journals and
starts an adopted job, resumes a restarted shard's unfinished jobs (refusing those the
tenant's policy no longer admits), records a finished skill job's outcome for its
experiment, finds a job (in memory, else finished in the journal), keeps people's feedback,
cancels a job at its agents, lists the jobs it holds and forgets the oldest finished jobs
past ``keep_jobs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable

import structlog
from pydantic import ValidationError

from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.evals.experiment_store import ExperimentStore
from raytroupe.actors.orchestrator.admission import PolicyBook, readmit
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk
from raytroupe.actors.orchestrator.jobs import Job, emit, job_message, wait_until
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.runner import JobRunner
from raytroupe.actors.orchestrator.shards import Admitted
from raytroupe.actors.orchestrator.views import listed, summary_of
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import (
    LLM_POOL,
    CancelJob,
    Conflict,
    Feedback,
    Forbidden,
    InvalidInput,
    JobNotFound,
    JobsQuery,
    JobStatus,
    JobSummary,
    TroupeError,
    job_shard,
)

__all__ = ["ShardJobs"]

log = structlog.get_logger("raytroupe.orchestrator")


class ShardJobs:
    """The jobs of one shard, and what is done to each (the shard's).

    Args:
        jobs: the jobs the shard knows, oldest first (its table, kept by the shard).
        tasks: the running jobs' tasks (kept by the shard).
        journal: where jobs, feedback and results are recorded; None: in memory only.
        runner: runs a job.
        graphs: graph jobs' checkpoints (a graph job's input is its first state).
        measures: where experiments' outcomes are written; None: no experiments.
        router: how a cancel reaches the job's agents and the LLM pool.
        keep_jobs: finished jobs remembered for status, result and events queries.
    """

    def __init__(
        self,
        jobs: OrderedDict[str, Job],
        tasks: set[asyncio.Task[None]],
        journal: Journal | None,
        runner: JobRunner,
        *,
        graphs: GraphDesk,
        measures: ExperimentStore | None,
        router: RouterClient,
        keep_jobs: int,
    ) -> None:
        self._jobs, self._tasks = jobs, tasks
        self._journal, self._runner = journal, runner
        self._graphs, self._measures, self._router = graphs, measures, router
        self._keep_jobs = keep_jobs

    async def adopt(self, admitted: Admitted) -> None:
        """Journal and run an admitted job (adopted from the desk, or a fork)."""
        job = Job(
            id=admitted.id,
            context=admitted.context,
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
                context=job.context,
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
            job.record = self._journal.event
        if job.team.graph is not None and job.skill is None and job.input is not None:
            self._graphs.start(job.id, job.team.graph, job.input)  # its input, in its state
        self._jobs[job.id] = job
        metrics.job_status(None, job.status)
        self._forget_old_jobs()
        submitted: dict[str, object] = {"team": job.team.name, "task": job.context.request[:200]}
        if job.skill is not None:
            submitted["skill"] = job.skill.ref
        if job.context.session is not None:
            submitted["session"] = job.context.session
        if job.request_id is not None:
            submitted["request_id"] = job.request_id
        if admitted.forked_from is not None:
            submitted["forked_from"] = admitted.forked_from
        await emit(job, "job_submitted", data=submitted)
        if job.route is not None:
            await emit(job, "job_routed", data=job.route.model_dump(mode="json"))
        self.start(job)

    def resume(
        self, journal: Journal, policies: PolicyBook, owns: Callable[[str], bool], shard: int
    ) -> None:
        """Resume every job of ``journal`` that ``owns`` says is this shard's and has no result.

        A job its tenant's ``policies`` no longer admit ends failed with the refusal.
        """
        for job in journal.resumable(owns):
            if job_shard(job.id, 10_000) != shard:  # its shard is gone: fewer run now
                log.warning(  # its streamed tokens and approvals go to its shard's address
                    "job_of_a_gone_shard_resumed", job_id=job.id, shard=shard
                )
            self._jobs[job.id] = job
            metrics.job_status(None, job.status)
            refused = _refused(job, policies)
            if refused is None:
                log.info("job_resumed", job_id=job.id, finished_subtasks=len(job.done))
            else:  # its end is a refusal, not a measure of the version it runs
                log.warning("job_refused_on_resume", job_id=job.id, field=refused.detail["field"])
                if self._measures is not None:
                    self._measures.forget(job.id)
            self.start(job, refused)

    def start(self, job: Job, refused: Forbidden | None = None) -> None:
        """Run ``job``; ``refused`` (no longer admitted): it ends failed with that, nothing run."""
        runner = job.runner = asyncio.create_task(self._runner.run(job, refused=refused))
        self._tasks.add(runner)
        runner.add_done_callback(self._tasks.discard)
        if job.skill is not None:
            runner.add_done_callback(lambda _: self._measured(job))

    def _measured(self, job: Job) -> None:
        """Record a finished skill job's outcome, should an experiment have assigned it."""
        if job.result is None:  # stopped with its process: the next one resumes it
            return
        if self._measures is None:  # no journal: no experiments (the desk refuses them)
            return
        try:
            self._measures.outcome(job.result)
        except TroupeError as exc:  # the job stands; its experiment is a job short
            log.warning("experiment_outcome_not_recorded", job_id=job.id, code=exc.code.value)

    def job(self, job_id: str, tenant: str | None = None) -> Job:
        """The job ``job_id`` (of ``tenant``, when given); raises ``JobNotFound``."""
        job = self._jobs.get(job_id)
        if job is None and self._journal is not None and "\x00" not in job_id:
            # finished before this process started (no id holds a NUL, nor can PostgreSQL)
            job = self._journal.finished(job_id)
            if job is not None:
                self._jobs[job_id] = job
        if job is None or (tenant is not None and job.tenant != tenant):
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        return job

    def _forget_old_jobs(self) -> None:
        """Forget the oldest finished jobs past ``keep_jobs``."""
        finished = [j for j, job in self._jobs.items() if job.result is not None]
        for job_id in finished[: max(0, len(self._jobs) - self._keep_jobs)]:
            del self._jobs[job_id]

    def stop(self) -> None:
        """Stop the running jobs (the journal resumes them in the next process)."""
        for task in list(self._tasks):
            task.cancel()

    async def cancel(self, job: Job) -> bool:
        """Cancel ``job`` (see :meth:`Orchestrator.cancel`); False if it had finished."""
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

    def taken(
        self, job: Job, task_id: str, agent: str, *, attempt: int = 1, by_role: bool = False
    ) -> str:
        """Keep, and journal, that ``agent`` runs the job's subtask ``task_id``; who runs it.

        That is ``agent``, unless it had the dispatch through its role and another agent took
        the same attempt, or a later one, first: the router that died with that dispatch in
        flight sent it again, to the role, and the role chose another agent. That agent runs
        it (the asker hands it the dispatch). A later attempt, or one sent by name, is the
        dispatcher's choice: its agent runs it.

        A journal that fails is logged: a dispatch again then goes to the role.
        """
        holder = job.taken.get(task_id)
        if by_role and holder not in (None, agent) and attempt <= job.taken_at.get(task_id, 0):
            assert holder is not None  # noqa: S101 - checked above
            log.info("subtask_taken_already", job_id=job.id, task_id=task_id, agent=agent,
                     holder=holder, attempt=attempt)  # fmt: skip
            return holder
        job.taken[task_id], job.taken_at[task_id] = agent, attempt
        if self._journal is None:
            return agent
        try:
            self._journal.taken(job.id, task_id, agent)
        except TroupeError as exc:
            log.warning("subtask_taker_not_journaled", job_id=job.id, task_id=task_id,
                        code=exc.code.value)  # fmt: skip
        return agent

    def feedback(self, job: Job, score: float, comment: str, by: str) -> Feedback:
        """Keep a person's verdict on ``job`` (see :meth:`Orchestrator.feedback`)."""
        if job.result is None:
            raise Conflict(f"job {job.id} has not finished: feedback is on its answer",
                           job_id=job.id)  # fmt: skip
        try:
            given = Feedback(score=score, comment=comment, by=by, at=time.time())
        except ValidationError as exc:
            raise InvalidInput(f"feedback: {exc.errors()[0]['msg']}", field="score") from None
        job.feedback.append(given)
        if self._journal is not None:
            self._journal.feedback(job.id, given)
        if job.skill is not None and self._measures is not None:
            self._measures.feedback(job.id, given.score)
        log.info("job_feedback", job_id=job.id, score=score, by=by)
        return given

    def feedbacks(self, job: Job) -> list[Feedback]:
        """People's verdicts on ``job``, oldest first."""
        if self._journal is not None:
            return self._journal.feedbacks(job.id)
        return list(job.feedback)

    def statuses(self, tenant: str | None) -> dict[str, JobStatus]:
        """The jobs (of ``tenant``, when given) and their status, oldest first."""
        return {
            job_id: job.status
            for job_id, job in self._jobs.items()
            if tenant is None or job.tenant == tenant
        }

    def listed(self, tenant: str | None) -> list[tuple[float, str, JobStatus]]:
        """``(submitted_at, job id, status)`` of each job (of ``tenant``), oldest first."""
        return [
            (job.submitted_at, job_id, job.status)
            for job_id, job in self._jobs.items()
            if tenant is None or job.tenant == tenant
        ]

    def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """The jobs (of ``tenant``) held in memory, newest first, as ``query`` filters them."""
        found = [
            line
            for job in reversed(self._jobs.values())
            if (tenant is None or job.tenant == tenant)
            and (query.before is None or job.submitted_at < query.before)
            and listed(line := summary_of(job), query)
        ]
        return found[: query.limit]


def _refused(job: Job, policies: PolicyBook) -> Forbidden | None:
    """Why today's ``policies`` refuse a job resumed after a restart (None: they admit it)."""
    if job.admin:  # an admin's job runs as it was admitted
        return None
    try:
        readmit(job, *policies.policy(job.tenant))
    except Forbidden as exc:
        return exc
    return None
