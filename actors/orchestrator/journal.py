"""The orchestrator's journal: jobs, plans, subtask results, teams, policies and approvals.

Written as a job goes, so that a restarted orchestrator resumes every unfinished job from
where it was: its plan is not asked for again and its finished subtasks are not run again.
One orchestrator owns one journal: a SQLite file, or its tables in the cluster's PostgreSQL.
What it reads back to resume or fork a job is :mod:`.restored`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from raytroupe.actors.notify.store import WebhookStore
from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.orchestrator.restored import IMAGES, RestoredJobs, Unfinished
from raytroupe.actors.state import Database, Migration, first, open_database, upsert
from raytroupe.protocols import (
    ApprovalDecision,
    ApprovalRequest,
    Budget,
    Conflict,
    Feedback,
    ImagePart,
    JobEvent,
    JobResult,
    JobsQuery,
    JobSummary,
    Plan,
    SubtaskResult,
    TeamSpec,
    TenantPolicy,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.skill import SkillSpec
from raytroupe.protocols.webhooks import WEBHOOK_EVENTS

__all__ = ["Journal"]

log = structlog.get_logger("raytroupe.orchestrator")

_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, task TEXT NOT NULL, "
        "team TEXT NOT NULL, tenant TEXT NOT NULL, budget TEXT, "
        "submitted_at DOUBLE PRECISION NOT NULL, result TEXT)",
        "CREATE TABLE IF NOT EXISTS plans (job_id TEXT PRIMARY KEY, plan TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS approvals (job_id TEXT NOT NULL, approval_id TEXT NOT NULL, "
        "request TEXT NOT NULL, decision TEXT NOT NULL, PRIMARY KEY (job_id, approval_id))",
        "CREATE TABLE IF NOT EXISTS job_images (job_id TEXT PRIMARY KEY, images TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS teams (name TEXT PRIMARY KEY, spec TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS policies (tenant TEXT PRIMARY KEY, policy TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS inline_teams (name TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
        "spec TEXT NOT NULL, used_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS subtasks (job_id TEXT NOT NULL, subtask_id TEXT NOT NULL, "
        "result TEXT NOT NULL, PRIMARY KEY (job_id, subtask_id))",
    ),
    # the team's name beside its spec: which teams unfinished jobs use, of every shard
    ("ALTER TABLE jobs ADD COLUMN team_name TEXT",),
    # a skill job's skill version and structured input: what it resumes with
    (
        "CREATE TABLE IF NOT EXISTS job_skills (job_id TEXT PRIMARY KEY, skill TEXT NOT NULL, "
        "input TEXT)",
    ),
    # people's verdicts on finished jobs
    (
        "CREATE TABLE IF NOT EXISTS job_feedback (job_id TEXT NOT NULL, at DOUBLE PRECISION "
        "NOT NULL, feedback TEXT NOT NULL, PRIMARY KEY (job_id, at))",
    ),
    # a jobs list without reading results: who submitted each job, its skill, and once it
    # ended its status, cost and size (rows journaled before are read from their results)
    (
        "ALTER TABLE jobs ADD COLUMN submitted_by TEXT",
        "ALTER TABLE jobs ADD COLUMN skill_ref TEXT",
        "ALTER TABLE jobs ADD COLUMN status TEXT",
        "ALTER TABLE jobs ADD COLUMN finished_at DOUBLE PRECISION",
        "ALTER TABLE jobs ADD COLUMN cost_usd DOUBLE PRECISION",
        "ALTER TABLE jobs ADD COLUMN tokens BIGINT",
        "ALTER TABLE jobs ADD COLUMN subtask_count INTEGER",
        "CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs (tenant, submitted_at)",
        "CREATE INDEX IF NOT EXISTS jobs_by_time ON jobs (submitted_at)",
    ),
    # whether a job was admitted as an admin's (1) or a tenant's (0): a tenant's is checked
    # against its policy of today when it starts again (admission.readmit); NULL (journaled
    # before this) counts as a tenant's
    ("ALTER TABLE jobs ADD COLUMN admin INTEGER",),
    # the job's context as one typed value (protocols.job_context.JobContext, JSON); the task
    # column keeps what was asked, for lists. NULL (journaled before this): the task column
    # holds the prompt as it was then, its context glued on, and is the context's request
    ("ALTER TABLE jobs ADD COLUMN context TEXT",),
    # each job's event log, written before a watcher sees an event: a restarted job goes on
    # numbering after its last, and a reader resuming after any seq finds every later one
    (
        "CREATE TABLE IF NOT EXISTS job_events (job_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "event TEXT NOT NULL, PRIMARY KEY (job_id, seq))",
    ),
    # which agent runs each subtask of a job: a restarted shard dispatches it there first
    (
        "CREATE TABLE IF NOT EXISTS subtask_takers (job_id TEXT NOT NULL, task_id TEXT NOT NULL, "
        "agent TEXT NOT NULL, PRIMARY KEY (job_id, task_id))",
    ),
    # the tenant's end user a job is for (its context's user), for jobs lists by user
    ("ALTER TABLE jobs ADD COLUMN end_user TEXT",),
)
_SUMMARY = (
    "SELECT id, status, tenant, team_name, skill_ref, submitted_by, end_user, submitted_at, "
    "finished_at, cost_usd, tokens, subtask_count, SUBSTR(task, 1, 200) FROM jobs"
)
"""A jobs-list line's columns."""
_TERMINAL = ("succeeded", "failed", "cancelled")


