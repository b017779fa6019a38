"""The driver API: connect to Ray, submit jobs, wait for results, watch events."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import ray
from pydantic import BaseModel

from raytroupe.actors.spawn import NAMESPACE
from raytroupe.protocols import (
    AgentSpec,
    Attachment,
    Budget,
    ConfigError,
    JobNotFound,
    JobStatus,
    KnowledgeNotFound,
    LessonNotFound,
    MemoryHit,
    MemoryQuery,
    MemoryWrite,
    RouterStats,
    SkillProblemInfo,
    SkillSpec,
    TeamSpec,
    TenantPolicy,
)
from raytroupe.protocols.evals import EvalRun, EvalSuite
from raytroupe.protocols.intent import IntentConfig
from raytroupe.protocols.job_context import checked_end_user
from raytroupe.protocols.job_order import JobOrder
from raytroupe.protocols.knowledge import IngestReport, KnowledgeDocument
from raytroupe.protocols.output_schema import schema_of
from raytroupe.protocols.sessions import HISTORY_TOKENS
from raytroupe.protocols.traceparent import current_traceparent
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.config import Team
from raytroupe.runtime.handle import JobHandle
from raytroupe.runtime.knowledge import ingest_all
from raytroupe.runtime.operations import At, handle, in_process, widens
from raytroupe.runtime.operations import evals as eval_ops
from raytroupe.runtime.operations import experiments as experiment_ops
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
from raytroupe.runtime.operations.declare import Arguments
from raytroupe.runtime.sessions import Session
from raytroupe.runtime.tenant import TenantView

__all__ = ["JobHandle", "Runtime"]


def _suite_read(arguments: Arguments) -> Arguments:
    """``optimise_skill`` took the suite's file before 0.3: read it (deprecated)."""
    suite = arguments.get("suite")
    if isinstance(suite, str | Path):
        from raytroupe.protocols.eval_suites import read_suite  # noqa: PLC0415 - files only

        warnings.warn(
            "optimise_skill(name, <path>) is deprecated: pass read_suite(path), an EvalSuite",
            DeprecationWarning,
            stacklevel=3,
        )
        arguments["suite"] = read_suite(suite)
    return arguments


