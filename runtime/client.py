"""The control plane: one typed, async client of the system actors.

Drivers (through the blocking :class:`~raytroupe.runtime.driver.Runtime`), the HTTP
application and the command line all reach the front desk, the job shards, the router, the
LLM pool and the memory store through :class:`SystemClient` (the memory store through its
``memory``, a :class:`~raytroupe.runtime.memory_client.MemoryClient`). Every call is awaited
by :func:`~raytroupe.runtime.ray_calls.call`, where a Ray failure becomes a raytroupe error:
a ``TroupeError`` raised in an actor comes back as itself, a dead or restarting actor as
``RecipientUnavailable`` (retryable). Work itself travels as ``AgentMessage`` envelopes
through the router (the data plane).
"""

from __future__ import annotations

import asyncio
import heapq
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from raytroupe.actors.spawn import SystemHandles, spawn_system
from raytroupe.protocols import (
    AgentInfo,
    AgentSpec,
    ApprovalRequest,
    DeadLetter,
    Feedback,
    JobEvent,
    JobResult,
    JobsQuery,
    JobStatus,
    JobSummary,
    ModelSpec,
    RouterStats,
    SkillEvent,
    SkillInfo,
    SkillProblemInfo,
    SkillSpec,
    Span,
    Spend,
    TeamSpec,
    TenantPolicy,
    UsageRow,
)
from raytroupe.protocols.config.guardrails import GuardrailsConfig
from raytroupe.protocols.config.llm import LLMConfig
from raytroupe.protocols.config.memory import MemoryConfig
from raytroupe.protocols.config.skills import SkillsConfig
from raytroupe.protocols.config.system import OTEL_FLAG_DEPRECATED, SystemConfig
from raytroupe.protocols.config.tools import ToolsConfig
from raytroupe.protocols.config.webhooks import WebhooksConfig
from raytroupe.protocols.graph_checkpoints import (
    GraphCheckpoint,
    GraphInterrupt,
    GraphState,
    Interrupted,
)
from raytroupe.protocols.guardrails import (
    DecisionRecord,
    GuardrailInfo,
    GuardrailSpec,
)
from raytroupe.protocols.inputs import with_load
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.schedules import ScheduleInfo, ScheduleSpec
from raytroupe.protocols.sessions import HISTORY_TOKENS, SessionInfo
from raytroupe.protocols.spend import SpendLimit, SpendLimitInfo, SpendWindowView
from raytroupe.protocols.traceparent import checked_traceparent, current_traceparent
from raytroupe.protocols.webhooks import Delivery, WebhookCreated, WebhookInfo, WebhookSpec
from raytroupe.runtime.evolution_client import EvolutionClient
from raytroupe.runtime.memory_client import MemoryClient
from raytroupe.runtime.ray_calls import call

__all__ = ["SystemClient"]

T = TypeVar("T")

_READY_TIMEOUT_S: Final = 5.0


