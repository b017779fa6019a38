"""Registered teams and their agents: list, read, delete.

Reading is for every caller: a tenant sees the teams its policy lets it run (without their
model definitions: endpoints and key variables are the operator's business) and their agents;
an admin sees them all. Deleting is for admins.
"""

from __future__ import annotations

from typing import Final

from raytroupe.protocols import AgentInfo, TeamNotFound, TeamSpec
from raytroupe.runtime.operations.declare import At, operation

__all__ = ["agents", "delete_agent", "delete_team", "team", "teams", "visible"]

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