T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Runtime:
    """A connection to raytroupe's actors on a Ray cluster (local or remote).

    Blocking calls over :class:`~raytroupe.runtime.client.SystemClient` (``rt.client``, for code
    that prefers to await), run on a loop of its own, so a notebook's or a server's running loop is
    no obstacle.
    """

    def __init__(self, client: SystemClient, *, owns_connection: bool) -> None:
        self.client = client
        self._portal = Portal()
        self._owns_connection = owns_connection

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object | TracebackType | None) -> None:
        self.shutdown()

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return self._portal.run(call)

    def _at(self) -> At:
        """Who the driver's declared operations run for: an admin, as the driver."""
        return At(self.client, tenant="default", admin=True, source="driver", every_tenant=True)

    @widens(submit_ops.submit)
    def submit(
        self,
        task: str,
        team: TeamSpec | str | None = None,
        *,
        tenant: str = "default",
        budget: Budget | None = None,
        teams: Mapping[str, TeamSpec] | None = None,
        intent: IntentConfig | None = None,
        attachments: Sequence[Attachment] = (),
        routing: IntentConfig | None = None,
        skill: str | None = None,
        input: Any = None,  # noqa: A002 - a skill's structured input, as the API calls it
        session: str | None = None,
        user: str | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> JobHandle:
        """Start a job; returns at once (a routed job once its team is chosen).

        ``team`` is a team, or the name of one registered with :meth:`put_team` (by any
        driver, the CLI or over HTTP). Text ``attachments`` join the task; images are shown
        to every agent that works on the job.

        ``budget`` (default: the team's) bounds the tokens and dollars of every model call
        made for the job; a call that would not fit is refused before it is made, and the
        job stops with ``budget_exceeded``. Without ``team``, ``intent`` picks one of
        ``teams`` by keyword rules, embedding similarity, then a model classifier; the
        choice and its method are on ``JobResult.route``. (``routing`` is the earlier name
        of ``intent``.)

        ``skill`` (``name`` or ``name@version``) runs a registered skill on the task and
        ``input`` (its structured input, checked by its ``input_schema``); with neither a
        team, a skill nor an intent, the job is routed among the registered skills and
        teams. Every result carries its answer in the standard shape (``result.output``).

        ``output_type`` (a pydantic model class) is the answer's type: its JSON Schema
        replaces the team's (or skill's) ``output_schema`` for this job, so the quality gate
        holds the answer to it, and ``handle.output()`` returns an instance.

        ``session`` (the id of one of ``tenant``'s sessions, see :meth:`session`) shows the
        job the conversation so far and makes it the session's next turn. ``user`` names the
        tenant's end user the job is for: kept with the job and its usage (``usage(user=)``),
        and the account of per-user spend limits.

        A job submitted where an OpenTelemetry span is current (this process's own set-up)
        continues its trace: with tracing on in the actors, the job's spans are its children.

        :meth:`asubmit` is the same, awaited.

        Raises:
            ConfigError: ``task`` is empty (and there is no ``input``), or nothing is
                registered to route it to.
            TeamNotFound: ``team`` names no registered team.
            SkillNotFound: ``skill`` names no registered skill (or version).
            InvalidInput: ``input`` fails the skill's input schema (``detail['fields']``).
        """
        submitting = self._submitting(
            task, team, tenant=tenant, budget=budget, teams=teams, intent=intent or routing,
            attachments=attachments, skill=skill, input=input, session=session,
            user=user, output_type=output_type,
        )  # fmt: skip
        return self._handle(self._run(submitting), output_type)

    async def asubmit(
        self,
        task: str,
        team: TeamSpec | str | None = None,
        *,
        tenant: str = "default",
        budget: Budget | None = None,
        teams: Mapping[str, TeamSpec] | None = None,
        intent: IntentConfig | None = None,
        attachments: Sequence[Attachment] = (),
        skill: str | None = None,
        input: Any = None,  # noqa: A002 - a skill's structured input, as the API calls it
        session: str | None = None,
        user: str | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> JobHandle:
        """:meth:`submit`, awaited: for drivers that run on an event loop.

        The handle's ``a``-methods (``await job.aresult()``, ``async for e in
        job.aevents()``) wait without blocking the loop.
        """
        submitting = self._submitting(
            task, team, tenant=tenant, budget=budget, teams=teams, intent=intent,
            attachments=attachments, skill=skill, input=input, session=session,
            user=user, output_type=output_type,
        )  # fmt: skip
        return self._handle(await self._portal.arun(submitting), output_type)

    def run(
        self,
        task: str,
        team: TeamSpec | str | None = None,
        *,
        output_type: type[M],
        tenant: str = "default",
        skill: str | None = None,
        input: Any = None,  # noqa: A002 - a skill's structured input, as the API calls it
        timeout: float | None = 300.0,
    ) -> M:
        """Submit a job and return its answer as an instance of ``output_type``.

        Raises:
            QualityGateFailed: the answer is not a valid ``output_type``.
            JobFailed, JobTimeout, JobCancelled: as :meth:`JobHandle.result`.
        """
        job = self.submit(
            task, team, tenant=tenant, skill=skill, input=input, output_type=output_type
        )
        return job.result(timeout).output_as(output_type)

    async def arun(
        self,
        task: str,
        team: TeamSpec | str | None = None,
        *,
        output_type: type[M],
        tenant: str = "default",
        skill: str | None = None,
        input: Any = None,  # noqa: A002 - a skill's structured input, as the API calls it
        timeout: float | None = 300.0,
    ) -> M:
        """:meth:`run`, awaited."""
        job = await self.asubmit(
            task, team, tenant=tenant, skill=skill, input=input, output_type=output_type
        )
        return (await job.aresult(timeout)).output_as(output_type)

    def _submitting(
        self,
        task: str,
        team: TeamSpec | str | None,
        *,
        tenant: str,
        budget: Budget | None,
        teams: Mapping[str, TeamSpec] | None,
        intent: IntentConfig | None,
        attachments: Sequence[Attachment],
        skill: str | None,
        input: Any,  # noqa: A002
        session: str | None,
        user: str | None,
        output_type: type[BaseModel] | None,
    ) -> Coroutine[Any, Any, str]:
        """The client call that starts the job (see :meth:`submit`), checked first."""
        if not task.strip() and input is None:
            raise ConfigError("task is empty")

        def plain(t: TeamSpec) -> TeamSpec:
            return t.spec() if isinstance(t, Team) else t

        at = dataclasses.replace(
            self._at(), tenant=tenant, traceparent=current_traceparent()
        )  # the caller's span, if it traces

        async def submitting() -> str:
            await self.client.ship(_functions(team, *(teams or {}).values()))
            schema = None if output_type is None else schema_of(output_type)
            order = JobOrder(
                task=task, team=team if team is None or isinstance(team, str) else plain(team),
                budget=budget, attachments=tuple(attachments), skill=skill, input=input,
                session=session, teams={k: plain(t) for k, t in (teams or {}).items()} or None,
                intent=intent, output_schema=schema, user=user,
            )  # fmt: skip
            return await submit_ops.start(at, order)

        return submitting()

    def _handle(self, job_id: str, output_type: type[BaseModel] | None = None) -> JobHandle:
        return JobHandle(job_id, self.client, self._portal, output_type=output_type)

    @handle(session_ops.session)
    def session(
        self,
        session_id: str | None = None,
        *,
        tenant: str = "default",
        title: str = "",
        history_tokens: int = HISTORY_TOKENS,
        create: bool = True,
        user: str | None = None,
    ) -> Session:
        """A conversation of ``tenant``: jobs submitted through it see the turns before them.

        ``session_id`` names one to go on with (made if new, unless ``create`` is False);
        None makes a fresh one. Each job is shown up to ``history_tokens`` of history: the
        newest turns whole, the oldest summarized. ``user``: the tenant's end user a new
        session is for (its jobs are that user's; another user's job is refused). Sessions
        are kept by the orchestrator and survive its restarts.

        Raises:
            SessionNotFound: ``create`` is False and ``tenant`` has no such session.
            Forbidden: the session is another end user's.
        """
        if not create and session_id is not None:
            info = self._run(self.client.session(session_id, tenant=tenant))
        else:
            info = self._run(
                self.client.create_session(
                    tenant, session_id, title=title, history_tokens=history_tokens,
                    user=None if user is None else checked_end_user(user),
                )
            )  # fmt: skip
        return Session(
            info,
            self.client,
            self._portal,
            lambda task, team=None, **options: self.submit(task, team, tenant=tenant, **options),
        )

    sessions = in_process(session_ops.sessions, tenant_keyword=True)
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
    put_guardrail = in_process(guardrail_ops.put_guardrail)
    guardrails = in_process(guardrail_ops.guardrails)
    guardrail = in_process(guardrail_ops.guardrail)
    delete_guardrail = in_process(guardrail_ops.delete_guardrail)
    guardrail_decisions = in_process(guardrail_ops.guardrail_decisions)

    def evaluate(
        self,
        suite: EvalSuite | str | Path,
        *,
        skill: str | None = None,
        team: str | None = None,
        concurrency: int = 4,
        budget: Budget | None = None,
        timeout: float | None = None,
        on_progress: Callable[[EvalRun], None] | None = None,
    ) -> EvalRun:
        """Run an eval suite (a spec, or a JSONL/YAML file) on the cluster and wait for it.

        Its cases run as jobs of ``skill`` (default: the suite's; its version is fixed when
        the run starts) or ``team``, ``concurrency`` at once, within ``budget``;
        ``on_progress`` is called with the run as cases finish.

        Raises:
            ConfigError: the suite file is not valid (each problem with its line).
            SkillNotFound, TeamNotFound: the target is not registered.
        """
        if not isinstance(suite, EvalSuite):
            from raytroupe.protocols.eval_suites import read_suite  # noqa: PLC0415 - files only

            suite = read_suite(suite)
        started = self.start_eval(
            suite, skill=skill, team=team, concurrency=concurrency, budget=budget
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            run = self.eval_run(started.id, wait=0.5)
            if on_progress is not None:
                on_progress(run)
            if run.status != "running" or (deadline is not None and time.monotonic() > deadline):
                return run

    optimise_skill = in_process(skill_ops.optimise_skill, legacy=_suite_read)
    promote_skill = in_process(skill_ops.promote_skill)

    start_experiment = in_process(experiment_ops.start_experiment)
    experiments = in_process(experiment_ops.experiments)
    experiment = in_process(experiment_ops.experiment)
    stop_experiment = in_process(experiment_ops.stop_experiment)

    start_eval = in_process(eval_ops.start_eval)
    evals = in_process(eval_ops.evals)
    eval_run = in_process(eval_ops.eval_run)
    compare_evals = in_process(eval_ops.compare_evals)

    def eval_runs(self) -> list[EvalRun]:
        """Deprecated: :meth:`evals`."""
        warnings.warn("eval_runs() is deprecated: evals()", DeprecationWarning, stacklevel=2)
        return self.evals()

    skills = in_process(skill_ops.skills)
    skill = in_process(skill_ops.skill)

    def put_skill(self, skill: SkillSpec | str | Path, *, source: str = "driver") -> bool:
        """Register a skill version (a spec, or a skill file's path) and make it current.

        True if the version is new; applying a registered version unchanged makes it current.

        Raises:
            ConfigError: the file is not a valid skill (each problem with its line), a
                required tool is missing, or its agent cannot start.
            Conflict: that version is registered with other content (versions are immutable).
            TeamNotFound: a ``team:<name>`` skill names no registered team.
        """
        if not isinstance(skill, SkillSpec):
            from raytroupe.protocols.skill_files import read_skill  # noqa: PLC0415 - files only

            source = str(skill)
            skill = read_skill(skill)
        return self._run(self.client.put_skill(skill, source=source))

    apply_skill = in_process(skill_ops.apply_skill)
    rollback_skill = in_process(skill_ops.rollback_skill)
    delete_skill = in_process(skill_ops.delete_skill)
    skill_history = in_process(skill_ops.skill_history)

    lessons = in_process(skill_ops.lessons, tenant_keyword=True)
    delete_lesson = in_process(
        skill_ops.delete_lesson, tenant_keyword=True, missing=(LessonNotFound, False)
    )

    def skill_problems(self) -> list[SkillProblemInfo]:
        """Files of the skills directory that could not be loaded (their skills kept theirs)."""
        return self._run(self.client.skill_problems())

    @handle(read_ops.job)
    def job(self, job_id: str) -> JobHandle:
        """A handle on a job submitted earlier (by any driver); ``info()`` reads it."""
        self._run(self.client.status(job_id))
        return JobHandle(job_id, self.client, self._portal)

    events = in_process(read_ops.events)

    def jobs(self, tenant: str | None = None) -> dict[str, JobStatus]:
        """Known jobs (of ``tenant``, when given) and their status, oldest first.

        :meth:`statuses` for ``tenant``: ``as_tenant(tenant).statuses()``.
        """
        return self._run(self.client.jobs(tenant=tenant))

    statuses = in_process(read_ops.statuses)

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
    delete_team = in_process(team_ops.delete_team)
    agents = in_process(team_ops.agents)
    delete_agent = in_process(team_ops.delete_agent)
    create_team = in_process(team_ops.create_team)
    apply_team = in_process(team_ops.apply_team)
    create_agent = in_process(team_ops.create_agent)
    apply_agent = in_process(team_ops.apply_agent)

    def put_team(self, team: TeamSpec, *, create: bool = False) -> bool:
        """Register ``team`` under its name, or hot-update the team of that name; True if new.

        Its agents are spawned, or reconfigured where they run; agents it no longer has are
        stopped; nothing else restarts.

        Raises:
            Conflict: ``create`` and the name is taken, or an agent name is another team's.
            ConfigError: the team cannot be provisioned (e.g. a tool no sandbox has).
        """
        spec = team.spec() if isinstance(team, Team) else team

        async def putting() -> bool:
            await self.client.ship(_functions(team))
            return await self.client.put_team(spec, create=create)

        return self._run(putting())

    def put_agent(self, team: str, agent: AgentSpec, *, create: bool = False) -> bool:
        """Add an agent to a registered team, or hot-update it in place; True if new.

        Raises:
            TeamNotFound: no such team.
            Conflict: ``create`` and the agent exists, or another team has that name.
        """
        return self._run(self.client.put_agent(team, agent, create=create))

    dead_letters = in_process(observe_ops.dead_letters)
    usage = in_process(observe_ops.usage, missing=(JobNotFound, []))
    spend_windows = in_process(spend_ops.spend_windows)
    spend_limits = in_process(spend_ops.spend_limits)
    put_spend_limit = in_process(spend_ops.put_spend_limit)
    delete_spend_limit = in_process(spend_ops.delete_spend_limit)

    def remember(
        self, memory: MemoryWrite | str, *, tenant: str = "default", user: str | None = None
    ) -> str:
        """Store a long-term memory for ``tenant``; return its id.

        ``user``: the tenant's end user it is private to (only that user's jobs recall it).
        """
        memory = MemoryWrite(text=memory) if isinstance(memory, str) else memory
        user = None if user is None else checked_end_user(user)
        return self._run(self.client.memory.remember(tenant, memory, user))

    def recall(
        self, query: MemoryQuery | str, *, tenant: str = "default", user: str | None = None
    ) -> list[MemoryHit]:
        """The memories of ``tenant`` most relevant to ``query``, best first.

        ``user``: as a job of that end user recalls them (theirs and the tenant's shared
        ones); None: every memory of the tenant.
        """
        query = MemoryQuery(query=query) if isinstance(query, str) else query
        user = None if user is None else checked_end_user(user)
        return self._run(self.client.memory.recall(tenant, query, user))

    @widens(knowledge_ops.ingest)
    def ingest(
        self,
        kb: str,
        documents: Iterable[str | Path | KnowledgeDocument],
        *,
        tenant: str | None = None,
        base: str | Path | None = None,
        user: str | None = None,
    ) -> IngestReport:
        """Add files (by path; directories are searched) or documents to a knowledge base.

        ``kb`` is made if the tenant has none of that name. Text, Markdown, HTML, PDF and
        JSON are chunked by their structure and embedded offline (MiniLM). A document whose
        source was ingested before replaces it (and is skipped if it is unchanged). Agents
        search it with the ``knowledge_search`` tool, or are shown its passages when their
        memory policy names it (``MemoryPolicy.knowledge``). A file's source (what answers
        cite) is its path, relative to ``base`` if given. The driver's tenant is
        ``default``; ``as_tenant(t).ingest`` ingests for ``t`` (``tenant=`` is deprecated).
        Any number of documents go, 64 a request (``MAX_DOCUMENTS``, the ``ingest``
        operation's limit). ``user``: the tenant's end user a new base is for (only that
        user's jobs search it).

        Raises:
            InvalidInput: a file that cannot be read, an unknown format, a bad ``kb`` name, a
                document that does not parse (nothing of its request is stored).
        """
        at = self._at()
        if tenant is not None:
            warnings.warn(
                "ingest(tenant=...) is deprecated: as_tenant(tenant).ingest(...)",
                DeprecationWarning,
                stacklevel=2,
            )
            at = dataclasses.replace(at, tenant=tenant)
        return ingest_all(at, self._run, kb, documents, base=base, user=user)

    knowledge_bases = in_process(knowledge_ops.knowledge_bases, tenant_keyword=True)
    documents = in_process(knowledge_ops.documents, tenant_keyword=True)
    search = in_process(knowledge_ops.search, tenant_keyword=True)
    delete_document = in_process(
        knowledge_ops.delete_document, tenant_keyword=True, missing=(KnowledgeNotFound, 0)
    )
    drop_knowledge_base = in_process(
        knowledge_ops.drop_knowledge_base, tenant_keyword=True, missing=(KnowledgeNotFound, False)
    )

    def router_stats(self) -> RouterStats:
        """The router's counters and registry."""
        return self._run(self.client.router_stats())

    def as_tenant(self, tenant: str) -> TenantView:
        """The same connection, acting for ``tenant`` as its API key would over HTTP.

        Its jobs pass the tenant's policy (inline teams are checked and scoped, budgets
        capped) and it reaches only the tenant's jobs and usage. A driver holds the
        cluster's Ray and could call the actors directly: this view is for drivers that
        serve tenants (a web backend, a batch of a customer's jobs), not a sandbox.
        """
        return TenantView(tenant, self.client, self._portal)

    policy = in_process(policy_ops.policy)
    policies = in_process(policy_ops.policies)
    put_policy = in_process(policy_ops.put_policy)
    delete_policy = in_process(policy_ops.delete_policy)

    def tenant_policy(self, tenant: str) -> TenantPolicy:
        """Deprecated: ``rt.as_tenant(tenant).policy()``."""
        warnings.warn(
            "tenant_policy(t) is deprecated: rt.as_tenant(t).policy()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.as_tenant(tenant).policy()

    def set_tenant_policy(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Deprecated: :meth:`put_policy`, or :meth:`delete_policy` for None."""
        warnings.warn(
            "set_tenant_policy is deprecated: put_policy(t, policy), delete_policy(t)",
            DeprecationWarning,
            stacklevel=2,
        )
        if policy is None:
            self.delete_policy(tenant)
        else:
            self.put_policy(tenant, policy)

    def actor(self, name: str) -> Any:
        """The Ray handle of a named actor (``router``, ``llm``, ``agent/<name>`` ...)."""
        return ray.get_actor(name, namespace=NAMESPACE)

    def serve_mcp(self, *, tenant: str | None = None) -> None:
        """Serve the teams and skills as an MCP server on stdin and stdout until stdin ends.

        What ``troupe mcp`` runs for a desktop client, which starts it as a child process
        (see :mod:`raytroupe.runtime.mcp`). Its jobs run as the driver's (every team and
        skill), or with ``tenant`` as that tenant's, under its policy.
        """
        from raytroupe.runtime.mcp import serve_stdio  # noqa: PLC0415 - mcp loads when asked

        at = self._at()
        if tenant is not None:
            at = At(self.client, tenant=tenant, admin=False, source="mcp")
        self._run(serve_stdio(at))

    def shutdown(self) -> None:
        """Disconnect from Ray if :func:`connect` connected; a local Ray it started stops.

        A Ray this process was connected to before :func:`connect` is left alone, and so are
        the actors of a cluster it joined (they are detached and serve other drivers).
        """
        self._portal.close()
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()


def _functions(*teams: TeamSpec | str | None) -> list[tuple[str, str, bytes]]:
    """The function tools of ``teams`` (those given in Python), as the sandboxes take them."""
    return [
        (t.name, t.digest, t.payload)
        for team in teams
        if isinstance(team, Team)
        for t in team.shipped
    ]
