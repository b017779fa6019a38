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
import contextlib
import itertools
from pathlib import Path
from typing import Final

import structlog

from raytroupe.actors.desk.intent import TeamChooser
from raytroupe.actors.desk.keepers import Keepers
from raytroupe.actors.desk.schedules import Scheduler, ScheduleStore
from raytroupe.actors.desk.submission import Submission
from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.notify.desk import WebhookDesk
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Shards, TeamProvisioner
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.state import redact_url
from raytroupe.protocols import (
    AgentInfo,
    AgentSpec,
    Budget,
    JobsQuery,
    JobSummary,
    SkillNotFound,
    StateUnavailable,
    TeamSpec,
    TenantPolicy,
)
from raytroupe.protocols.config.guardrails import GuardrailsConfig
from raytroupe.protocols.config.webhooks import WebhooksConfig
from raytroupe.protocols.evals import EvalComparison, EvalRun, EvalSuite, OptimisationReport
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.protocols.guardrails import (
    DecisionRecord,
    GuardrailDecision,
    GuardrailInfo,
    GuardrailSpec,
)
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.policy import as_written
from raytroupe.protocols.schedules import ScheduleInfo, ScheduleSpec
from raytroupe.protocols.sessions import HISTORY_TOKENS, SessionInfo
from raytroupe.protocols.skill import SkillEvent, SkillInfo, SkillProblemInfo, SkillSpec
from raytroupe.protocols.webhooks import Delivery, WebhookCreated, WebhookInfo, WebhookSpec

__all__ = ["FrontDesk"]

