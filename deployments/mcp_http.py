"""``/mcp`` of the Serve application: :mod:`raytroupe.runtime.mcp`'s server over HTTP.

Streamable HTTP, stateless (each request its own exchange, as the protocol's 2026-07-28
revision is): any replica of the Serve deployment answers any request, and a client cancels
a call by closing its response stream. Each request runs for the key the guard checked (its
tenant, its policy, its rate limit). DNS rebinding protection is left off: every request
needs a key, which a page in a browser does not have (a deployment with an anonymous tenant
lets keyless callers in on every route alike).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from raytroupe.deployments.declared import at_of
from raytroupe.deployments.guard import principal_of
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.mcp import mcp_server
from raytroupe.runtime.operations import At

__all__ = ["MCPEndpoint", "mcp_endpoint"]


class MCPEndpoint:
    """The ASGI endpoint of ``/mcp``: the server over stateless streamable HTTP.

    Its session manager's task group starts with the first request (a Serve replica's ASGI
    application has no lifespan of its own to start it in) and lives as long as the replica.
    """

    def __init__(self, server: Server[Any]) -> None:
        self._manager = StreamableHTTPSessionManager(
            app=server,
            stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._running: asyncio.Future[None] | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request (its caller already checked by the guard)."""
        await self._started()
        await self._manager.handle_request(scope, receive, send)

    async def _started(self) -> None:
        if self._running is None:
            self._running = asyncio.get_running_loop().create_future()
            self._keeper = asyncio.create_task(self._keep(self._running))
        await asyncio.shield(self._running)

    async def _keep(self, running: asyncio.Future[None]) -> None:
        async with self._manager.run():
            running.set_result(None)
            await asyncio.Event().wait()  # for the replica's life


def mcp_endpoint(system: SystemClient) -> MCPEndpoint:
    """``/mcp`` of the Serve application: each request runs for the key the guard checked."""

    def at_for(ctx: ServerRequestContext[Any, Any]) -> At:
        request = ctx.request
        if not isinstance(request, Request):  # pragma: no cover - every HTTP request has one
            raise MCPError(-32602, "an MCP request without its HTTP request")
        return at_of(principal_of(request.scope), system, request)

    return MCPEndpoint(mcp_server(at_for))
