"""The front desk: the one keeper of what every job is admitted by.

:class:`FrontDesk` (the Ray actor ``desk``) admits every job and hands it to a job shard
(:mod:`raytroupe.actors.orchestrator`); it keeps the state that must have one keeper: tenant
policies, the team and agent catalog, inline teams, skills, sessions, eval runs and
experiments. It runs no job itself: after :meth:`FrontDesk.submit`, the job's questions go
to its shard (``SystemClient`` and :class:`~raytroupe.actors.orchestrator.shards.Shards` find it
from the job's id).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from raytroupe.actors.desk.catalog import TeamCatalog
from raytroupe.actors.desk.evolution import Evolution
from raytroupe.actors.desk.inline import InlineTeams
from raytroupe.actors.desk.intake import (
    admitted_documents,
    checked_schema,
    checked_task,
    drawing_on,
    no_account,
    shaped,
    state_input,
)
from raytroupe.actors.desk.intent import TeamChooser, pool_asker
from raytroupe.actors.desk.sessions import ResultOf, SessionDesk, SessionStore
from raytroupe.actors.desk.what_runs import WhatRuns
from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.evals.desk import EvalDesk, EvalStore
from raytroupe.actors.evals.experiments import Assignment, ExperimentDesk, ExperimentStore
from raytroupe.actors.offload import on_loop
from raytroupe.actors.orchestrator.admission import (
    PolicyBook,
    admit_budget,
    admit_registered,
)
from raytroupe.actors.orchestrator.episodes import with_examples
from raytroupe.actors.orchestrator.graphs.desk import first_checkpoint
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Admitted, Shards, TeamProvisioner, new_job_id
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.skills.desk import SkillDesk
from raytroupe.actors.skills.registry import SkillStore
from raytroupe.actors.state import redact_url
from raytroupe.actors.telemetry.tracing import received
from raytroupe.protocols import (
    AgentInfo,
    AgentSpec,
    Attachment,
    Budget,
    InvalidInput,
    JobResult,
    JobsQuery,
    JobSummary,
    SkillNotFound,
    TeamSpec,
    TenantPolicy,
)
from raytroupe.protocols.bounded import ADMISSION_WORK_S
from raytroupe.protocols.evals import EvalComparison, EvalRun, EvalSuite, OptimisationReport
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.protocols.intent import IntentConfig
from raytroupe.protocols.sessions import HISTORY_TOKENS, SessionInfo
from raytroupe.protocols.skill import SkillEvent, SkillInfo, SkillProblemInfo, SkillSpec

__all__ = ["FrontDesk"]

log = structlog.get_logger("raytroupe.desk")


class FrontDesk:
    """Admits jobs and keeps what admits them. A plain class; Ray makes it the ``desk`` actor.

    Args:
        router: how it reaches the LLM pool (routing, summaries) and memory (episodes).
        provisioner: makes a registered team's agents ready when it is put.
        shards: the job shards it hands admitted jobs to, in turn.
        journal: where teams, policies, skills, sessions, eval runs and experiments are
            kept (the job shards' database); None keeps them in memory.
        skills: where skill files are loaded from, and how unnamed jobs are routed.
    """

    def __init__(
        self,
        router: RouterClient,
        provisioner: TeamProvisioner,
        shards: Shards,
        *,
        journal: Journal | str | Path | None = None,
        skills: SkillsConfig | None = None,
    ) -> None:
        self._router = router
        self._provisioner = provisioner
        self._shards = shards
        self._journal_at = journal
        self._turn = 0
        self._chooser = TeamChooser(router)
        self._skills_config = skills or SkillsConfig()
        self._records(None)  # in memory until on_start opens the journal

    def _records(self, journal: Journal | None) -> None:
        """Keep teams, policies, skills, sessions, evals in ``journal`` (None: in memory)."""
        self._journal = journal
        db = journal.db if journal is not None else None
        self._sessions = SessionDesk(SessionStore(db) if db else SessionStore.in_memory())
        self._catalog = TeamCatalog(journal, self._provisioner)
        self._policies = PolicyBook(journal.policies() if journal else None)
        self._inline = InlineTeams(journal, self._provisioner)
        self._skills = SkillDesk(
            self._skills_config, SkillStore(db) if db else None, self._provisioner,
            self._catalog.team,
        )  # fmt: skip
        evals = EvalDesk(
            EvalStore(db) if db else None,
            lambda run_id, tenant: pool_asker(self._router, run_id, tenant),
        )
        self._experiments = ExperimentDesk(  # the shards write outcomes to the journal's
            ExperimentStore(db) if db else ExperimentStore.in_memory(),
            self._skills.registry,
            journal.known if journal is not None else lambda _: (False, None),
            shared=journal is not None,
        )
        self._what_runs = WhatRuns(
            self._policies, self._skills, self._experiments, self._catalog,
            chooser=self._chooser, routing=self._skills_config.routing,
        )  # fmt: skip
        self._evolution = Evolution(
            self._router, self._policies, self._skills, evals, self._experiments,
            submit=self.submit, wait=lambda job_id: self._shards.wait(job_id, None),
        )  # fmt: skip

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        at = self._journal_at
        journal = "in memory" if at is None else at if isinstance(at, Journal) else redact_url(at)
        return f"FrontDesk({len(self._shards)} job shards, journal {journal})"

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open the journal, load the skills, check the running experiments."""
        at = self._journal_at
        if at is not None:
            self._records(at if isinstance(at, Journal) else await asyncio.to_thread(Journal, at))
        await self._skills.start()
        await self._experiments.start_checking()

    async def on_stop(self) -> None:
        """Stop watching skills and experiments; close the journal."""
        await self._skills.stop()
        await self._experiments.stop_checking()
        if self._journal is not None and not isinstance(self._journal_at, Journal):
            self._journal.close()

    # -- jobs -----------------------------------------------------------------------------

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
        """Admit a job, hand it to a job shard, and return its id.

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
        aggregation stream its tokens as ``llm_delta`` events of the job's shard's address,
        when its text is the answer as it comes (see ``runner.streams_answer``).

        ``account`` (a job shard's, for a graph node's child job) is the job whose budget
        account its model calls draw on; a ``budget`` naming one is refused.

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
        full_task = checked_task(task, attachments)
        output_schema = checked_schema(output_schema)
        no_account(budget)
        owner = self._turn % len(self._shards)  # in turn
        self._turn += 1
        job_id = new_job_id(owner)
        policy_name, policy = self._policies.policy(tenant)
        if skill is not None and (team is not None or intent is not None or teams):
            raise InvalidInput("a job names a skill or a team, not both", field="skill")
        if not admin:  # the tenant's own documents: off the loop, in its share, within time
            team, teams = await on_loop().run(
                tenant, ADMISSION_WORK_S, "admission_work_s", admitted_documents,
                tenant, policy_name, policy, attachments, team=team, teams=teams or {},
            )  # fmt: skip
        with received(traceparent):  # a routing model's calls: in the caller's trace
            spec, named, route, arm = await self._what_runs.skill_for(
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
        team, spec = shaped(team, spec, output_schema)
        if spec is None and team.graph is not None and input is not None:
            # the door checks it, against the state's schema: the tenant's patterns
            await on_loop().run(
                tenant, ADMISSION_WORK_S, "admission_work_s",
                first_checkpoint, job_id, team.graph, state_input(input),
            )  # fmt: skip
        if not admin:
            budget = admit_budget(budget, team, policy_name, policy)
        if not registered and spec is None:  # an admin's too: its idle teams make room
            await self._inline.use(
                tenant, team, policy_name, policy, await self._running_teams(), refuse=not admin
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
            budget=drawing_on(budget or team.budget, account),
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
        await self._hand_off(admitted, arm, (session, full_task) if session else None)
        log.info("job_submitted", job_id=job_id, team=team.name, tenant=tenant,
                 request_id=request_id, shard=owner, session=session)  # fmt: skip
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
        offers it (see :mod:`.sessions`, :mod:`raytroupe.actors.orchestrator.episodes`).

        Raises:
            SessionNotFound: ``tenant`` has no session ``session``.
        """
        asker = pool_asker(self._router, job_id, tenant)
        shown = await self._sessions.shown(task, tenant, session, self._result_of(tenant), asker)
        return await with_examples(
            self._router, job_id, shown, tenant=tenant, team=team, skill=skill
        )

    async def _hand_off(
        self, admitted: Admitted, arm: Assignment | None, turn: tuple[str, str] | None
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
            await self._shards.adopt(admitted)
        except BaseException:
            if arm is not None:
                self._experiments.forget(admitted.id)
            if turn is not None and seq is not None:
                self._sessions.store.settle(admitted.tenant, turn[0], seq, "failed", None)
            raise

    async def _running_teams(self) -> set[str]:
        """The teams of unfinished jobs, every shard's (as the journal has them, if any)."""
        if self._journal is not None:
            return await asyncio.to_thread(self._journal.running_teams)
        return await self._shards.running_teams()

    def _result_of(self, tenant: str) -> ResultOf:
        """A job of ``tenant``'s result, if it has one yet, asked of its shard."""

        async def result_of(job_id: str) -> JobResult | None:
            return await self._shards.wait(job_id, 0.0, tenant=tenant)

        return result_of

    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """Jobs newest first, every shard's, as the journal has them (``Journal.summaries``).

        Unfinished jobs show ``pending`` here: their live status is their shard's (the client
        puts it in). Without a journal: the lines the shards hold in memory.
        """
        if self._journal is not None:
            return await asyncio.to_thread(self._journal.summaries, tenant, query)
        return await self._shards.summaries(tenant, query)

    # -- tenant policies ------------------------------------------------------------------

    async def policy(self, tenant: str) -> TenantPolicy:
        """The policy that binds ``tenant`` (its own, else the default)."""
        return self._policies.policy(tenant)[1]

    async def policies(self) -> dict[str, TenantPolicy]:
        """Every policy set, by tenant (``*``: the default for tenants without one)."""
        return self._policies.all()

    async def put_policy(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Set the policy of ``tenant`` (``*``: the default); None drops it. Journaled."""
        self._policies.put(tenant, policy)
        if self._journal is not None:
            self._journal.put_policy(tenant, policy)

    async def use_inline(self, tenant: str, team: TeamSpec) -> None:
        """Count a fork's inline ``team`` among its tenant's live agents, as submit does.

        Raises:
            Forbidden: the tenant would run more agents than its policy allows.
        """
        policy_name, policy = self._policies.policy(tenant)
        await self._inline.use(tenant, team, policy_name, policy, await self._running_teams())

    # -- teams registered at run time ---------------------------------------------------------

    async def teams(self) -> dict[str, TeamSpec]:
        """Every registered team, by name."""
        return self._catalog.teams()

    async def team(self, name: str) -> TeamSpec:
        """The team registered as ``name`` (raises ``TeamNotFound``)."""
        return self._catalog.team(name)

    async def put_team(self, team: TeamSpec, *, create: bool = False) -> bool:
        """Register or hot-update a team; True if new. See :meth:`TeamCatalog.put`."""
        return await self._catalog.put(team, create=create)

    async def delete_team(self, name: str) -> TeamSpec:
        """Unregister a team and stop its agents. See :meth:`TeamCatalog.delete`."""
        return await self._catalog.delete(name)

    async def agents(self) -> list[AgentInfo]:
        """Every agent of every registered team."""
        return self._catalog.agents()

    async def put_agent(self, team: str, agent: AgentSpec, *, create: bool = False) -> bool:
        """Add or hot-update one agent of a team. See :meth:`TeamCatalog.put_agent`."""
        return await self._catalog.put_agent(team, agent, create=create)

    async def delete_agent(self, name: str) -> AgentInfo:
        """Remove one agent from its team. See :meth:`TeamCatalog.delete_agent`."""
        return await self._catalog.delete_agent(name)

    # -- skills ---------------------------------------------------------------------------

    async def skills(self, *, tenant: str | None = None) -> list[SkillInfo]:
        """Registered skills (for ``tenant``: those its policy lets it run), by name."""
        allowed = None if tenant is None else self._policies.policy(tenant)[1]
        return [self._skills.registry.info(s.name) for s in self._skills.visible(allowed)]

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

    async def skill_history(self, name: str | None = None) -> list[SkillEvent]:
        """What happened to skills (one, or all), oldest first."""
        return self._skills.registry.history(name)

    async def skill_problems(self) -> list[SkillProblemInfo]:
        """Skill files of the watched directory that could not be loaded."""
        return self._skills.registry.problems()

    async def put_skill(self, spec: SkillSpec, *, source: str = "api") -> bool:
        """Check and register ``spec`` as its skill's current version; True if it is new.

        Raises:
            Conflict: that version exists with other content (versions are immutable).
            TeamNotFound: a ``team:<name>`` skill's team is not registered.
            ConfigError: a required tool is missing, or its agent cannot be provisioned.
        """
        return await self._skills.apply(spec, source=source)

    async def rollback_skill(
        self, name: str, version: str | None = None, *, source: str = "api"
    ) -> SkillSpec:
        """Make an earlier version current again (default: the one before the current).

        Raises:
            SkillNotFound: no such skill or version.
            ConfigError: no earlier version.
        """
        return self._skills.registry.rollback(name, version, source=source)

    async def delete_skill(self, name: str, *, source: str = "api") -> SkillInfo:
        """Unregister a skill and every version of it (running jobs keep theirs).

        Raises:
            SkillNotFound: no such skill.
        """
        self._experiments.stop_skill(name, by=f"skill deleted ({source})")
        return self._skills.registry.delete(name, source=source)

    async def promote_skill(self, name: str, version: str, *, source: str = "api") -> SkillSpec:
        """See :meth:`Evolution.promote_skill`."""
        return await self._evolution.promote_skill(name, version, source=source)

    async def optimise_skill(
        self,
        name: str,
        suite: EvalSuite,
        *,
        variants: int = 3,
        model: str = "default",
        concurrency: int = 4,
        budget: Budget | None = None,
        promote: bool = False,
        source: str = "optimiser",
    ) -> OptimisationReport:
        """See :meth:`Evolution.optimise_skill`."""
        return await self._evolution.optimise_skill(
            name, suite, variants=variants, model=model, concurrency=concurrency,
            budget=budget, promote=promote, source=source,
        )  # fmt: skip

    # -- eval runs and experiments (see :mod:`.evolution`) ---------------------------------

    async def start_eval(
        self,
        suite: EvalSuite,
        *,
        skill: str | None = None,
        team: str | None = None,
        tenant: str = "default",
        admin: bool = True,
        concurrency: int = 4,
        budget: Budget | None = None,
    ) -> str:
        """See :meth:`Evolution.start_eval`."""
        return await self._evolution.start_eval(
            suite, skill=skill, team=team, tenant=tenant, admin=admin,
            concurrency=concurrency, budget=budget,
        )  # fmt: skip

    async def eval_run(
        self, run_id: str, timeout: float | None = 0.0, *, tenant: str | None = None
    ) -> EvalRun:
        """See :meth:`Evolution.eval_run`."""
        return await self._evolution.eval_run(run_id, timeout, tenant=tenant)

    async def eval_runs(self, *, tenant: str | None = None) -> list[EvalRun]:
        """See :meth:`Evolution.eval_runs`."""
        return await self._evolution.eval_runs(tenant=tenant)

    async def compare_evals(
        self, base: str, other: str, *, tenant: str | None = None
    ) -> EvalComparison:
        """See :meth:`Evolution.compare_evals`."""
        return await self._evolution.compare_evals(base, other, tenant=tenant)

    async def start_experiment(self, spec: ExperimentSpec) -> ExperimentInfo:
        """See :meth:`Evolution.start_experiment`."""
        return await self._evolution.start_experiment(spec)

    async def experiment(self, name: str) -> ExperimentInfo:
        """See :meth:`Evolution.experiment`."""
        return await self._evolution.experiment(name)

    async def experiments(self) -> list[ExperimentInfo]:
        """See :meth:`Evolution.experiments`."""
        return await self._evolution.experiments()

    async def stop_experiment(self, name: str, *, by: str = "api") -> ExperimentInfo:
        """See :meth:`Evolution.stop_experiment`."""
        return await self._evolution.stop_experiment(name, by=by)

    # -- sessions (see :mod:`.sessions`) ----------------------------------------------------

    async def create_session(
        self,
        tenant: str,
        session_id: str | None = None,
        *,
        title: str = "",
        history_tokens: int = HISTORY_TOKENS,
    ) -> SessionInfo:
        """See :meth:`SessionDesk.create`."""
        return self._sessions.create(tenant, session_id, title, history_tokens)

    async def session(self, session_id: str, *, tenant: str) -> SessionInfo:
        """The tenant's session with its turns, each as its job ended.

        Raises:
            SessionNotFound: the tenant has no session of that id.
        """
        return await self._sessions.settled(tenant, session_id, self._result_of(tenant))

    async def sessions(self, *, tenant: str, limit: int = 100) -> list[SessionInfo]:
        """The tenant's sessions, the most recently used first."""
        return self._sessions.store.listed(tenant, limit)

    async def delete_session(self, session_id: str, *, tenant: str) -> None:
        """See :meth:`SessionDesk.delete`."""
        self._sessions.delete(tenant, session_id)
