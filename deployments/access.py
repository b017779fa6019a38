"""Who is calling: FastAPI dependencies for the caller and for admins, and what they may see."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from raytroupe.deployments.guard import Principal, principal_of
from raytroupe.protocols import TeamSpec
from raytroupe.runtime.client import SystemClient

__all__ = ["Admin", "Caller", "NotAdmin", "admin", "caller", "visible_teams"]


async def caller(request: Request) -> Principal:
    """The authenticated caller (the guard has checked the key)."""
    return principal_of(request.scope)


async def admin(request: Request) -> Principal:
    """The caller, who must hold an admin key."""
    principal = principal_of(request.scope)
    if not principal.admin:
        raise NotAdmin(principal.name)
    return principal


class NotAdmin(Exception):
    """The caller's key is not an admin's (answered with 403)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


Caller = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]


async def visible_teams(
    client: SystemClient, who: Principal, teams: dict[str, TeamSpec]
) -> dict[str, TeamSpec]:
    """``teams`` as ``who`` may see them.

    All of them for an admin; for a tenant, those its policy lets it run, without their
    model definitions (endpoints and key variables are the operator's business).
    """
    if who.admin:
        return teams
    policy = await client.policy(who.tenant)
    return {
        name: team.model_copy(update={"models": {}})
        for name, team in teams.items()
        if policy.teams is None or name in policy.teams
    }
