"""Registered teams and their agents: register, hot-update, list, read, delete.

Reading is for every caller: a tenant sees the teams its policy lets it run (without their
model definitions: endpoints and key variables are the operator's business) and their agents;
an admin sees them all. Changing them is for admins.

A team registered here is data: one naming shipped functions (Python tools) is refused, on
every surface. The driver's ``put_team(Team)`` ships a team's functions and registers it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols import AgentInfo, AgentSpec, Forbidden, TeamNotFound, TeamSpec
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = [
    "agents",
    "apply_agent",
    "apply_team",
    "create_agent",
    "create_team",
    "data_team",
    "delete_agent",
    "delete_team",
    "team",
    "teams",
    "visible",
]

TAG: Final = "teams and agents"


async def visible(at: At, found: dict[str, TeamSpec]) -> dict[str, TeamSpec]:
    """``found`` as the caller may see them (see the module)."""
    if at.admin:
        return found
    policy = await at.system.policy(at.tenant)
    return {
        name: spec.model_copy(update={"models": {}})
        for name, spec in found.items()
        if policy.teams is None or name in policy.teams
    }


@operation("GET", "/v1/teams", cli="teams list")
async def teams(at: At) -> dict[str, TeamSpec]:
    """Teams registered at run time, by name (a tenant: those it may run)."""
    return await visible(at, await at.system.teams())


@operation("GET", "/v1/teams/{name}", cli="teams show")
async def team(at: At, name: str) -> TeamSpec:
    """One registered team.

    Raises:
        TeamNotFound: none of that name, or not one the caller may run.
    """
    shown = await visible(at, {name: await at.system.team(name)})
    if name not in shown:
        raise TeamNotFound(f"no team is registered as {name!r}", team=name)
    return shown[name]


@operation("DELETE", "/v1/teams/{name}", cli="teams delete", admin=True)
async def delete_team(at: At, name: str) -> TeamSpec:
    """Unregister a team and stop its agents (nothing else restarts); the team it was.

    Raises:
        TeamNotFound: no such team.
    """
    return await at.system.delete_team(name)


@operation("GET", "/v1/agents", cli="agents")
async def agents(at: At) -> list[AgentInfo]:
    """Agents of registered teams, with the envelopes each is handling now.

    A tenant sees the agents of the teams it may run.
    """
    found = await at.system.agents()
    if at.admin:
        return found
    policy = await at.system.policy(at.tenant)
    return [a for a in found if policy.teams is None or a.team in policy.teams]


@operation("DELETE", "/v1/agents/{name}", cli="teams delete-agent", admin=True)
async def delete_agent(at: At, name: str) -> AgentInfo:
    """Remove an agent from its team and stop it; what it was.

    Raises:
        AgentNotFound: no such agent.
    """
    return await at.system.delete_agent(name)


TeamName = Annotated[str, Field(min_length=1, max_length=64, description="The registered team.")]


def data_team(team: TeamSpec) -> TeamSpec:
    """``team``, if it names no shipped functions: a team given as data is not code.

    Raises:
        Forbidden: it has ``functions`` (a Python driver's ``put_team`` or ``submit`` of a
            ``Team`` ships them).
    """
    if team.functions:
        raise Forbidden(
            f"a team given as data may not name shipped functions ({sorted(team.functions)}): "
            "function tools come with teams a Python driver submits or registers",
            field="team.functions",
        )
    return team


@operation("POST", "/v1/teams", cli="teams apply", admin=True, status=201)
async def create_team(at: At, team: TeamSpec | Mapping[str, Any]) -> TeamSpec:
    """Register a new team; its agents start now.

    Raises:
        Conflict: the name is taken, or an agent's name is another team's.
        ConfigError: the team cannot be provisioned (a tool no sandbox has).
        Forbidden: it names shipped functions.
    """
    spec = data_team(given(TeamSpec, team))
    await at.system.put_team(spec, create=True)
    return spec


@operation("PUT", "/v1/teams/{team.name}", cli="teams apply", admin=True, status=201)
async def apply_team(at: At, team: TeamSpec | Mapping[str, Any]) -> TeamSpec:
    """Register a team, or hot-update the one of its name (HTTP: 201 if new, else 200).

    Its agents are reconfigured where they run, those it no longer has stop; nothing else
    restarts.

    Raises:
        Conflict: an agent's name is another team's (or the URL names another team).
        ConfigError: the team cannot be provisioned.
        Forbidden: it names shipped functions.
    """
    spec = data_team(given(TeamSpec, team))
    at.reply.created = await at.system.put_team(spec)
    return spec


@operation("POST", "/v1/agents", cli="teams add-agent", admin=True, status=201)
async def create_agent(at: At, team: TeamName, agent: AgentSpec | Mapping[str, Any]) -> AgentInfo:
    """Add an agent to a registered team; it starts now, the others keep running.

    Raises:
        TeamNotFound: no such team.
        Conflict: the team has that agent already, or another team has that name.
    """
    spec = given(AgentSpec, agent)
    await at.system.put_agent(team, spec, create=True)
    return _info(team, spec)


@operation("PUT", "/v1/agents/{agent.name}", cli="teams add-agent", admin=True, status=201)
async def apply_agent(at: At, team: TeamName, agent: AgentSpec | Mapping[str, Any]) -> AgentInfo:
    """Add an agent to a registered team, or reconfigure the one of its name in place.

    (HTTP: 201 if new, else 200.)

    Raises:
        TeamNotFound: no such team.
        Conflict: another team has that agent (or the URL names another agent).
    """
    spec = given(AgentSpec, agent)
    at.reply.created = await at.system.put_agent(team, spec)
    return _info(team, spec)


def _info(team: str, agent: AgentSpec) -> AgentInfo:
    return AgentInfo(
        name=agent.name, team=team, role=agent.role, model=agent.model, tools=agent.tools
    )
