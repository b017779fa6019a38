"""A driver acting for one tenant: the same policies and scoping as the tenant's API key."""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from raytroupe.protocols import (
    Attachment,
    Budget,
    ConfigError,
    JobStatus,
    TeamSpec,
)
from raytroupe.protocols.job_context import checked_end_user
from raytroupe.protocols.job_order import JobOrder
from raytroupe.protocols.knowledge import IngestReport, KnowledgeDocument
from raytroupe.protocols.sessions import HISTORY_TOKENS
from raytroupe.protocols.traceparent import current_traceparent
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.config import Team
from raytroupe.runtime.handle import JobHandle
from raytroupe.runtime.knowledge import ingest_all
from raytroupe.runtime.operations import At, handle, in_process, widens
from raytroupe.runtime.operations import guardrails as guardrail_ops
from raytroupe.runtime.operations import job_reads as read_ops
from raytroupe.runtime.operations import jobs as job_ops
from raytroupe.runtime.operations import knowledge as knowledge_ops
from raytroupe.runtime.operations import observe as observe_ops
from raytroupe.runtime.operations import policies as policy_ops
from raytroupe.runtime.operations import schedules as schedule_ops
from raytroupe.runtime.operations import sessions as session_ops
from raytroupe.runtime.operations import skills as skill_ops
from raytroupe.runtime.operations import spend as spend_ops
from raytroupe.runtime.operations import submit as submit_ops
from raytroupe.runtime.operations import teams as team_ops
from raytroupe.runtime.operations import webhooks as webhook_ops
from raytroupe.runtime.sessions import Session

__all__ = ["TenantView"]

T = TypeVar("T")


class TenantView:
    """Jobs submitted and read as ``tenant``, never as an admin (see :meth:`Runtime.as_tenant`).

    Inline teams are checked against the tenant's policy and run under names scoped to it;
    only the tenant's jobs and usage are reachable; another tenant's job is ``JobNotFound``.
    """

    def __init__(self, tenant: str, client: SystemClient, portal: Portal) -> None:
        self.tenant = tenant
        self._client = client
        self._portal = portal

    def __repr__(self) -> str:
        return f"TenantView({self.tenant!r})"

    @handle(submit_ops.submit)
    def submit(
        self,
        task: str,
        team: TeamSpec | Team | str | None = None,
        *,
        budget: Budget | None = None,
        attachments: Sequence[Attachment] = (),
        skill: str | None = None,
        input: Any = None,  # noqa: A002 - a skill's structured input, as the API calls it
        session: str | None = None,
        user: str | None = None,
    ) -> JobHandle:
        """Start a job for the tenant (see :meth:`Runtime.submit`).

        Without ``team`` and ``skill`` the job is routed among the skills and registered
        teams the tenant's policy lets it run.

        Raises:
            Forbidden: a field the tenant's policy refuses; nothing was started.
            ConfigError: ``task`` is empty (and there is no ``input``).
            TeamNotFound: ``team`` names no registered team.
            SkillNotFound: ``skill`` names no skill the tenant may run.
        """
        if not task.strip() and input is None:
            raise ConfigError("task is empty")
        spec = team.spec() if isinstance(team, Team) else team
        at = dataclasses.replace(  # a Python driver's job, as the jobs list says
            self._at(), source="driver", traceparent=current_traceparent()
        )
        job_id = self._portal.run(
            submit_ops.start(at, JobOrder(
                task=task, team=spec, budget=budget, attachments=tuple(attachments),
                skill=skill, input=input, session=session, user=user,
            ))
        )  # fmt: skip
        return self.job(job_id)

    @handle(session_ops.session)
    def session(
        self,
        session_id: str | None = None,
        *,
        title: str = "",
        history_tokens: int = HISTORY_TOKENS,
        user: str | None = None,
    ) -> Session:
        """A conversation of the tenant (see :meth:`Runtime.session`)."""
        info = self._portal.run(
            self._client.create_session(
                self.tenant, session_id, title=title, history_tokens=history_tokens,
                user=None if user is None else checked_end_user(user),
            )
        )  # fmt: skip
        return Session(info, self._client, self._portal, self.submit)

    sessions = in_process(session_ops.sessions)
    create_session = in_process(session_ops.create_session)
    delete_session = in_process(session_ops.delete_session)

    create_webhook = in_process(webhook_ops.create_webhook)
    webhooks = in_process(webhook_ops.webhooks)
    webhook = in_process(webhook_ops.webhook)
    delete_webhook = in_process(webhook_ops.delete_webhook)
    webhook_deliveries = in_process(webhook_ops.webhook_deliveries)
    put_schedule = in_process(schedule_ops.put_schedule)
    schedules = in_process(schedule_ops.schedules)
    schedule = in_process(schedule_ops.schedule)
    delete_schedule = in_process(schedule_ops.delete_schedule)
    guardrail_decisions = in_process(guardrail_ops.guardrail_decisions)

    skills = in_process(skill_ops.skills)
    lessons = in_process(skill_ops.lessons)
    delete_lesson = in_process(skill_ops.delete_lesson)

    @handle(read_ops.job)
    def job(self, job_id: str) -> JobHandle:
        """A handle on one of the tenant's jobs (``JobNotFound`` for anyone else's)."""
        self._portal.run(self._client.status(job_id, tenant=self.tenant))
        return JobHandle(job_id, self._client, self._portal, tenant=self.tenant)

    events = in_process(read_ops.events)

    def jobs(self) -> dict[str, JobStatus]:
        """The tenant's jobs and their status, oldest first (:meth:`statuses`)."""
        return self.statuses()

    statuses = in_process(read_ops.statuses)

    usage = in_process(observe_ops.usage)
    spend_windows = in_process(spend_ops.spend_windows)

    @widens(knowledge_ops.ingest)
    def ingest(
        self,
        kb: str,
        documents: Iterable[str | Path | KnowledgeDocument],
        *,
        base: str | Path | None = None,
        user: str | None = None,
    ) -> IngestReport:
        """Add files or documents to the tenant's knowledge base (see :meth:`Runtime.ingest`)."""
        return ingest_all(self._at(), self._run, kb, documents, base=base, user=user)

    knowledge_bases = in_process(knowledge_ops.knowledge_bases)
    documents = in_process(knowledge_ops.documents)
    search = in_process(knowledge_ops.search)
    delete_document = in_process(knowledge_ops.delete_document)
    drop_knowledge_base = in_process(knowledge_ops.drop_knowledge_base)
    policy = in_process(policy_ops.policy)
    cancel = in_process(job_ops.cancel)
    approvals = in_process(job_ops.approvals)
    approve = in_process(job_ops.approve)
    reject = in_process(job_ops.reject)
    feedback = in_process(job_ops.feedback)
    feedbacks = in_process(job_ops.feedbacks)
    checkpoints = in_process(job_ops.checkpoints)
    interrupts = in_process(job_ops.interrupts)
    resume = in_process(job_ops.resume)
    fork = in_process(job_ops.fork)
    summaries = in_process(read_ops.summaries)
    summary = in_process(read_ops.summary)
    trace = in_process(read_ops.trace)
    daily_usage = in_process(read_ops.daily_usage)
    me = in_process(read_ops.me)
    teams = in_process(team_ops.teams)
    team = in_process(team_ops.team)
    agents = in_process(team_ops.agents)

    def _at(self) -> At:
        """Who the view's declared operations run for: the tenant, as its key would."""
        return At(self._client, tenant=self.tenant, admin=False, source=f"tenant:{self.tenant}")

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return self._portal.run(call)
