"""``/v1/sessions``: conversations whose jobs see the turns before them.

Sessions are the caller's tenant's, admins included: another tenant's session is 404, as
if it did not exist. A job joins one with ``session_id`` on ``POST /v1/jobs``; the
OpenAI-compatible endpoint with its ``user`` field or an ``X-Session-Id`` header.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from raytroupe.deployments.access import Caller
from raytroupe.protocols.http import SessionCreate
from raytroupe.protocols.sessions import (
    SESSION_ID,
    SessionInfo,
)
from raytroupe.runtime.client import SystemClient

__all__ = ["session_routes"]


SessionPath = Annotated[str, Path(pattern=SESSION_ID)]


def session_routes(client: SystemClient) -> APIRouter:
    """The ``/v1/sessions`` routes."""
    routes = APIRouter(prefix="/v1/sessions", tags=["sessions"])

    @routes.post("", status_code=201, response_model=SessionInfo)
    async def create_session(body: SessionCreate, who: Caller) -> SessionInfo:
        """Start a session of the caller's tenant (the one it has under ``id``, if any)."""
        return await client.create_session(
            who.tenant, body.id, title=body.title, history_tokens=body.history_tokens
        )

    @routes.get("", response_model=list[SessionInfo])
    async def list_sessions(
        who: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[SessionInfo]:
        """The tenant's sessions, the most recently used first (without their turns)."""
        return await client.sessions(tenant=who.tenant, limit=limit)

    @routes.get("/{session_id}", response_model=SessionInfo)
    async def get_session(session_id: SessionPath, who: Caller) -> SessionInfo:
        """The session: its turns (task, status, answer), and the summary of the oldest."""
        return await client.session(session_id, tenant=who.tenant)

    @routes.delete("/{session_id}", status_code=204)
    async def delete_session(session_id: SessionPath, who: Caller) -> Response:
        """Forget the session (its jobs stay)."""
        await client.delete_session(session_id, tenant=who.tenant)
        return Response(status_code=204)

    return routes
