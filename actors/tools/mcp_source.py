"""MCP servers as tool sources: their tools as ``ToolDef`` and their calls as ``ToolResult``.

::

    async with MCPToolSource(MCPServerSpec(name="time", command=("mcp-server-time",))) as src:
        defs = await src.tools()
        result = await src.call("get_current_time", {"timezone": "UTC"})

What a caller must know:

- A source belongs to one event loop. One runner task owns each MCP session (mcp's ``Client`` is
  an anyio context that must be entered and left by the same task) and serves calls from any
  task of that loop concurrently.
- ``call`` never raises: a tool's ``is_error`` answer, a protocol error, a timeout ("timed out")
  and a lost server all come back as ``ok=False`` with a ``tool`` error. ``call_id`` is ``""``.
- Restarts: a session known to be dead (the stdio child's output ended, the HTTP transport
  failed) is reconnected before the next request is sent; ``restarts`` counts reconnections. A
  call whose server dies while it runs (or in the instant before its death is noticed) is retried
  once on a fresh session only when the spec says the tools have no side effects; otherwise it
  fails (retryable) and the next call reconnects.
- Python-SDK servers wrap a non-object return as ``{"result": value}`` under a one-property output
  schema titled ``<tool>Output``: both are unwrapped, so ``data`` is the value itself.
- ``close()`` ends the session; mcp stops a stdio child by closing its stdin, then SIGTERM and
  SIGKILL to its process group (a few seconds at most).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from types import TracebackType
from typing import Any, Final, NamedTuple

import anyio
import structlog
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, CallToolResult, TextContent, Tool

from raytroupe.protocols import (
    ErrorCode,
    ErrorPayload,
    MCPServerSpec,
    ToolDef,
    ToolError,
    ToolResult,
)
from raytroupe.protocols.addresses import NAME_PATTERN
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolArguments

__all__ = ["MCPToolSource"]

log = structlog.get_logger("raytroupe.tools.mcp")

_MAX_PAGES: Final = 100
_STOP_TIMEOUT_S: Final = 15.0
_Op = Callable[[Client], Awaitable[Any]]


class _NotSent(Exception):
    """The request never reached the server: its session was already gone."""


class _Lost(Exception):
    """The session died while the request was in flight: the server may have acted on it."""


class _Job(NamedTuple):
    op: _Op
    timeout_s: float
    done: asyncio.Future[Any]


class _Session:
    """One connection, owned by its runner task, which serves the jobs put in its queue."""

    def __init__(self, target: Callable[[_Session], Any], name: str) -> None:
        self.name = name
        self.queue: asyncio.Queue[_Job | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.dead = False
        self.task = asyncio.create_task(self._run(target(self)))

    @property
    def usable(self) -> bool:
        return not self.dead and not self.task.done()

    def end(self) -> None:
        """Mark dead and tell the runner to leave (safe to call more than once)."""
        self.dead = True
        self.queue.put_nowait(None)

    async def submit(self, op: _Op, timeout_s: float) -> Any:
        """Run ``op`` on this session. Raises ``_NotSent``/``_Lost`` if the session is gone."""
        if not self.usable:
            raise _NotSent("the session is closed")
        job = _Job(op, timeout_s, asyncio.get_running_loop().create_future())
        self.queue.put_nowait(job)
        try:
            await asyncio.wait([job.done, self.task], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            job.done.cancel()  # nobody will read the outcome; the job still ends on its timeout
            raise
        if not job.done.done():
            raise _Lost("the MCP session ended")
        return job.done.result()

    async def stop(self) -> None:
        self.end()
        if not (await asyncio.wait([self.task], timeout=_STOP_TIMEOUT_S))[0]:
            self.task.cancel()
            await asyncio.wait([self.task], timeout=_STOP_TIMEOUT_S)

    async def _run(self, target: Any) -> None:
        try:
            async with Client(target, cache=None) as client, anyio.create_task_group() as tg:
                self.ready.set_result(None)
                while (job := await self.queue.get()) is not None:
                    tg.start_soon(self._serve, client, job)
                tg.cancel_scope.cancel()
        except Exception as exc:  # noqa: BLE001 - a broken session is reported to its callers
            if not self.ready.done():
                self.ready.set_exception(exc)
            log.info("mcp_session_ended", server=self.name, error=_describe(exc))
        finally:
            self.dead = True
            if not self.ready.done():
                self.ready.set_exception(_NotSent("the MCP session did not start"))
            while not self.queue.empty():
                if (job := self.queue.get_nowait()) is not None:
                    _settle(job, exc=_NotSent("the MCP session ended"))

    async def _serve(self, client: Client, job: _Job) -> None:
        try:
            with anyio.fail_after(job.timeout_s):
                value = await job.op(client)
        except anyio.get_cancelled_exc_class():
            _settle(job, exc=_Lost("the MCP session ended during the request"))
            raise
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self.end()
            _settle(job, exc=_Lost(exc.message) if exc.code == CONNECTION_CLOSED else exc)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who reports it
            _settle(job, exc=exc)
        else:
            _settle(job, value)


def _settle(job: _Job, value: Any = None, exc: BaseException | None = None) -> None:
    if job.done.done():
        return
    if exc is None:
        job.done.set_result(value)
    else:
        job.done.set_exception(exc)


@asynccontextmanager
async def _stdio(params: StdioServerParameters, on_eof: Callable[[], None]) -> AsyncIterator[Any]:
    """``stdio_client`` that calls ``on_eof`` when the server's output ends (it exited)."""
    relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay(read: Any) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with relay_in:
                async for item in read:
                    await relay_in.send(item)
        on_eof()

    async with stdio_client(params) as (read, write), anyio.create_task_group() as tg:
        tg.start_soon(relay, read)
        try:
            yield relay_out, write
        finally:
            tg.cancel_scope.cancel()