class SystemClient:
    """Typed calls to the system actors of one raytroupe (see the module docstring).

    ``tenant`` arguments scope a call to one tenant's jobs (another tenant's job is
    ``JobNotFound``); ``admin=False`` on :meth:`submit` applies the tenant's policy.
    """

    def __init__(self, handles: SystemHandles) -> None:
        self.handles = handles
        self._orchestrators = handles.orchestrators
        self._desk: Any = handles.desk
        self._routers = handles.routers
        self._llm = handles.llm
        self.memory = MemoryClient(handles.memory)
        """Long-term memories, knowledge bases and skills' lessons: the memory store's calls."""
        self.evolution = EvolutionClient(handles.desk)
        """Eval runs, experiments, a skill's optimisation and promotion: the desk's calls."""

    @classmethod
    def start(
        cls,
        models: Mapping[str, ModelSpec] | None = None,
        llm: LLMConfig | None = None,
        tools: ToolsConfig | None = None,
        memory: MemoryConfig | None = None,
        journal: Path | None = None,
        *,
        config: SystemConfig | None = None,
        state_url: str | None = None,
        system_resources: Mapping[str, float] | None = None,
        actor_resources: Mapping[str, Mapping[str, float]] | None = None,
        otel: bool = False,
        replace_models: bool = False,
        policies: Mapping[str, TenantPolicy] | None = None,
        router_shards: int | None = None,
        orchestrator_shards: int | None = None,
        skills: SkillsConfig | None = None,
        webhooks: WebhooksConfig | None = None,
        guardrails: GuardrailsConfig | None = None,
    ) -> SystemClient:
        """Find the running system actors (namespace ``troupe``) or start them (blocking).

        See :func:`raytroupe.actors.spawn.spawn_system` for what each argument configures;
        ``config`` (a ``troupe.yaml``'s) supplies every one that is not given. ``otel`` is
        deprecated and does nothing (a ``DeprecationWarning`` says so): the actors trace as the
        ``OTEL_*`` variables say (see :mod:`raytroupe.actors.telemetry.tracing`).

        Raises:
            ConfigError: the pool cannot serve its configuration, or ``models`` would replace
                an alias without ``replace_models``, or ``config`` names a bad state URL.
        """
        if otel:
            warnings.warn(OTEL_FLAG_DEPRECATED, DeprecationWarning, stacklevel=2)
        if config is not None:
            llm = llm if llm is not None else config.llm_config()
            tools = tools or config.tools
            memory = memory or config.memory_config()
            journal = journal or config.state.journal
            state_url = state_url or config.state.location()
            system_resources = system_resources or config.placement.system_resources or None
            actor_resources = actor_resources or dict(config.placement.actors.items()) or None
            routers, orchestrators = config.scale.counts(_alive_nodes)
            router_shards = router_shards or routers
            orchestrator_shards = orchestrator_shards or orchestrators
            skills = skills or config.skills
            webhooks = webhooks or config.webhooks
            guardrails = guardrails or config.guardrails
        handles = spawn_system(
            models,
            llm,
            tools,
            memory,
            journal,
            state_url=state_url,
            system_resources=system_resources,
            actor_resources=actor_resources,
            replace_models=replace_models,
            policies=policies,
            router_shards=router_shards or 1,
            orchestrator_shards=orchestrator_shards or 1,
            skills=skills,
            webhooks=webhooks,
            guardrails=guardrails,
        )
        return cls(handles)

    # -- jobs ------------------------------------------------------------------------------

    async def submit(self, order: JobOrder, caller: Submitter) -> str:
        """Start a job; its id (see ``FrontDesk.submit``).

        The job's spans continue a trace: that of the OpenTelemetry span current here (in
        the HTTP replica, the request's server span, when the application traces), else
        that of ``caller.traceparent`` (a caller's W3C trace context: an HTTP request's
        header, a driver's span), which is passed on only if it is a valid one.
        """
        traced = current_traceparent() or checked_traceparent(caller.traceparent)
        caller = caller.model_copy(update={"traceparent": traced})
        result: str = await call(self._desk.submit.remote(order, caller))
        return result

    async def create_session(
        self,
        tenant: str,
        session_id: str | None = None,
        *,
        title: str = "",
        history_tokens: int = HISTORY_TOKENS,
        user: str | None = None,
    ) -> SessionInfo:
        """The tenant's session ``session_id``, made now if new (a fresh id if None)."""
        ref = self._desk.create_session.remote(
            tenant, session_id, title=title, history_tokens=history_tokens, user=user
        )
        result: SessionInfo = await call(ref)
        return result

    async def session(self, session_id: str, *, tenant: str) -> SessionInfo:
        """The tenant's session, with its turns."""
        result: SessionInfo = await call(self._desk.session.remote(session_id, tenant=tenant))
        return result

    async def sessions(
        self, *, tenant: str, limit: int = 100, user: str | None = None
    ) -> list[SessionInfo]:
        """The tenant's sessions (``user``'s only, if given), the most recently used first."""
        result: list[SessionInfo] = await call(
            self._desk.sessions.remote(tenant=tenant, limit=limit, user=user)
        )
        return result

    async def delete_session(self, session_id: str, *, tenant: str) -> None:
        """Forget the tenant's session (its jobs stay)."""
        await call(self._desk.delete_session.remote(session_id, tenant=tenant))

    # -- schedules -------------------------------------------------------------------------

    async def put_schedule(
        self, tenant: str, name: str, spec: ScheduleSpec
    ) -> tuple[ScheduleInfo, bool]:
        """Keep the tenant's schedule ``name``; it, and whether it is new."""
        result: tuple[ScheduleInfo, bool] = await call(
            self._desk.put_schedule.remote(tenant, name, spec)
        )
        return result

    async def schedules(self, tenant: str | None) -> list[ScheduleInfo]:
        """The tenant's schedules (None: every tenant's), by name."""
        result: list[ScheduleInfo] = await call(self._desk.schedules.remote(tenant))
        return result

    async def schedule(self, tenant: str, name: str) -> ScheduleInfo:
        """The tenant's schedule, with its latest firings."""
        result: ScheduleInfo = await call(self._desk.schedule.remote(tenant, name))
        return result

    async def delete_schedule(self, tenant: str, name: str) -> ScheduleInfo:
        """Drop the tenant's schedule; what it was."""
        result: ScheduleInfo = await call(self._desk.delete_schedule.remote(tenant, name))
        return result

    # -- guardrails ------------------------------------------------------------------------

    async def put_guardrail(self, name: str, spec: GuardrailSpec, by: str | None) -> GuardrailInfo:
        """Set ``name``'s next version; that version."""
        result: GuardrailInfo = await call(self._desk.put_guardrail.remote(name, spec, by))
        return result

    async def guardrails(self) -> list[GuardrailInfo]:
        """Every guardrail set (its current version), by name."""
        result: list[GuardrailInfo] = await call(self._desk.guardrails.remote())
        return result

    async def guardrail(self, name: str, version: int | None = None) -> GuardrailInfo:
        """A guardrail's current version (or ``version``)."""
        result: GuardrailInfo = await call(self._desk.guardrail.remote(name, version))
        return result

    async def delete_guardrail(self, name: str) -> GuardrailInfo:
        """Unset a guardrail; what it was."""
        result: GuardrailInfo = await call(self._desk.delete_guardrail.remote(name))
        return result

    async def guardrail_decisions(
        self, tenant: str | None, *, job_id: str | None = None, limit: int = 100
    ) -> list[DecisionRecord]:
        """``tenant``'s guardrail decisions (None: every tenant's), newest first."""
        result: list[DecisionRecord] = await call(
            self._desk.guardrail_decisions.remote(tenant, job_id=job_id, limit=limit)
        )
        return result

    # -- webhooks --------------------------------------------------------------------------

    async def put_webhook(self, tenant: str, spec: WebhookSpec) -> WebhookCreated:
        """Keep a webhook of ``tenant`` (an A2A push config with ``spec.a2a``); with its secret."""
        result: WebhookCreated = await call(self._desk.put_webhook.remote(tenant, spec))
        return result

    async def webhooks(
        self, tenant: str | None, *, job_id: str | None = None, kind: str | None = None
    ) -> list[WebhookInfo]:
        """The tenant's webhooks (None: every tenant's), oldest first."""
        ref = self._desk.webhooks.remote(tenant, job_id=job_id, kind=kind)
        result: list[WebhookInfo] = await call(ref)
        return result

    async def webhook(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """The tenant's webhook of that id."""
        result: WebhookInfo = await call(self._desk.webhook.remote(tenant, webhook_id))
        return result

    async def delete_webhook(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """Drop the tenant's webhook; what it was."""
        result: WebhookInfo = await call(self._desk.delete_webhook.remote(tenant, webhook_id))
        return result

    async def deliveries(
        self, tenant: str | None, webhook_id: str, limit: int = 100
    ) -> list[Delivery]:
        """The webhook's latest deliveries, newest first."""
        ref = self._desk.deliveries.remote(tenant, webhook_id, limit)
        result: list[Delivery] = await call(ref)
        return result

    async def status(self, job_id: str, *, tenant: str | None = None) -> JobStatus:
        """Where the job is."""
        status: JobStatus = await call(
            self._orchestrators.of(job_id).status.remote(job_id, tenant=tenant)
        )
        return status

    async def wait(
        self, job_id: str, timeout: float | None, *, tenant: str | None = None
    ) -> JobResult | None:
        """The job's result once it has one, or None after ``timeout`` seconds."""
        ref = self._orchestrators.of(job_id).wait.remote(job_id, timeout, tenant=tenant)
        result: JobResult | None = await call(ref)
        return result

    async def events(
        self, job_id: str, after: int, timeout: float | None, *, tenant: str | None = None
    ) -> list[JobEvent]:
        """Events with ``seq > after``, waiting up to ``timeout`` for the first one."""
        ref = self._orchestrators.of(job_id).events.remote(job_id, after, timeout, tenant=tenant)
        result: list[JobEvent] = await call(ref)
        return result

    async def feedback(
        self, job_id: str, score: float, comment: str = "", *, by: str = "",
        tenant: str | None = None,
    ) -> Feedback:  # fmt: skip
        """Keep a person's verdict on a finished job."""
        ref = self._orchestrators.of(job_id).feedback.remote(
            job_id, score, comment, by=by, tenant=tenant
        )
        result: Feedback = await call(ref)
        return result

    async def feedbacks(self, job_id: str, *, tenant: str | None = None) -> list[Feedback]:
        """People's verdicts on a job, oldest first."""
        ref = self._orchestrators.of(job_id).feedbacks.remote(job_id, tenant=tenant)
        result: list[Feedback] = await call(ref)
        return result

    async def cancel(self, job_id: str, *, tenant: str | None = None) -> bool:
        """Cancel the job; False if it had finished."""
        result: bool = await call(
            self._orchestrators.of(job_id).cancel.remote(job_id, tenant=tenant)
        )
        return result

    async def approvals(self, job_id: str, *, tenant: str | None = None) -> list[ApprovalRequest]:
        """The job's tool calls waiting for a human."""
        ref = self._orchestrators.of(job_id).approvals.remote(job_id, tenant=tenant)
        result: list[ApprovalRequest] = await call(ref)
        return result

    async def decide(
        self,
        job_id: str,
        approval_id: str,
        *,
        approved: bool,
        reason: str = "",
        tenant: str | None = None,
    ) -> bool:
        """Approve or reject a held tool call; False if nothing waits under that id."""
        ref = self._orchestrators.of(job_id).decide.remote(
            job_id, approval_id, approved=approved, reason=reason, tenant=tenant
        )
        result: bool = await call(ref)
        return result

    async def checkpoints(self, job_id: str, *, tenant: str | None = None) -> list[GraphCheckpoint]:
        """A graph job's checkpoints, by subgraph then superstep (none: not a graph job)."""
        ref = self._orchestrators.of(job_id).checkpoints.remote(job_id, tenant=tenant)
        result: list[GraphCheckpoint] = await call(ref)
        return result

    async def resume(
        self,
        job_id: str,
        *,
        value: Any = None,
        state: GraphState | None = None,
        interrupt: str | None = None,
        tenant: str | None = None,
    ) -> GraphInterrupt:
        """Let a graph waiting for input go on (a value, a state edit); the interrupt answered."""
        ref = self._orchestrators.of(job_id).resume.remote(
            job_id, value=value, state=state, interrupt=interrupt, tenant=tenant
        )
        result: GraphInterrupt = await call(ref)
        return result

    async def fork(
        self,
        job_id: str,
        step: int,
        *,
        state: GraphState | None = None,
        tenant: str | None = None,
        admin: bool = False,
    ) -> str:
        """Start a new job from checkpoint ``step`` of a graph job (``state`` edits it); its id.

        ``admin``: an admin forks (the fork runs as it is); else the fork is admitted under
        the tenant's policy of today.
        """
        ref = self._orchestrators.of(job_id).fork.remote(
            job_id, step, state=state, tenant=tenant, admin=admin
        )
        result: str = await call(ref)
        return result

    async def jobs(self, *, tenant: str | None = None) -> dict[str, JobStatus]:
        """Known jobs (of ``tenant``, when given) and their status, oldest first (every shard's)."""
        each: list[list[tuple[float, str, JobStatus]]] = await call(
            asyncio.gather(*(o.listed.remote(tenant=tenant) for o in self._orchestrators.handles))
        )
        return {job_id: status for _, job_id, status in heapq.merge(*each)}

    async def summaries(
        self, query: JobsQuery | None = None, *, tenant: str | None = None
    ) -> list[JobSummary]:
        """Jobs newest first (of ``tenant``), each with its live status (see ``JobsQuery``)."""
        query = query or JobsQuery()
        kept, live = await asyncio.gather(
            call(self._desk.summaries.remote(tenant, query)), self.jobs(tenant=tenant)
        )
        lines: list[JobSummary] = []
        for line in kept:
            now = live.get(line.id, line.status)
            if now != line.status:
                line = line.model_copy(update={"status": now})  # noqa: PLW2901
            if query.status in {
                None,
                "live",
                now,
            }:  # a live status: the journal gave every live job
                lines.append(line)
        return lines

    async def summary(self, job_id: str, *, tenant: str | None = None) -> JobSummary:
        """One job's jobs-list line, with its live status."""
        ref = self._orchestrators.of(job_id).summary.remote(job_id, tenant=tenant)
        result: JobSummary = await call(ref)
        return result

    async def trace(self, job_id: str, *, tenant: str | None = None) -> tuple[Span, ...]:
        """The job's trace so far, the root first (it ends now while the job runs)."""
        ref = self._orchestrators.of(job_id).trace.remote(job_id, tenant=tenant)
        result: tuple[Span, ...] = await call(ref)
        return result

    async def waiting(
        self, *, tenant: str | None = None
    ) -> tuple[list[tuple[str, ApprovalRequest]], list[Interrupted]]:
        """What jobs (of ``tenant``) wait for, every shard's: held tool calls, graph inputs."""
        each = await call(
            asyncio.gather(*(o.waiting.remote(tenant=tenant) for o in self._orchestrators.handles))
        )
        return [a for calls, _ in each for a in calls], [i for _, waits in each for i in waits]

    # -- teams and agents ------------------------------------------------------------------

    async def teams(self) -> dict[str, TeamSpec]:
        """Registered teams, by name."""
        result: dict[str, TeamSpec] = await call(self._desk.teams.remote())
        return result

    async def team(self, name: str) -> TeamSpec:
        """One registered team (``TeamNotFound`` if none)."""
        result: TeamSpec = await call(self._desk.team.remote(name))
        return result

    async def ship(self, functions: Sequence[tuple[str, str, bytes]]) -> None:
        """Give every tool sandbox a driver's function tools: ``(name, digest, bytes)`` each.

        Raises:
            ConfigError: a sandbox refused one (see ``ToolSandbox.put_functions``).
        """
        if functions:
            sandboxes = self.handles.sandboxes
            await asyncio.gather(*(call(s.put_functions.remote(list(functions)))
                                   for s in sandboxes))  # fmt: skip

    async def put_team(self, team: TeamSpec, *, create: bool = False) -> bool:
        """Register or hot-update a team; True if new."""
        result: bool = await call(self._desk.put_team.remote(team, create=create))
        return result

    async def delete_team(self, name: str) -> TeamSpec:
        """Unregister a team and stop its agents; what it was."""
        result: TeamSpec = await call(self._desk.delete_team.remote(name))
        return result

    async def skills(self, *, tenant: str | None = None) -> list[SkillInfo]:
        """Registered skills (for ``tenant``: those its policy lets it run)."""
        result: list[SkillInfo] = await call(self._desk.skills.remote(tenant=tenant))
        return result

    async def skill(
        self, name: str, version: str | None = None, *, tenant: str | None = None
    ) -> SkillSpec:
        """A skill's current version (or ``version`` of it)."""
        ref = self._desk.skill.remote(name, version, tenant=tenant)
        result: SkillSpec = await call(ref)
        return result

    async def skill_history(self, name: str | None = None) -> list[SkillEvent]:
        """What happened to skills (one, or all), oldest first."""
        result: list[SkillEvent] = await call(self._desk.skill_history.remote(name))
        return result

    async def skill_problems(self) -> list[SkillProblemInfo]:
        """Skill files of the watched directory that could not be loaded."""
        result: list[SkillProblemInfo] = await call(self._desk.skill_problems.remote())
        return result

    async def put_skill(self, spec: SkillSpec, *, source: str = "api") -> bool:
        """Register a skill version and make it current; True if the version is new."""
        result: bool = await call(self._desk.put_skill.remote(spec, source=source))
        return result

    async def rollback_skill(
        self, name: str, version: str | None = None, *, source: str = "api"
    ) -> SkillSpec:
        """Make an earlier version current (default: the one before); that version."""
        ref = self._desk.rollback_skill.remote(name, version, source=source)
        result: SkillSpec = await call(ref)
        return result

    async def delete_skill(self, name: str, *, source: str = "api") -> SkillInfo:
        """Unregister a skill and every version of it; what it was."""
        result: SkillInfo = await call(self._desk.delete_skill.remote(name, source=source))
        return result

    async def agents(self) -> list[AgentInfo]:
        """Agents of registered teams, with the envelopes each is handling now."""
        agents: list[AgentInfo] = await call(self._desk.agents.remote())
        stats = await self.router_stats()
        return with_load(agents, stats.in_flight, stats.registered)

    async def put_agent(self, team: str, agent: AgentSpec, *, create: bool = False) -> bool:
        """Add an agent to a registered team, or update it in place; True if new."""
        ref = self._desk.put_agent.remote(team, agent, create=create)
        result: bool = await call(ref)
        return result

    async def delete_agent(self, name: str) -> AgentInfo:
        """Remove an agent from its team and stop it; what it was."""
        result: AgentInfo = await call(self._desk.delete_agent.remote(name))
        return result

    # -- tenants ---------------------------------------------------------------------------

    async def policy(self, tenant: str) -> TenantPolicy:
        """The policy that binds ``tenant``."""
        result: TenantPolicy = await call(self._desk.policy.remote(tenant))
        return result

    async def policies(self) -> dict[str, TenantPolicy]:
        """Every tenant policy set (``*``: the default)."""
        result: dict[str, TenantPolicy] = await call(self._desk.policies.remote())
        return result

    async def put_policy(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Set (None: drop) a tenant's policy."""
        await call(self._desk.put_policy.remote(tenant, policy))

    # -- models, router, memory -------------------------------------------------------------

    async def usage(self, job_id: str | None = None) -> list[UsageRow]:
        """Model usage by job, agent and model (one job's when ``job_id`` is given)."""
        result: list[UsageRow] = await call(self._llm.usage.remote(job_id))
        return result

    async def spent(self, account: str) -> Spend:
        """What a budget account (``job:<id>``, ``tenant:<name>``) has spent."""
        result: Spend = await call(self._llm.spent.remote(account))
        return result

    async def spend_windows(self, tenant: str | None = None) -> list[SpendWindowView]:
        """Each spend limit of ``tenant`` (None: every tenant's) with its window's spend now."""
        result: list[SpendWindowView] = await call(self._llm.spend_windows.remote(tenant))
        return result

    async def spend_limits(self, tenant: str | None = None) -> list[SpendLimitInfo]:
        """Every spend limit in force (on ``tenant``, if given): configured, then set."""
        result: list[SpendLimitInfo] = await call(self._llm.spend_limits.remote(tenant))
        return result

    async def put_spend_limit(self, name: str, limit: SpendLimit, *, by: str) -> SpendLimitInfo:
        """Set the spend limit ``name`` at run time, on every pool replica."""
        result: SpendLimitInfo = await call(self._llm.put_spend_limit.remote(name, limit, by))
        return result

    async def delete_spend_limit(self, name: str) -> SpendLimitInfo:
        """Drop the spend limit ``name`` set at run time, on every pool replica."""
        result: SpendLimitInfo = await call(self._llm.delete_spend_limit.remote(name))
        return result

    async def models(self) -> dict[str, ModelSpec]:
        """The pool's aliases and what they stand for."""
        result: dict[str, ModelSpec] = await call(self._llm.models.remote())
        return result

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The router's newest dead letters, oldest first."""
        result: list[DeadLetter] = await call(self._routers.dead_letters(limit))
        return result

    async def router_stats(self) -> RouterStats:
        """The router's counters (its shards' added up) and registry."""
        parts: list[RouterStats] = await call(self._routers.stats())
        return RouterStats.combined(parts)

    async def ready(self) -> dict[str, bool]:
        """Whether the router's shards, the front desk and job shards, and the LLM pool answer."""
        checks = {
            "router": [router.stats.remote() for router in self._routers.handles],
            "orchestrator": [
                self._desk.policy.remote("-"),
                *(o.jobs.remote(tenant="-") for o in self._orchestrators.handles),
            ],
            "llm": [self._llm.unservable.remote()],
        }
        answers = await asyncio.gather(*(_answers(refs) for refs in checks.values()))
        return dict(zip(checks, answers, strict=True))


def _alive_nodes() -> int:
    return sum(1 for node in ray.nodes() if node.get("Alive"))


async def _answers(refs: list[Any]) -> bool:
    try:
        waits = (asyncio.wrap_future(ref.future()) for ref in refs)
        await asyncio.wait_for(asyncio.gather(*waits), _READY_TIMEOUT_S)
    except (TimeoutError, GetTimeoutError, RayActorError, RayTaskError):
        return False
    return True
