"""What a job runs: the skill it names, or the route among what it may run, and its arm.

:class:`WhatRuns` is a part of the front desk (:class:`~raytroupe.actors.desk.actor.FrontDesk`
asks it while it admits a job): a skill named by the job, as the tenant's policy admits it
and as a running experiment splits it; or, for a job that names nothing, the intent cascade
over the tenant's skills and registered teams (see :mod:`raytroupe.actors.skills.routing`).
"""

from __future__ import annotations

from typing import Any

import structlog

from raytroupe.actors.desk.catalog import TeamCatalog
from raytroupe.actors.desk.intent import TeamChooser
from raytroupe.actors.evals.experiments import Assignment, ExperimentDesk
from raytroupe.actors.orchestrator.admission import PolicyBook, admit_skill
from raytroupe.actors.skills.config import RoutingConfig
from raytroupe.actors.skills.desk import SkillDesk
from raytroupe.actors.skills.routing import routing_config
from raytroupe.actors.skills.run import check_input, skill_team
from raytroupe.protocols import Forbidden, TeamSpec, TenantPolicy
from raytroupe.protocols.intent import IntentChoice
from raytroupe.protocols.skill import SkillSpec

__all__ = ["WhatRuns"]

log = structlog.get_logger("raytroupe.desk")


class WhatRuns:
    """The skill, team, route and experiment arm of a job being admitted (the desk's)."""

    def __init__(
        self,
        policies: PolicyBook,
        skills: SkillDesk,
        experiments: ExperimentDesk,
        catalog: TeamCatalog,
        *,
        chooser: TeamChooser,
        routing: RoutingConfig,
    ) -> None:
        self._policies = policies
        self._skills = skills
        self._experiments = experiments
        self._catalog = catalog
        self._chooser = chooser
        self._routing = routing

    async def skill_for(
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
        config, kinds = routing_config(self._skills.visible(allowed), teams, self._routing)
        route = await self._chooser.route(job_id, task, tenant, config)
        route = route.model_copy(update={"kind": kinds[route.target]})
        if route.kind == "skill":
            return self._skills.registry.get(route.target), None, route
        return None, route.target, route