def _summary(row: Any) -> JobSummary:
    fields = ("id", "status", "tenant", "team", "skill", "submitted_by", "user",
              "submitted_at", "finished_at", "cost_usd", "tokens", "subtasks", "task")  # fmt: skip
    line = dict(zip(fields, row, strict=True))
    line["status"] = line["status"] or "pending"
    line["team"] = line["team"] or ""
    return JobSummary.model_validate(line)


class Journal:
    """Jobs, plans and subtask results, at a state location.

    The location is opened by ``raytroupe.actors.state.open_database``. ``:memory:`` serves
    tests; a ``postgresql://`` URL survives the orchestrator moving node.
    """

    def __init__(self, location: str | Path, *, shards: int = 1) -> None:
        self._db = open_database(location, "journal", _MIGRATIONS)
        self.webhooks = WebhookStore(self._db)
        self._shards = shards
        self.delivering: Callable[[], None] | None = None
        """Called when an event journaled here made deliveries (a shard's deliverer wakes)."""
        self._restored = RestoredJobs(self._db)
        self._fill_summaries()

    def _fill_summaries(self) -> None:
        """Give jobs journaled before the summary columns existed their status, cost and size."""
        rows = self._db.execute("SELECT id, result FROM jobs WHERE status IS NULL")
        for job_id, result in rows:
            if result is None:
                self._db.execute("UPDATE jobs SET status = 'pending' WHERE id = ?", (job_id,))
            else:
                self.finish(JobResult.model_validate_json(result))

    @property
    def db(self) -> Database:
        """The database it is in (other stores of the orchestrator keep their tables there)."""
        return self._db

    def job(
        self,
        job_id: str,
        *,
        context: JobContext,
        team: TeamSpec,
        tenant: str,
        budget: Budget | None,
        submitted_at: float,
        images: tuple[ImagePart, ...] = (),
        skill: SkillSpec | None = None,
        input: Any = None,  # noqa: A002 - the job's field of that name
        submitted_by: str | None = None,
        admin: bool = False,
    ) -> None:
        """Record a submitted job (with its images, and a skill job's skill and input).

        ``admin``: it was admitted as an admin's (see ``Job.admin``).
        """
        if skill is not None:
            self._db.execute(
                "INSERT INTO job_skills VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (job_id, skill.model_dump_json(), None if input is None else json.dumps(input)),
            )
        if images:
            self._db.execute(
                "INSERT INTO job_images VALUES (?, ?) ON CONFLICT DO NOTHING",
                (job_id, IMAGES.dump_json(images).decode()),
            )
        self._db.execute(
            "INSERT INTO jobs (id, task, team, tenant, budget, submitted_at, result, team_name, "
            "submitted_by, skill_ref, status, admin, context, end_user) "
            "VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT DO NOTHING",
            (job_id, context.request, team.model_dump_json(), tenant,
             None if budget is None else budget.model_dump_json(), submitted_at, team.name,
             submitted_by, None if skill is None else skill.ref, int(admin),
             context.model_dump_json(exclude={"lessons"}), context.user),
        )  # fmt: skip

    def plan(self, job_id: str, plan: Plan) -> None:
        """Record the job's plan."""
        self._db.execute(
            upsert("plans", ("job_id", "plan"), key=("job_id",)),
            (job_id, plan.model_dump_json()),
        )

    def subtask(self, job_id: str, result: SubtaskResult) -> None:
        """Record a subtask that finished (succeeded, failed or skipped)."""
        self._db.execute(
            upsert("subtasks", ("job_id", "subtask_id", "result"), key=("job_id", "subtask_id")),
            (job_id, result.id, result.model_dump_json()),
        )

    def decide(self, job_id: str, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        """Record a human's decision on a tool call, with the exact call it was about."""
        self._db.execute(
            upsert(
                "approvals",
                ("job_id", "approval_id", "request", "decision"),
                key=("job_id", "approval_id"),
            ),
            (job_id, decision.approval_id, request.model_dump_json(), decision.model_dump_json()),
        )

    def decided(
        self, job_id: str, approval_id: str
    ) -> tuple[ApprovalRequest, ApprovalDecision] | None:
        """The recorded decision on a tool call, with the call it was about, if one was made."""
        row = first(
            self._db.execute(
                "SELECT request, decision FROM approvals WHERE job_id = ? AND approval_id = ?",
                (job_id, approval_id),
            )
        )
        if row is None:
            return None
        request = ApprovalRequest.model_validate_json(row[0])
        return request, ApprovalDecision.model_validate_json(row[1])

    def feedback(self, job_id: str, feedback: Feedback) -> None:
        """Record a person's feedback on a job."""
        self._db.execute(
            "INSERT INTO job_feedback (job_id, at, feedback) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (job_id, feedback.at, feedback.model_dump_json()),
        )

    def feedbacks(self, job_id: str) -> list[Feedback]:
        """A job's feedback, oldest first."""
        rows = self._db.execute(
            "SELECT feedback FROM job_feedback WHERE job_id = ? ORDER BY at", (job_id,)
        )
        return [Feedback.model_validate_json(f) for (f,) in rows]

    def event(self, event: JobEvent) -> None:
        """Record an event of a job's log (before a watcher sees it).

        Raises:
            Conflict: the job's event of that seq was journaled already (by another process
                running the job: this one's log has gone apart from the journal's).
        """
        insert = (
            "INSERT INTO job_events (job_id, seq, event) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING RETURNING seq"
        )
        row = (event.job_id, event.seq, event.model_dump_json())
        made = 0
        if event.type in WEBHOOK_EVENTS:  # the event and its deliveries land together
            with self._db.transaction() as tx:
                kept = tx.execute(insert, row)
                if kept:
                    made = WebhookStore.enqueue(tx, event, self._shards)
        else:
            kept = self._db.execute(insert, row)
        if made and self.delivering is not None:
            self.delivering()
        if not kept:
            raise Conflict(
                f"event {event.seq} of job {event.job_id} was journaled already",
                job_id=event.job_id,
                field="seq",
            )

    def taken(self, job_id: str, task_id: str, agent: str) -> None:
        """Record that ``agent`` runs the job's subtask ``task_id`` (the latest to say so)."""
        self._db.execute(
            upsert("subtask_takers", ("job_id", "task_id", "agent"), key=("job_id", "task_id")),
            (job_id, task_id, agent),
        )

    def finish(self, result: JobResult) -> None:
        """Record the job's result; it will not be resumed."""
        self._db.execute(
            "UPDATE jobs SET result = ?, status = ?, finished_at = ?, cost_usd = ?, tokens = ?, "
            "subtask_count = ? WHERE id = ?",
            (result.model_dump_json(), result.status, result.timings.finished_at,
             result.usage.cost_usd, result.usage.total_tokens, len(result.subtasks),
             result.job_id),
        )  # fmt: skip

    def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """Jobs newest first (of ``tenant``, when given), as a jobs list shows them."""
        where: list[str] = []
        params: list[Any] = []
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if query.status in _TERMINAL:
            where.append("status = ?")
            params.append(query.status)
        elif query.status is not None:
            where.append("result IS NULL")
        if query.user is not None:
            where.append("end_user = ?")
            params.append(query.user)
        if query.before is not None:
            where.append("submitted_at < ?")
            params.append(query.before)
        if query.text:
            escaped = query.text.lower().replace("\\", "\\\\").replace("%", "\\%")
            like = "%" + escaped.replace("_", "\\_") + "%"
            fields = ("id", "task", "team_name", "skill_ref", "submitted_by")
            matches = (f"LOWER(COALESCE({f}, '')) LIKE ? ESCAPE '\\'" for f in fields)
            where.append("(" + " OR ".join(matches) + ")")
            params += [like] * len(fields)
        sql = _SUMMARY + (" WHERE " + " AND ".join(where) if where else "")
        rows = self._db.execute(
            sql + " ORDER BY submitted_at DESC, id DESC LIMIT ?", (*params, query.limit)
        )
        return [_summary(row) for row in rows]

    def summary(self, job_id: str) -> JobSummary | None:
        """One job's jobs-list line (None: not journaled)."""
        row = first(self._db.execute(_SUMMARY + " WHERE id = ?", (job_id,)))
        return None if row is None else _summary(row)

    def load(self, job_id: str) -> tuple[TeamSpec, str, JobResult] | None:
        """A finished job's team, tenant and result (None if unknown or unfinished)."""
        return self._restored.load(job_id)

    def known(self, job_id: str) -> tuple[bool, JobResult | None]:
        """(whether the job is journaled, its result if it has one)."""
        return self._restored.known(job_id)

    def unfinished(self, owns: Callable[[str], bool] = lambda _: True) -> list[Unfinished]:
        """See :meth:`RestoredJobs.unfinished`."""
        return self._restored.unfinished(owns)

    def resumable(self, owns: Callable[[str], bool] = lambda _: True) -> list[Job]:
        """Every unfinished job whose id ``owns``, its event log continued in this journal."""
        jobs = self._restored.resumable(owns)
        for job in jobs:
            job.record = self.event
        return jobs

    def finished(self, job_id: str) -> Job | None:
        """See :meth:`RestoredJobs.finished`."""
        job = self._restored.finished(job_id)
        if job is not None:
            job.record = self.event
        return job

    def running_teams(self) -> set[str]:
        """The names of the teams of unfinished jobs (of every shard)."""
        rows = self._db.execute(
            "SELECT DISTINCT team_name FROM jobs WHERE result IS NULL AND team_name IS NOT NULL"
        )
        return {name for (name,) in rows}

    def put_team(self, team: TeamSpec) -> None:
        """Record a team registered at run time (replacing one of the same name)."""
        self._db.execute(
            upsert("teams", ("name", "spec"), key=("name",)),
            (team.name, team.model_dump_json()),
        )

    def drop_team(self, name: str) -> None:
        """Forget a registered team."""
        self._db.execute("DELETE FROM teams WHERE name = ?", (name,))

    def teams(self) -> list[TeamSpec]:
        """Every registered team, by name (one that is no longer valid is left out, logged)."""
        rows = self._db.execute("SELECT name, spec FROM teams ORDER BY name")
        teams = []
        for name, spec in rows:
            try:
                teams.append(TeamSpec.model_validate_json(spec))
            except ValidationError as exc:  # checks added since it was registered
                log.warning("registered_team_invalid", team=name, error=str(exc))
        return teams

    def put_policy(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Record the policy of ``tenant`` (``*``: the default); None drops it."""
        if policy is None:
            self._db.execute("DELETE FROM policies WHERE tenant = ?", (tenant,))
        else:
            self._db.execute(
                upsert("policies", ("tenant", "policy"), key=("tenant",)),
                (tenant, policy.model_dump_json()),
            )

    def policies(self) -> dict[str, TenantPolicy]:
        """Every tenant policy recorded, by tenant."""
        rows = self._db.execute("SELECT tenant, policy FROM policies")
        return {tenant: TenantPolicy.model_validate_json(p) for tenant, p in rows}

    def use_inline(self, tenant: str, team: TeamSpec, at: float) -> None:
        """Record that ``tenant``'s inline ``team`` (scoped) was provisioned for a job at ``at``."""
        self._db.execute(
            upsert("inline_teams", ("name", "tenant", "spec", "used_at"), key=("name",)),
            (team.name, tenant, team.model_dump_json(), at),
        )

    def drop_inline(self, name: str) -> None:
        """Forget an inline team whose agents were stopped."""
        self._db.execute("DELETE FROM inline_teams WHERE name = ?", (name,))

    def inline_teams(self) -> list[tuple[str, TeamSpec, float]]:
        """Tenants' inline teams whose agents may be running: (tenant, team, last used)."""
        rows = self._db.execute("SELECT tenant, spec, used_at FROM inline_teams ORDER BY used_at")
        return [(t, TeamSpec.model_validate_json(spec), at) for t, spec, at in rows]

    def close(self) -> None:
        """Close the file."""
        self._db.close()
