"""The job console: static files under ``/console/``.

What it reads are declared operations (jobs, approvals, graph inputs, usage, dead letters),
scoped like the rest: a tenant's key sees its tenant's; dead letters and every tenant's usage
take an admin key. The console's files are served without a key (they hold no data: the
page asks for a key and calls the API with it), with a Content-Security-Policy that allows
only their own scripts and styles, and requests to this origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONSOLE_DIR", "console_app"]

CONSOLE_DIR: Final = Path(__file__).parent / "console"
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_SUMMARY_STATUSES: Final = (
    "pending|planning|running|awaiting_approval|awaiting_input|aggregating|"
    "succeeded|failed|cancelled|live"
)


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
