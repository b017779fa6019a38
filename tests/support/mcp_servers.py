"""Small MCP servers for tests, built with ``mcp.server.mcpserver.MCPServer``.

Tools: ``add(a, b) -> int``, ``echo(text) -> str``, ``fail(message)`` (an ``is_error`` result
carrying ``message``), ``slow(seconds) -> str``, ``info() -> {"pid", "marker"}`` (the server's
process id and its ``MCP_TEST_MARKER`` environment variable) and, over stdio only, ``crash()``
(the server process exits at once, without answering).

Over stdio: ``python tests/support/mcp_servers.py stdio`` (see ``STDIO_COMMAND``).
Over streamable HTTP, in a daemon thread of this process, on 127.0.0.1 and a port the OS picks::

    with running_http_server() as url:   # "http://127.0.0.1:<port>/mcp"
        ...
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["HOST", "STDIO_COMMAND", "build_server", "running_http_server"]

HOST = "127.0.0.1"
STDIO_COMMAND: tuple[str, ...] = (sys.executable, str(Path(__file__).resolve()), "stdio")
"""The command that runs the test server over stdio (for ``MCPServerSpec.command``)."""


def build_server(*, with_crash: bool) -> MCPServer:
    """The test server; ``with_crash`` adds ``crash()`` (only safe in a process of its own)."""
    server = MCPServer("raytroupe-test", log_level="WARNING")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Always fail with the given message.")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Sleep, then say how long.")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="The server's process id and its MCP_TEST_MARKER variable.")
    def info() -> dict[str, Any]:
        return {"pid": os.getpid(), "marker": os.environ.get("MCP_TEST_MARKER", "")}

    if with_crash:

        @server.tool(description="Kill the server process without answering.")
        def crash() -> str:
            os._exit(3)

    return server


class _Uvicorn(uvicorn.Server):
    """uvicorn in a non-main thread that says when it accepts connections."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@contextmanager
def running_http_server(port: int = 0, timeout_s: float = 10.0) -> Iterator[str]:
    """Serve the test server (without ``crash``) over streamable HTTP; yield its URL.

    ``port`` 0 lets the OS pick; pass a previous server's port to bring "the same" server back.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(64)
    port = sock.getsockname()[1]
    app = build_server(with_crash=False).streamable_http_app(host=HOST)
    config = uvicorn.Config(
        app,
        host=HOST,
        port=port,
        log_config=None,
        access_log=False,
        ws="none",
        timeout_graceful_shutdown=1,
    )
    ready = threading.Event()
    server = _Uvicorn(config, ready)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"mcp-http-{port}", daemon=True
    )
    thread.start()
    try:
        if not ready.wait(timeout_s) or not server.started:
            raise RuntimeError(f"MCP test server did not start on port {port}")
        yield f"http://{HOST}:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout_s)
        sock.close()
        if thread.is_alive():
            raise RuntimeError(f"MCP test server thread {thread.name} did not stop")


if __name__ == "__main__":
    if sys.argv[1:] != ["stdio"]:
        sys.exit("usage: mcp_servers.py stdio")
    build_server(with_crash=True).run("stdio")