REAP_EVERY_S: Final = 5.0
"""How often the desk looks for inline teams idle past their tenant's ``agents_idle_s``."""

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
        webhooks: where webhook URLs may point (their deliveries are the shards').
        guardrails: what guardrails may run (the callables a rule may name).
    """

    def __init__(
        self,
        router: RouterClient,
        provisioner: TeamProvisioner,
        shards: Shards,
        *,
        journal: Journal | str | Path | None = None,
        skills: SkillsConfig | None = None,
        webhooks: WebhooksConfig | None = None,
        guardrails: GuardrailsConfig | None = None,
    ) -> None:
        self._router = router
        self._webhooks_config = webhooks
        self._guardrails_config = guardrails or GuardrailsConfig()
        self._provisioner = provisioner
        self._shards = shards
        self._journal_at = journal
        self._turns = itertools.count()
        self._chooser = TeamChooser(router)
        self._skills_config = skills or SkillsConfig()
        self._reaper: asyncio.Task[None] | None = None
        self._firing: asyncio.Task[None] | None = None
        self._records(None)  # in memory until on_start opens the journal

    def _records(self, journal: Journal | None) -> None:
        """Keep teams, policies, skills, sessions, evals in ``journal`` (None: in memory)."""
        self._journal = journal
        self._hooks = WebhookDesk(
            journal.webhooks if journal is not None else None, self._webhooks_config
        )
        self._schedules = ScheduleStore(journal.db) if journal is not None else None
        self._kept = Keepers(
            journal, self._router, self._provisioner, self._skills_config, self._chooser,
            submit=self.submit, wait=lambda job_id: self._shards.wait(job_id, None),
            guardrails=self._guardrails_config,
        )  # fmt: skip
        self._submission = Submission(
            self._kept, journal, router=self._router, chooser=self._chooser,
            shards=self._shards, turns=self._turns,
        )  # fmt: skip

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        at = self._journal_at
        journal = "in memory" if at is None else at if isinstance(at, Journal) else redact_url(at)
        return f"FrontDesk({len(self._shards)} job shards, journal {journal})"

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open the journal, load the skills, check the running experiments and idle teams."""
        at = self._journal_at
        if at is not None:
            self._records(at if isinstance(at, Journal) else await asyncio.to_thread(Journal, at))
        await self._kept.skills.start()
        await self._kept.experiments.start_checking()
        self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())
        if self._schedules is not None:
            firing = Scheduler(self._schedules, self.submit).run()
            self._firing = asyncio.get_running_loop().create_task(firing)

    async def on_stop(self) -> None:
        """Stop watching skills, experiments and idle teams; close the journal."""
        if self._firing is not None:
            self._firing.cancel()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await self._kept.skills.stop()
        await self._kept.experiments.stop_checking()
        if self._journal is not None and not isinstance(self._journal_at, Journal):
            self._journal.close()

    async def _reap_idle(self) -> None:
        """Every :data:`REAP_EVERY_S`, stop inline teams idle too long (``InlineTeams.reap``)."""
        while True:
            await asyncio.sleep(REAP_EVERY_S)
            if not self._kept.inline:  # nothing to stop: no query of the unfinished jobs
                continue
            try:
                running = await self._submission.running_teams()
                await self._kept.inline.reap(running, lambda t: self._kept.policies.policy(t)[1])
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("inline.reap_failed", error=f"{type(exc).__name__}: {exc}")

    # -- jobs -----------------------------------------------------------------------------

    async def submit(self, order: JobOrder, caller: Submitter | None = None) -> str:
        """Admit a job, hand it to a job shard, and return its id. See :meth:`Submission.submit`.

        ``caller`` (default: an admin's, of tenant ``default``) is who orders it.
        """
        return await self._submission.submit(order, caller or Submitter())

    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        """Jobs newest first, every shard's, as the journal has them (``Journal.summaries``).

        Unfinished jobs show ``pending`` here: their live status is their shard's (the client
        puts it in). Without a journal: the lines the shards hold in memory. Each names its
        team as its tenant wrote it (:func:`~raytroupe.protocols.as_written`).
        """
        if self._journal is not None:
            lines = await asyncio.to_thread(self._journal.summaries, tenant, query)
        else:
            lines = await self._shards.summaries(tenant, query)
        return [as_written(line, line.tenant) for line in lines]

    # -- tenant policies ------------------------------------------------------------------

    async def policy(self, tenant: str) -> TenantPolicy:
        """The policy that binds ``tenant`` (its own, else the default)."""
        return self._kept.policies.policy(tenant)[1]

    async def policies(self) -> dict[str, TenantPolicy]:
        """Every policy set, by tenant (``*``: the default for tenants without one)."""
        return self._kept.policies.all()

    async def put_policy(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Set the policy of ``tenant`` (``*``: the default); None drops it. Journaled."""
        self._kept.policies.put(tenant, policy)
        if self._journal is not None:
            self._journal.put_policy(tenant, policy)

    async def use_inline(self, tenant: str, team: TeamSpec, *, refuse: bool = True) -> None:
        """Count a fork's inline ``team`` among its tenant's live agents, as submit does.

        ``refuse=False``: an admin's fork, which runs even when the tenant has no room left.

        Raises:
            Forbidden: (``refuse``) the tenant would run more agents than its policy allows.
        """
        policy_name, policy = self._kept.policies.policy(tenant)
        running = await self._submission.running_teams()
        await self._kept.inline.use(tenant, team, policy_name, policy, running, refuse=refuse)

    # -- teams registered at run time ---------------------------------------------------------

    async def teams(self) -> dict[str, TeamSpec]:
        """Every registered team, by name."""
        return self._kept.catalog.teams()

    async def team(self, name: str) -> TeamSpec:
        """The team registered as ``name`` (raises ``TeamNotFound``)."""
        return self._kept.catalog.team(name)

    async def put_team(self, team: TeamSpec, *, create: bool = False) -> bool:
        """Register or hot-update a team; True if new. See :meth:`TeamCatalog.put`."""
        return await self._kept.catalog.put(team, create=create)

    async def delete_team(self, name: str) -> TeamSpec:
        """Unregister a team and stop its agents. See :meth:`TeamCatalog.delete`."""
        return await self._kept.catalog.delete(name)

    async def agents(self) -> list[AgentInfo]:
        """Every agent of every registered team."""
        return self._kept.catalog.agents()

    async def put_agent(self, team: str, agent: AgentSpec, *, create: bool = False) -> bool:
        """Add or hot-update one agent of a team. See :meth:`TeamCatalog.put_agent`."""
        return await self._kept.catalog.put_agent(team, agent, create=create)

    async def delete_agent(self, name: str) -> AgentInfo:
        """Remove one agent from its team. See :meth:`TeamCatalog.delete_agent`."""
        return await self._kept.catalog.delete_agent(name)

    # -- skills ---------------------------------------------------------------------------

    async def skills(self, *, tenant: str | None = None) -> list[SkillInfo]:
        """Registered skills (for ``tenant``: those its policy lets it run), by name."""
        allowed = None if tenant is None else self._kept.policies.policy(tenant)[1]
        return [self._kept.skills.registry.info(s.name) for s in self._kept.skills.visible(allowed)]

    async def skill(
        self, name: str, version: str | None = None, *, tenant: str | None = None
    ) -> SkillSpec:
        """The current version of skill ``name`` (or ``version`` of it).

        Raises:
            SkillNotFound: no such skill or version (or ``tenant`` may not run it).
        """
        if tenant is not None:
            _, policy = self._kept.policies.policy(tenant)
            if policy.skills is not None and name not in policy.skills:
                raise SkillNotFound(f"no skill is registered as {name!r}", skill=name)
        return self._kept.skills.registry.get(name, version)

    async def skill_history(self, name: str | None = None) -> list[SkillEvent]:
        """What happened to skills (one, or all), oldest first."""
        return self._kept.skills.registry.history(name)

    async def skill_problems(self) -> list[SkillProblemInfo]:
        """Skill files of the watched directory that could not be loaded."""
        return self._kept.skills.registry.problems()

    async def put_skill(self, spec: SkillSpec, *, source: str = "api") -> bool:
        """Check and register ``spec`` as its skill's current version; True if it is new.

        Raises:
            Conflict: that version exists with other content (versions are immutable).
            TeamNotFound: a ``team:<name>`` skill's team is not registered.
            ConfigError: a required tool is missing, or its agent cannot be provisioned.
        """
        return await self._kept.skills.apply(spec, source=source)

    async def rollback_skill(
        self, name: str, version: str | None = None, *, source: str = "api"
    ) -> SkillSpec:
        """Make an earlier version current again (default: the one before the current).

        Raises:
            SkillNotFound: no such skill or version.
            ConfigError: no earlier version.
        """
        return self._kept.skills.registry.rollback(name, version, source=source)

    async def delete_skill(self, name: str, *, source: str = "api") -> SkillInfo:
        """Unregister a skill and every version of it (running jobs keep theirs).

        Raises:
            SkillNotFound: no such skill.
        """
        self._kept.experiments.stop_skill(name, by=f"skill deleted ({source})")
        return self._kept.skills.registry.delete(name, source=source)

    async def promote_skill(self, name: str, version: str, *, source: str = "api") -> SkillSpec:
        """See :meth:`Evolution.promote_skill`."""
        return await self._kept.evolution.promote_skill(name, version, source=source)

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
        return await self._kept.evolution.optimise_skill(
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
        return await self._kept.evolution.start_eval(
            suite, skill=skill, team=team, tenant=tenant, admin=admin,
            concurrency=concurrency, budget=budget,
        )  # fmt: skip

    async def eval_run(
        self, run_id: str, timeout: float | None = 0.0, *, tenant: str | None = None
    ) -> EvalRun:
        """See :meth:`Evolution.eval_run`."""
        return await self._kept.evolution.eval_run(run_id, timeout, tenant=tenant)

    async def eval_runs(self, *, tenant: str | None = None) -> list[EvalRun]:
        """See :meth:`Evolution.eval_runs`."""
        return await self._kept.evolution.eval_runs(tenant=tenant)

    async def compare_evals(
        self, base: str, other: str, *, tenant: str | None = None
    ) -> EvalComparison:
        """See :meth:`Evolution.compare_evals`."""
        return await self._kept.evolution.compare_evals(base, other, tenant=tenant)

    async def start_experiment(self, spec: ExperimentSpec) -> ExperimentInfo:
        """See :meth:`Evolution.start_experiment`."""
        return await self._kept.evolution.start_experiment(spec)

    async def experiment(self, name: str) -> ExperimentInfo:
        """See :meth:`Evolution.experiment`."""
        return await self._kept.evolution.experiment(name)

    async def experiments(self) -> list[ExperimentInfo]:
        """See :meth:`Evolution.experiments`."""
        return await self._kept.evolution.experiments()

    async def stop_experiment(self, name: str, *, by: str = "api") -> ExperimentInfo:
        """See :meth:`Evolution.stop_experiment`."""
        return await self._kept.evolution.stop_experiment(name, by=by)

    # -- sessions (see :mod:`.sessions`) ----------------------------------------------------

    async def create_session(
        self,
        tenant: str,
        session_id: str | None = None,
        *,
        title: str = "",
        history_tokens: int = HISTORY_TOKENS,
        user: str | None = None,
    ) -> SessionInfo:
        """See :meth:`SessionDesk.create`."""
        return self._kept.sessions.create(tenant, session_id, title, history_tokens, user)

    async def session(self, session_id: str, *, tenant: str) -> SessionInfo:
        """The tenant's session with its turns, each as its job ended.

        Raises:
            SessionNotFound: the tenant has no session of that id.
        """
        return await self._kept.sessions.settled(
            tenant, session_id, self._submission.result_of(tenant)
        )

    async def sessions(
        self, *, tenant: str, limit: int = 100, user: str | None = None
    ) -> list[SessionInfo]:
        """The tenant's sessions (``user``'s only, if given), the most recently used first."""
        return self._kept.sessions.store.listed(tenant, limit, user)

    async def delete_session(self, session_id: str, *, tenant: str) -> None:
        """See :meth:`SessionDesk.delete`."""
        self._kept.sessions.delete(tenant, session_id)

    # -- webhooks (see :mod:`raytroupe.actors.notify`) ---------------------------------------

    async def put_webhook(self, tenant: str, spec: WebhookSpec) -> WebhookCreated:
        """See :meth:`WebhookDesk.create`."""
        return await self._hooks.create(tenant, spec)

    async def webhooks(
        self, tenant: str | None, *, job_id: str | None = None, kind: str | None = None
    ) -> list[WebhookInfo]:
        """See :meth:`WebhookDesk.webhooks`."""
        return await self._hooks.webhooks(tenant, job_id=job_id, kind=kind)

    async def webhook(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """See :meth:`WebhookDesk.webhook`."""
        return await self._hooks.webhook(tenant, webhook_id)

    async def delete_webhook(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """See :meth:`WebhookDesk.delete`."""
        return await self._hooks.delete(tenant, webhook_id)

    async def deliveries(
        self, tenant: str | None, webhook_id: str, limit: int = 100
    ) -> list[Delivery]:
        """See :meth:`WebhookDesk.deliveries`."""
        return await self._hooks.deliveries(tenant, webhook_id, limit)

    # -- guardrails (see :mod:`raytroupe.actors.guardrails`) --------------------------------

    async def put_guardrail(self, name: str, spec: GuardrailSpec, by: str | None) -> GuardrailInfo:
        """See :meth:`GuardrailStore.put`."""
        return await asyncio.to_thread(self._kept.guardrails.put, name, spec, by)

    async def guardrails(self) -> list[GuardrailInfo]:
        """See :meth:`GuardrailStore.guardrails`."""
        return await asyncio.to_thread(self._kept.guardrails.guardrails)

    async def guardrail(self, name: str, version: int | None = None) -> GuardrailInfo:
        """See :meth:`GuardrailStore.guardrail`."""
        return await asyncio.to_thread(self._kept.guardrails.guardrail, name, version)

    async def delete_guardrail(self, name: str) -> GuardrailInfo:
        """See :meth:`GuardrailStore.delete`."""
        return await asyncio.to_thread(self._kept.guardrails.delete, name)

    async def guardrail_decisions(
        self, tenant: str | None, *, job_id: str | None = None, limit: int = 100
    ) -> list[DecisionRecord]:
        """See :meth:`GuardrailStore.decisions`."""
        return await asyncio.to_thread(
            self._kept.guardrails.decisions, tenant, job_id=job_id, limit=limit
        )

    async def record_guardrail(
        self, tenant: str, job_id: str | None, decision: GuardrailDecision
    ) -> None:
        """Keep a decision a job shard made (its output's)."""
        await asyncio.to_thread(self._kept.guardrails.record, tenant, job_id, decision)

    # -- schedules (see :mod:`.schedules`) --------------------------------------------------

    def _schedule_store(self) -> ScheduleStore:
        if self._schedules is None:
            raise StateUnavailable("schedules are kept in the journal, and this desk has none")
        return self._schedules

    async def put_schedule(
        self, tenant: str, name: str, spec: ScheduleSpec
    ) -> tuple[ScheduleInfo, bool]:
        """See :meth:`ScheduleStore.put`."""
        return await asyncio.to_thread(self._schedule_store().put, tenant, name, spec)

    async def schedules(self, tenant: str | None) -> list[ScheduleInfo]:
        """See :meth:`ScheduleStore.schedules`."""
        return await asyncio.to_thread(self._schedule_store().schedules, tenant)

    async def schedule(self, tenant: str, name: str) -> ScheduleInfo:
        """See :meth:`ScheduleStore.schedule`."""
        return await asyncio.to_thread(self._schedule_store().schedule, tenant, name)

    async def delete_schedule(self, tenant: str, name: str) -> ScheduleInfo:
        """See :meth:`ScheduleStore.delete`."""
        return await asyncio.to_thread(self._schedule_store().delete, tenant, name)