class MCPToolSource:
    """The tools of one MCP server (``spec``), over stdio or streamable HTTP.

    ``start()`` connects (``call`` and ``tools`` connect on first use anyway) and raises
    ``ToolError`` when the server cannot be reached within ``connect_timeout_s``.
    """

    def __init__(self, spec: MCPServerSpec, *, connect_timeout_s: float = 30.0) -> None:
        self.spec = spec
        self.connect_timeout_s = connect_timeout_s
        self._session: _Session | None = None
        self._connections = 0
        self._lock = asyncio.Lock()
        self._closed = False
        self._wrapped: set[str] | None = None

    @property
    def restarts(self) -> int:
        """How many times the server was reconnected (a stdio server: spawned again)."""
        return max(0, self._connections - 1)

    @property
    def connected(self) -> bool:
        """Whether a live session is held (False once a stdio child's exit is noticed)."""
        return self._session is not None and self._session.usable

    async def __aenter__(self) -> MCPToolSource:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect now. Raises ``ToolError`` if the server cannot be reached."""
        self._closed = False
        await self._connected()

    async def close(self) -> None:
        """End the session (calls in flight fail) and stop a stdio server; idempotent."""
        self._closed = True
        async with self._lock:
            session, self._session = self._session, None
            if session is not None:
                await session.stop()

    async def tools(self) -> list[ToolDef]:
        """The server's tools. Raises ``ToolError`` when they cannot be listed."""
        try:
            listed = await self._request(_list_all, self.spec.timeout_s, retry_lost=True)
        except ToolError:
            raise
        except Exception as exc:
            why = f"cannot list the tools of MCP server {self.spec.name!r}: {_describe(exc)}"
            raise ToolError(why, server=self.spec.name) from exc
        defs, wrapped = [], set()
        for tool in listed:
            if not re.fullmatch(NAME_PATTERN, tool.name):
                log.warning("mcp_tool_skipped", server=self.spec.name, tool=tool.name)
                continue
            output = tool.output_schema
            if (inner := _unwrapped(tool.name, output)) is not None:
                wrapped.add(tool.name)
                output = inner
            defs.append(
                ToolDef(
                    name=tool.name,
                    description=tool.description or "",
                    parameters={"type": "object", "properties": {}, **(tool.input_schema or {})},
                    output_schema=output,
                    timeout_s=min(self.spec.timeout_s, 3600.0),
                    side_effects=self.spec.side_effects,
                    source=f"mcp:{self.spec.name}",
                )
            )
        self._wrapped = wrapped
        return defs

    async def call(
        self, tool: str, arguments: ToolArguments, *, timeout_s: float | None = None
    ) -> ToolResult:
        """Call ``tool``; every failure comes back as ``ok=False`` (see the module docstring)."""
        started = time.perf_counter()
        limit = self.spec.timeout_s if timeout_s is None else timeout_s
        data, error, retryable = await self._outcome(tool, arguments, limit)
        payload = None
        if error is not None:
            detail = {"server": self.spec.name, "tool": tool}
            payload = ErrorPayload(
                code=ErrorCode.TOOL, message=error, retryable=retryable, detail=detail
            )
        metadata = {"duration_s": time.perf_counter() - started, "server": self.spec.name}
        return ToolResult(
            call_id="", tool=tool, ok=error is None, data=data, error=payload, metadata=metadata
        )

    async def _outcome(
        self, tool: str, arguments: ToolArguments, limit: float
    ) -> tuple[Any, str | None, bool]:
        """``(data, error message or None, retryable)`` of one call."""
        where = f"MCP tool {tool!r} of server {self.spec.name!r}"
        if self._wrapped is None:
            with suppress(ToolError):
                await self.tools()
        try:
            answer: CallToolResult = await self._request(
                lambda c: c.call_tool(tool, arguments), limit, retry_lost=not self.spec.side_effects
            )
        except Exception as exc:  # noqa: BLE001 - a failed call is an ok=False result
            return None, *_failure(where, limit, exc)
        if answer.is_error:
            return None, _text(answer) or f"{where} reported an error", False
        data = answer.structured_content
        if data is None:
            return _text(answer), None, False
        if tool in (self._wrapped or ()) and isinstance(data, dict) and list(data) == ["result"]:
            data = data["result"]
        return data, None, False

    async def _request(self, op: _Op, timeout_s: float, *, retry_lost: bool) -> Any:
        """Run ``op`` on a live session; reconnect and run it once more if that is safe."""
        try:
            return await (await self._connected()).submit(op, timeout_s)
        except _Lost:
            if not retry_lost:
                raise
        except _NotSent:
            pass
        return await (await self._connected()).submit(op, timeout_s)

    async def _connected(self) -> _Session:
        """The live session, connecting (again) if there is none."""
        async with self._lock:
            if self._closed:
                raise ToolError(f"MCP server {self.spec.name!r}: the source is closed")
            if self._session is not None:
                if self._session.usable:
                    return self._session
                log.warning("mcp_reconnect", server=self.spec.name, restarts=self.restarts + 1)
                old, self._session = self._session, None
                await old.stop()
            session = _Session(self._target, self.spec.name)
            await asyncio.wait([session.ready], timeout=self.connect_timeout_s)
            error = session.ready.exception() if session.ready.done() else None
            if error is not None or not session.ready.done():
                await session.stop()
                why = _describe(error) if error else f"no answer in {self.connect_timeout_s:g} s"
                raise ToolError(
                    f"cannot connect to MCP server {self.spec.name!r}: {why}", server=self.spec.name
                )
            self._session = session
            self._connections += 1
            return session

    def _target(self, session: _Session) -> Any:
        if self.spec.transport == "http":
            return self.spec.url
        command, *args = self.spec.command
        params = StdioServerParameters(command=command, args=args, env=dict(self.spec.env) or None)
        return _stdio(params, session.end)


async def _list_all(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        if (cursor := page.next_cursor) is None:
            break
    return tools


def _unwrapped(tool: str, schema: JsonSchema | None) -> JsonSchema | None:
    """The value schema inside a Python-SDK ``{"result": ...}`` wrapper, or None if not one."""
    if not schema or schema.get("title") != f"{tool}Output" or schema.get("required") != ["result"]:
        return None
    props = schema.get("properties")
    inner = props.get("result") if isinstance(props, dict) and list(props) == ["result"] else None
    return inner if isinstance(inner, dict) else None


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def _failure(where: str, limit: float, exc: Exception) -> tuple[str, bool]:
    """The error message for a call that raised ``exc``, and whether a retry may help."""
    if isinstance(exc, TimeoutError):
        return f"{where} timed out after {limit:g} s", True
    if isinstance(exc, _Lost):
        return f"{where} lost its server during the call ({exc}); the next call reconnects", True
    if isinstance(exc, _NotSent):
        return f"{where}: the server is unavailable ({exc})", True
    if isinstance(exc, ToolError):
        return exc.message, True
    return f"{where} failed: {_describe(exc)}", False


def _describe(exc: BaseException) -> str:
    """A one-line account of ``exc``, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
