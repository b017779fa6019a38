"""What the job console reads, and the console itself (static files under ``/console/``).

The routes are plain API routes, scoped like the rest: a tenant's key sees its tenant's jobs,
approvals, graph inputs and usage; dead letters and every tenant's usage take an admin key.
The console's files are served without a key (they hold no data: the page asks for a key and
calls these routes with it), with a Content-Security-Policy that allows only their own
scripts and styles, and requests to this origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

from fastapi import APIRouter, Query
from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from raytroupe.deployments.access import Admin
from raytroupe.protocols.http import (
    DeadLetterView,
)
from raytroupe.runtime.client import SystemClient

__all__ = ["CONSOLE_DIR", "console_app", "console_routes"]

CONSOLE_DIR: Final = Path(__file__).parent / "console"
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_SUMMARY_STATUSES: Final = (
    "pending|planning|running|awaiting_approval|awaiting_input|aggregating|"
    "succeeded|failed|cancelled|live"
)


def console_routes(client: SystemClient) -> APIRouter:
    """Who is calling, what waits for people, usage by day, dead letters."""
    routes = APIRouter(prefix="/v1", tags=["console"])

    @routes.get("/dead-letters", response_model=list[DeadLetterView])
    async def list_dead_letters(
        _who: Admin, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[DeadLetterView]:
        """The router's newest dead letters with their reasons, newest first (admins)."""
        letters = await client.dead_letters(limit)
        views = []
        for letter in reversed(letters):
            message = letter.message
            views.append(
                DeadLetterView(
                    at=letter.at,
                    reason=letter.reason,
                    detail=letter.detail,
                    message_id=letter.message_id,
                    job_id=None if message is None else message.job_id,
                    sender=None if message is None else message.sender,
                    recipient=None if message is None else message.recipient,
                    tenant=None if message is None else message.tenant,
                )
            )
        return views

    return routes


def console_app() -> ASGIApp:
    """The console's static files, each response with the console's security headers."""
    files = StaticFiles(directory=CONSOLE_DIR, html=True)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = CSP
                headers["X-Content-Type-Options"] = "nosniff"
                headers["X-Frame-Options"] = "DENY"
                headers["Referrer-Policy"] = "no-referrer"
                headers["Cache-Control"] = "no-cache"
            await send(message)

        await files(scope, receive, with_headers)

    return app
