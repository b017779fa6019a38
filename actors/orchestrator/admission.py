"""Admission: what a tenant's job may ask for, checked before anything is provisioned.

A job from an admin (an admin API key, or a driver, which holds the cluster's Ray) is taken
as it is. A job from a tenant is checked against the tenant's :class:`TenantPolicy`: an inline
team is data, so it may only name model aliases and tools the policy allows, within its caps,
and it gets names scoped to the tenant. Every refusal is a ``Forbidden`` naming the field and
the policy; nothing is provisioned, journaled or started before admission passes.

Work that starts again from a stored job (a fork, a graph's resume, a restarted
shard's resume) is admitted again, under the tenant's policy of that day
(:func:`readmit`): what the tenant may no longer ask for does not run because it once could.

The rules are applied by the front desk (:mod:`raytroupe.actors.desk`) when a job is
submitted, and by a job shard when a stored job runs again: they live here, beneath both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from typing import Final

from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.protocols import (
    Attachment,
    Budget,
    ConfigError,
    Forbidden,
    TeamSpec,
    TenantPolicy,
    scoped_name,
    tenant_scope,
)
from raytroupe.protocols.addresses import NAME_PATTERN
from raytroupe.protocols.evals import CustomExpect, EvalSuite, JudgeExpect
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.skill import SkillSpec

__all__ = [
    "PolicyBook",
    "admit_attachments",
    "admit_budget",
    "admit_inline",
    "admit_registered",
    "admit_skill",
    "admit_suite",
    "readmit",
    "refusal",
    "runs_inline",
    "scope_inline",
]

_NAME: Final = re.compile(NAME_PATTERN)

DEFAULT_POLICY = "*"
"""The key of the policy of tenants that have none of their own."""


class PolicyBook:
    """Tenant policies by tenant, and the default for every other tenant."""

    def __init__(self, policies: dict[str, TenantPolicy] | None = None) -> None:
        self._policies = dict(policies or {})

    def policy(self, tenant: str) -> tuple[str, TenantPolicy]:
        """The policy that binds ``tenant``, and its name (for refusals)."""
        if tenant in self._policies:
            return f"tenant policy of {tenant!r}", self._policies[tenant]
        return "default tenant policy", self._policies.get(DEFAULT_POLICY, TenantPolicy())

    def put(self, tenant: str, policy: TenantPolicy | None) -> None:
        """Set (or with None, drop) the policy of ``tenant`` (``*``: the default)."""
        if policy is None:
            self._policies.pop(tenant, None)
        else:
            self._policies[tenant] = policy

    def all(self) -> dict[str, TenantPolicy]:
        """Every policy set, by tenant (``*``: the default)."""
        return dict(sorted(self._policies.items()))


def refusal(problems: Sequence[tuple[str, str]], policy_name: str) -> Forbidden:
    """The ``Forbidden`` for ``problems`` (``(field, why)`` each) under ``policy_name``."""
    field, first = problems[0]
    lines = [f"{f}: {why}" for f, why in problems]
    return Forbidden(
        f"{field}: {first} ({policy_name})",
        field=field,
        fields=[f for f, _ in problems],
        policy=policy_name,
        problems=lines,
    )


def _within(budget: Budget | None, ceiling: Budget) -> bool:
    """Whether ``budget`` stays under ``ceiling`` in every measure the ceiling limits."""
    pairs = (
        (None if budget is None else budget.tokens, ceiling.tokens),
        (None if budget is None else budget.usd, ceiling.usd),
    )
    return all(cap is None or (have is not None and have <= cap) for have, cap in pairs)


def _capped(budget: Budget | None, ceiling: Budget) -> Budget:
    def low(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else min(a, b)

    tokens = low(None if budget is None else budget.tokens, ceiling.tokens)
    usd = low(None if budget is None else budget.usd, ceiling.usd)
    return Budget(tokens=None if tokens is None else int(tokens), usd=usd)


def admit_budget(
    requested: Budget | None, team: TeamSpec, policy_name: str, policy: TenantPolicy
) -> Budget | None:
    """The budget a tenant's job runs under: asked for (or the team's), within the ceiling.

    Raises:
        Forbidden: ``requested`` goes past the policy's ``max_budget`` (a team's own budget
            past it is lowered to it instead: the tenant did not ask for it).
    """
    ceiling = policy.max_budget
    if ceiling is None:
        return requested or team.budget
    if requested is not None and not _within(requested, ceiling):
        raise refusal(
            [("budget", f"{requested.model_dump()} exceeds the ceiling {ceiling.model_dump()}")],
            policy_name,
        )
    return _capped(requested or team.budget, ceiling)


def admit_attachments(
    attachments: Sequence[Attachment], policy_name: str, policy: TenantPolicy
) -> None:
    """Refuse image URLs unless the policy allows them (a model server may fetch them).

    Raises:
        Forbidden: an attachment is a URL and ``policy.image_urls`` is off.
    """
    if policy.image_urls:
        return
    refused = [
        (f"attachments.{n}.url", "images by URL are not allowed; send them as data_b64")
        for n, attachment in enumerate(attachments)
        if attachment.url is not None
    ]
    if refused:
        raise refusal(refused, policy_name)


def admit_registered(name: str, policy_name: str, policy: TenantPolicy) -> None:
    """Refuse a registered team the policy does not list.

    Raises:
        Forbidden: ``policy.teams`` is set and ``name`` is not in it.
    """
    if policy.teams is not None and name not in policy.teams:
        raise refusal([("team", f"team {name!r} is not one this tenant may run")], policy_name)


def admit_skill(skill: SkillSpec, policy_name: str, policy: TenantPolicy) -> None:
    """Refuse a skill version the policy keeps from the tenant (an experiment's arm).

    Raises:
        Forbidden: ``policy.skills`` does not list the skill, or ``policy.teams`` the team
            a ``team:<name>`` version runs.
    """
    problems = _skill_problems(skill, policy)
    if problems:
        raise refusal(problems, policy_name)


def readmit(job: Job, policy_name: str, policy: TenantPolicy) -> None:
    """Admit a stored job again, under its tenant's policy of today, before it runs again.

    A fork, a graph's resume and a restarted orchestrator's resume start work from a job
    admitted earlier, under the policy in force then; each calls this first, so that a
    model alias, tool, cap, registered team, skill, budget or image URL the tenant may no
    longer ask for is refused as it would be on a new job. Callers skip what an admin asks
    (a resume of an admin's job, a fork an admin makes), as submit does.

    What is checked: a skill job's skill (and a ``team:<name>`` skill's team); else a
    registered team's name, or the tenant's inline team (scoped to it) field by field; the
    budget the job runs under, which must be within today's ``max_budget`` in every measure
    it limits (refused, not lowered: the job was planned under the budget it has, and a
    job without one is unbounded); images by URL.

    Raises:
        Forbidden: every refused field, in ``detail['problems']``.
    """
    problems: list[tuple[str, str]] = []
    if job.skill is not None:
        problems += _skill_problems(job.skill, policy)
    elif runs_inline(job) or (job.admin and not job.registered):
        # the tenant's inline team, or an admin's (not registered) that a tenant now runs
        problems += _inline_problems(job.team, policy)
    elif policy.teams is not None and job.team.name not in policy.teams:
        problems.append(("team", f"team {job.team.name!r} is not one this tenant may run"))
    ceiling = policy.max_budget
    if ceiling is not None and not _within(job.budget, ceiling):
        had = (
            "none (unbounded)" if job.budget is None else job.budget.model_dump(exclude={"account"})
        )
        limit = ceiling.model_dump(exclude={"account"})
        problems.append(("budget", f"{had} exceeds the ceiling {limit}"))
    if not policy.image_urls:
        problems += [
            (f"images.{n}.url", "images by URL are not allowed; send them as data_b64")
            for n, image in enumerate(job.images)
            if image.url is not None
        ]
    if problems:
        raise refusal(problems, policy_name)


def runs_inline(job: Job) -> bool:
    """Whether ``job`` runs an inline team (a tenant's or an admin's), not a registered one.

    Inline teams, and only they, are named in their tenant's scope (:func:`scope_inline`);
    that holds for jobs read back from the journal too, which do not keep ``registered``.
    """
    scoped = job.team.name.startswith(f"{tenant_scope(job.tenant)}.")
    return scoped and job.skill is None and not job.registered


def _skill_problems(skill: SkillSpec, policy: TenantPolicy) -> list[tuple[str, str]]:
    problems = []
    if policy.skills is not None and skill.name not in policy.skills:
        problems.append(("skill", f"skill {skill.name!r} is not one this tenant may run"))
    if skill.team is not None and policy.teams is not None and skill.team not in policy.teams:
        problems.append(("team", f"team {skill.team!r} (of skill {skill.ref}) is not one this "
                                 "tenant may run"))  # fmt: skip
    return problems


def admit_suite(suite: EvalSuite, policy_name: str, policy: TenantPolicy) -> None:
    """Refuse what a tenant's eval suite may not ask of the cluster.

    A ``custom`` scorer is an import path the orchestrator would call with a model's answer:
    the operator's to name, never a tenant's. A ``judge`` uses a model alias the policy
    allows (its calls are the tenant's spend).

    Raises:
        Forbidden: every refused expectation, in ``detail['problems']``.
    """
    problems = []
    for case in suite.cases:
        for n, expect in enumerate(case.expect):
            where = f"cases.{case.id}.expect.{n}"
            if isinstance(expect, CustomExpect):
                problems.append((where, "custom scorers are the operator's (an import path)"))
            elif isinstance(expect, JudgeExpect) and expect.model not in policy.models:
                problems.append((where, f"judge model {expect.model!r} is not allowed "
                                        f"({', '.join(policy.models)})"))  # fmt: skip
    if problems:
        raise refusal(problems, policy_name)


def admit_inline(team: TeamSpec, tenant: str, policy_name: str, policy: TenantPolicy) -> TeamSpec:
    """A tenant's inline team, checked against its policy and named in its scope.

    Raises:
        Forbidden: a field the policy refuses (every one is listed in ``detail['problems']``).
        ConfigError: the team's names are too long once scoped to the tenant.
    """
    problems = _inline_problems(team, policy)
    if problems:
        raise refusal(problems, policy_name)
    return scope_inline(team, tenant)


def scope_inline(team: TeamSpec, tenant: str, *, registered: Set[str] = frozenset()) -> TeamSpec:
    """``team`` (given inline) with its own names and its delegates' scoped to ``tenant``.

    Its agents are then actors of the tenant's own (``agent/acme-3f2a9c.ada``), which no
    registered team's agent and no other tenant's can be. ``registered``: agent names of
    registered teams that its ``delegates`` may name as they are (an admin's team may ask
    them; a tenant's names only its own agents, so it passes none). Only the names change:
    the team is not validated again (the orchestrator judges its plan as it did before).

    Raises:
        ConfigError: a name is too long, or otherwise no name, once scoped to the tenant.
    """
    name = scoped_name(tenant, team.name)
    agents = tuple(a.model_copy(update={"name": scoped_name(tenant, a.name)}) for a in team.agents)
    delegates = tuple(d if d in registered else scoped_name(tenant, d) for d in team.delegates)
    problems = [
        f"{where}: {scoped!r} is no name (at most 64 letters, digits, '.', '_' and '-')"
        for where, scoped in (
            ("name", name),
            *((f"agents.{n}.name", a.name) for n, a in enumerate(agents)),
            *((f"delegates.{n}", d) for n, d in enumerate(delegates)),
        )
        if not _NAME.fullmatch(scoped)
    ]
    if problems:
        raise ConfigError(
            f"team {team.name!r} does not fit once its names are scoped to the tenant "
            f"({scoped_name(tenant, '')}...): {'; '.join(problems)}",
            problems=problems,
        )
    return team.model_copy(update={"name": name, "agents": agents, "delegates": delegates})


def _inline_problems(team: TeamSpec, policy: TenantPolicy) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not policy.inline_teams:
        return [("team", "inline teams are not allowed; name a registered team")]
    aliases = ", ".join(policy.models) or "none"
    problems += [
        (
            f"team.models.{alias}",
            "inline teams may not define models (providers, endpoints, key variables and "
            f"prices are the operator's); use an allowed alias: {aliases}",
        )
        for alias in team.models
    ]
    problems += [
        (f"team.functions.{name}", "a tenant's team may not name shipped functions (a driver's "
         "code); use the tools its policy allows")
        for name in team.functions
    ]  # fmt: skip
    if team.planner_model not in policy.models:
        problems.append(("team.planner_model", f"alias not allowed (allowed: {aliases})"))
    if len(team.agents) > policy.max_agents:
        problems.append(("team.agents", f"{len(team.agents)} agents; at most {policy.max_agents}"))
    for n, agent in enumerate(team.agents):
        where = f"team.agents.{n}"
        if agent.model not in policy.models:
            problems.append((f"{where}.model", f"alias {agent.model!r} not allowed ({aliases})"))
        refused = [t for t in agent.tools if t not in policy.tools]
        if refused:
            allowed = ", ".join(policy.tools) or "none"
            problems.append((f"{where}.tools", f"not allowed: {refused} (allowed: {allowed})"))
        problems += _cap(f"{where}.max_turns", agent.max_turns, policy.max_turns)
        problems += _cap(
            f"{where}.max_concurrency", agent.max_concurrency, policy.max_agent_concurrency
        )
        if agent.num_cpus > 0:
            problems.append((f"{where}.num_cpus", "CPU reservations are the operator's; use 0"))
    problems += _cap("team.max_parallel", team.max_parallel, policy.max_parallel)
    problems += _cap("team.max_subtasks", team.max_subtasks, policy.max_subtasks)
    problems += _cap("team.subtask_timeout_s", team.subtask_timeout_s, policy.max_timeout_s)
    ceiling = policy.max_budget
    if ceiling is not None and team.budget is not None and not _within(team.budget, ceiling):
        problems.append(("team.budget", f"exceeds the ceiling {ceiling.model_dump()}"))
    for n, subtask in enumerate(team.plan or ()):
        problems += _cap(f"team.plan.{n}.redundancy", subtask.redundancy, policy.max_redundancy)
        problems += _cap(f"team.plan.{n}.timeout_s", subtask.timeout_s, policy.max_timeout_s)
    if team.graph is not None:
        problems += _graph_problems(team.graph, policy)
    return problems


def _graph_problems(graph: GraphSpec, policy: TenantPolicy) -> list[tuple[str, str]]:
    """A tenant's graph names no code, and no team or skill its policy keeps from it."""
    problems = _cap("team.graph.max_steps", graph.max_steps, policy.max_graph_steps)
    problems += [
        ("team.graph.state", f"{path!r} is code: only the operator's configuration may name "
         "a state model or a reducer function; use a json_schema and built-in reducers")
        for path in graph.import_paths
    ]  # fmt: skip
    for node in graph.walk():
        where = f"team.graph.nodes.{node.id}"
        if node.team is not None and policy.teams is not None and node.team not in policy.teams:
            problems.append((f"{where}.team", f"team {node.team!r} is not one it may run"))
        skill = (node.skill or "").partition("@")[0]
        if node.skill is not None and policy.skills is not None and skill not in policy.skills:
            problems.append((f"{where}.skill", f"skill {skill!r} is not one it may run"))
        if node.graph is not None:
            problems += _cap(f"{where}.graph.max_steps", node.graph.max_steps,
                             policy.max_graph_steps)  # fmt: skip
    return problems


def _cap(field: str, value: float | None, cap: float) -> list[tuple[str, str]]:
    if value is not None and value > cap:
        return [(field, f"{value} is over the cap of {cap}")]
    return []
