"""Tenants' inline teams whose agents may be running, kept within each tenant's cap."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from raytroupe.actors.orchestrator.admission import refusal
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import TeamProvisioner
from raytroupe.protocols import TeamSpec, TenantPolicy

__all__ = ["InlineTeams"]

log = structlog.get_logger("raytroupe.desk")


class InlineTeams:
    """Tenants' inline teams whose agents may be running, kept within each tenant's cap.

    Agents outlive their jobs (the next job of the same team reuses them), so a tenant
    sending ever new inline teams would otherwise start actors without end. Each tenant keeps
    at most ``TenantPolicy.max_live_agents`` of them: when a job needs more, the least
    recently used teams that no unfinished job uses are stopped. A team no job has used for
    its tenant's ``TenantPolicy.agents_idle_s`` is stopped too (:meth:`reap`). Recorded in the
    journal, so a restarted desk still knows which actors are whose.
    """

    def __init__(
        self,
        journal: Journal | None,
        provisioner: TeamProvisioner,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal = journal
        self._provisioner = provisioner
        self._clock = clock
        self._lock = asyncio.Lock()
        """One of :meth:`use` and :meth:`reap` at a time: a team is never stopped as it is
        taken."""
        self._teams: dict[str, tuple[str, TeamSpec, float]] = {
            team.name: (tenant, team, at)
            for tenant, team, at in (journal.inline_teams() if journal else [])
        }

    async def use(
        self,
        tenant: str,
        team: TeamSpec,
        policy_name: str,
        policy: TenantPolicy,
        running: set[str],
        *,
        refuse: bool = True,
    ) -> None:
        """Record that a job of ``tenant`` needs ``team``; stop idle teams to make room.

        ``refuse=False`` (an admin's job, a driver script's) stops idle teams the same way,
        but runs the job even if the teams in use leave no room.

        Raises:
            Forbidden: (``refuse``) the tenant's teams in use by unfinished jobs
                (``running``) and this one would run more agents than its policy allows.
        """
        async with self._lock:
            new = team.name not in self._teams
            self._teams[team.name] = (tenant, team, self._clock())
            mine = sorted(
                (at, name, spec)
                for name, (owner, spec, at) in self._teams.items()
                if owner == tenant and name != team.name
            )
            live = len(team.agents) + sum(len(spec.agents) for _, _, spec in mine)
            for _, name, spec in mine:
                if live <= policy.max_live_agents:
                    break
                if name in running:
                    continue
                await self._stop(name, spec)
                live -= len(spec.agents)
            if live > policy.max_live_agents and refuse:
                if new:
                    self._teams.pop(team.name, None)
                raise refusal(
                    [
                        (
                            "team.agents",
                            f"the tenant's unfinished jobs already run {live - len(team.agents)} "
                            f"agents; with these {len(team.agents)} that is over max_live_agents "
                            f"({policy.max_live_agents})",
                        )
                    ],
                    policy_name,
                )
            if self._journal is not None:
                self._journal.use_inline(tenant, team, self._teams[team.name][2])

    def __bool__(self) -> bool:
        """Whether any inline team's agents may be running."""
        return bool(self._teams)

    async def _stop(self, name: str, team: TeamSpec) -> None:
        """Stop ``team``'s agents and forget it (here and in the journal)."""
        await self._provisioner.retire([a.name for a in team.agents])
        self._teams.pop(name, None)
        if self._journal is not None:
            self._journal.drop_inline(name)

    async def reap(self, running: set[str], policies: Callable[[str], TenantPolicy]) -> list[str]:
        """Stop the teams idle for longer than their tenant's ``agents_idle_s``; their names.

        A team an unfinished job uses (``running``) is not idle: it counts as used now, so
        its idle time starts when its last job ends. ``policies`` gives a tenant's policy.
        """
        async with self._lock:
            now = self._clock()
            idle: list[tuple[str, TeamSpec, float]] = []
            for name, (tenant, spec, at) in list(self._teams.items()):
                if name in running:
                    self._teams[name] = (tenant, spec, now)  # in memory: a restart is lenient
                    continue
                after = policies(tenant).agents_idle_s
                if after is not None and now - at > after:
                    idle.append((name, spec, now - at))
            for name, spec, for_s in idle:
                await self._stop(name, spec)
                log.info("inline.stopped_idle", team=name, agents=len(spec.agents), idle_s=for_s)
            return [name for name, _, _ in idle]
