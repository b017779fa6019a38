"""Teams registered at run time: add, hot-update and remove teams and agents by name.

A registered team is provisioned when it is put (its agents spawned or reconfigured in place,
its models served), so a team that cannot work is refused before anything is stored. Agents
a change leaves out are retired (unregistered from the router, their actors stopped); nothing
else restarts. The catalog is kept in the journal, so a restarted front desk still has it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from pydantic import ValidationError

from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import TeamProvisioner
from raytroupe.protocols import (
    AgentInfo,
    AgentNotFound,
    AgentSpec,
    ConfigError,
    Conflict,
    TeamNotFound,
    TeamSpec,
)
from raytroupe.protocols.inputs import with_load

__all__ = ["TeamCatalog", "with_load"]


class TeamCatalog:
    """Named teams, persisted in ``journal`` (in memory only without one)."""

    def __init__(self, journal: Journal | None, provisioner: TeamProvisioner) -> None:
        self._journal = journal
        self._provisioner = provisioner
        self._teams: dict[str, TeamSpec] = (
            {} if journal is None else {t.name: t for t in journal.teams()}
        )
        self._lock = asyncio.Lock()

    def teams(self) -> dict[str, TeamSpec]:
        """Every registered team, by name."""
        return dict(sorted(self._teams.items()))

    def team(self, name: str) -> TeamSpec:
        """The team registered as ``name``.

        Raises:
            TeamNotFound: no such team.
        """
        try:
            return self._teams[name]
        except KeyError:
            raise TeamNotFound(f"no team is registered as {name!r}", team=name) from None

    def check_unregistered(self, team: TeamSpec) -> None:
        """Refuse a team given inline whose agents would reconfigure a registered team's.

        Agents are actors named by agent name: an inline team reusing a registered agent's
        name with another configuration would change that agent under its team's jobs.

        Raises:
            Conflict: an agent name belongs to a registered team, configured differently.
        """
        registered = {a.name: (t.name, a) for t in self._teams.values() for a in t.agents}
        clashes = sorted(
            a.name for a in team.agents if a.name in registered and registered[a.name][1] != a
        )
        if clashes:
            raise Conflict(
                f"agent names of registered teams, configured differently: {', '.join(clashes)}",
                agents=clashes,
                teams=sorted({registered[name][0] for name in clashes}),
            )

    def agents(self) -> list[AgentInfo]:
        """Every agent of every registered team (``in_flight`` 0: see :func:`with_load`)."""
        return [
            AgentInfo(
                name=agent.name,
                team=team.name,
                role=agent.role,
                model=agent.model,
                tools=agent.tools,
            )
            for team in self._teams.values()
            for agent in team.agents
        ]

    async def put(self, team: TeamSpec, *, create: bool = False) -> bool:
        """Register ``team``, or replace the team of that name in place; True if it is new.

        Its agents are provisioned first (spawned, or reconfigured where they run); agents
        the old version had and the new one lacks are retired.

        Raises:
            Conflict: ``create`` and the name is taken, or an agent name belongs to another
                registered team.
            ConfigError: the team cannot be provisioned (nothing is stored).
        """
        async with self._lock:
            return await self._put(team, create=create)

    async def _put(self, team: TeamSpec, *, create: bool) -> bool:
        old = self._teams.get(team.name)
        if create and old is not None:
            raise Conflict(f"team {team.name!r} already exists", team=team.name)
        owners = self._owners(exclude=team.name)
        taken = sorted(a.name for a in team.agents if a.name in owners)
        if taken:
            raise Conflict(
                f"agent names already used by other teams: {', '.join(taken)}",
                agents=taken,
                teams=sorted({owners[name] for name in taken}),
            )
        await self._provisioner.provision(team)
        self._teams[team.name] = team
        if self._journal is not None:
            self._journal.put_team(team)
        if old is not None:
            kept = {a.name for a in team.agents}
            await self._provisioner.retire([a.name for a in old.agents if a.name not in kept])
        return old is None

    async def delete(self, name: str) -> TeamSpec:
        """Unregister a team and retire its agents; return what it was.

        Raises:
            TeamNotFound: no such team.
        """
        async with self._lock:
            team = self.team(name)
            del self._teams[name]
            if self._journal is not None:
                self._journal.drop_team(name)
            await self._provisioner.retire([a.name for a in team.agents])
            return team

    async def put_agent(self, team_name: str, agent: AgentSpec, *, create: bool = False) -> bool:
        """Add ``agent`` to a registered team, or update the agent of that name in place.

        True if the agent is new. Other agents keep running untouched.

        Raises:
            TeamNotFound: no such team.
            Conflict: ``create`` and the team has an agent of that name, or another team does.
            ConfigError: the changed team cannot be provisioned (nothing changes).
        """
        async with self._lock:
            team = self.team(team_name)
            names = [a.name for a in team.agents]
            if create and agent.name in names:
                raise Conflict(
                    f"team {team_name!r} already has an agent {agent.name!r}", agent=agent.name
                )
            agents = [agent if a.name == agent.name else a for a in team.agents]
            if agent.name not in names:
                agents.append(agent)
            await self._put(_with_agents(team, agents), create=False)
            return agent.name not in names

    async def delete_agent(self, name: str) -> AgentInfo:
        """Remove an agent from its team and stop it; return what it was.

        Raises:
            AgentNotFound: no registered team has an agent of that name.
            ConfigError: it is the team's last agent (delete the team instead), or the team
                needs it (a plan or graph names its role).
        """
        async with self._lock:
            info = next((a for a in self.agents() if a.name == name), None)
            if info is None:
                raise AgentNotFound(f"no registered team has an agent {name!r}", agent=name)
            team = self._teams[info.team]
            await self._put(
                _with_agents(team, [a for a in team.agents if a.name != name]), create=False
            )
            return info

    def _owners(self, *, exclude: str) -> dict[str, str]:
        return {
            agent.name: team.name
            for team in self._teams.values()
            if team.name != exclude
            for agent in team.agents
        }


def _with_agents(team: TeamSpec, agents: Iterable[AgentSpec]) -> TeamSpec:
    """``team`` with other agents, validated again as a whole (roles its plan needs, ...).

    Raises:
        ConfigError: the team would not be valid (no agent left, a role its plan needs gone).
    """
    try:
        changed = TeamSpec.model_validate({**team.model_dump(), "agents": list(agents)})
    except ValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors())
        raise ConfigError(f"team {team.name!r} would not be valid: {problems}") from None
    needed = {s.role for s in changed.plan or ()}
    needed |= {n.role for n in changed.graph.walk() if n.role} if changed.graph else set()
    missing = sorted(needed - set(changed.roles))
    if missing:
        raise ConfigError(
            f"team {team.name!r} would have no agent for roles its plan or graph needs: "
            + ", ".join(missing),
            roles=missing,
        )
    return changed
