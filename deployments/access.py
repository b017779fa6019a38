"""Who is calling: FastAPI dependencies for the caller and for admins."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from raytroupe.deployments.guard import Principal, principal_of

__all__ = ["Admin", "Caller", "NotAdmin", "admin", "caller"]


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
