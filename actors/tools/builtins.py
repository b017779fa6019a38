"""Built-in tools: calculator, python and shell (isolated), http_get, file read and write.

Each runner takes the validated arguments and a :class:`ToolContext` and returns the result's
data, or raises a ``ToolError`` whose detail the model gets to see.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from raytroupe.actors.outbound import Outbound, OutboundRefused
from raytroupe.actors.tools.calculator import CALCULATOR, evaluate
from raytroupe.actors.tools.isolation import Isolation, ResourceLimits, RunResult
from raytroupe.protocols import AgentMessage, ToolDef, ToolError
from raytroupe.protocols.llm import ToolArguments

__all__ = ["BuiltinSettings", "Runner", "ToolContext", "builtin_tools"]


@dataclass(frozen=True)
class ToolContext:
    """Who is calling, for which job, and where that job may keep files."""

    job_id: str | None
    task_id: str | None
    agent: str
    scratch: Path
    envelope: AgentMessage | None = None
    """The envelope the call came in: what work a tool sends on (delegate, handoff) derives
    from, so that it keeps the caller's tenant, job, trace, deadline, hops and budget."""


Runner = Callable[[ToolArguments, ToolContext], Awaitable[object]]


@dataclass(frozen=True)
class BuiltinSettings:
    """What the built-ins may do."""

    isolation: Isolation
    limits: ResourceLimits
    enable_shell: bool
    http_allow_domains: tuple[str, ...]
    http_max_bytes: int
    http_timeout_s: float
    file_max_bytes: int
    outbound: Outbound


def _object(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _ran(result: RunResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "exit_code": result.exit_code,
    }
    if result.timed_out or result.exit_code != 0:
        why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
        tail = result.stderr.strip().splitlines()[-3:]
        raise ToolError(
            f"the program {why}" + (f": {' | '.join(tail)}" if tail else ""),
            **data,
            timed_out=result.timed_out,
            signal=result.signal,
        )
    return data


def _scratch_fd(scratch: Path, relative: str, *, create_dirs: bool) -> tuple[int, str]:
    """An open descriptor of the file's directory inside ``scratch``, and the file's name.

    Every component is opened relative to the previous one with ``O_NOFOLLOW``, so a symlink
    that sandboxed code plants in the scratch directory can never lead a root-owned read or
    write outside it, not even by swapping a directory for a link in the middle of a call.

    Raises:
        ToolError: the path is absolute, climbs out with '..', or crosses a symlink.
    """
    parts = [p for p in Path(relative).parts if p not in {"", "."}]
    if Path(relative).is_absolute() or not parts or ".." in parts:
        raise ToolError(f"path {relative!r} leaves the job's scratch directory")
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            if create_dirs:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                raise ToolError(f"cannot open {relative!r}: {e.strerror}") from None
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _read_file(scratch: Path, relative: str, max_bytes: int) -> str:
    dir_fd, name = _scratch_fd(scratch, relative, create_dirs=False)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as e:
        raise ToolError(f"cannot read {relative!r}: {e.strerror}") from None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(max_bytes).decode("utf-8", "replace")


def _write_file(scratch: Path, relative: str, text: str, max_bytes: int) -> dict[str, Any]:
    data = text.encode()
    if len(data) > max_bytes:
        raise ToolError(f"content is larger than {max_bytes} bytes")
    dir_fd, name = _scratch_fd(scratch, relative, create_dirs=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)  # readable by the sandbox's user
    except OSError as e:
        raise ToolError(f"cannot write {relative!r}: {e.strerror}") from None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return {"path": relative, "bytes": len(data)}


def builtin_tools(settings: BuiltinSettings) -> dict[str, tuple[ToolDef, Runner]]:
    """The built-in tools under ``settings`` (``shell`` only when enabled)."""
    iso, limits = settings.isolation, settings.limits

    async def calculator(args: ToolArguments, _: ToolContext) -> object:
        return evaluate(str(args["expression"]))

    async def python(args: ToolArguments, ctx: ToolContext) -> object:
        return _ran(await iso.run_python(str(args["code"]), scratch=ctx.scratch, limits=limits))

    async def shell(args: ToolArguments, ctx: ToolContext) -> object:
        argv = ["/bin/sh", "-c", str(args["command"])]
        return _ran(await iso.run(argv, scratch=ctx.scratch, limits=limits))

    async def http_get(args: ToolArguments, _: ToolContext) -> object:
        url = str(args["url"])
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        allowed = any(host == d or host.endswith(f".{d}") for d in settings.http_allow_domains)
        if parts.scheme not in {"http", "https"} or not allowed:
            raise ToolError(
                f"http_get may only fetch http(s) URLs of {list(settings.http_allow_domains)}",
                url=url,
            )
        try:  # a clear refusal here; the transport checks every connection again
            await settings.outbound.check_url(url)
        except OutboundRefused as exc:
            raise ToolError(f"http_get refused: {exc}", url=url) from None
        body = bytearray()
        transport = settings.outbound.httpx_transport()
        async with httpx.AsyncClient(
            timeout=settings.http_timeout_s, transport=transport
        ) as client:
            try:
                async with client.stream("GET", url, follow_redirects=False) as response:
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > settings.http_max_bytes:
                            break
            except httpx.HTTPError as e:
                raise ToolError(f"http_get failed: {type(e).__name__}: {e}", url=url) from None
        truncated = len(body) > settings.http_max_bytes
        location = response.headers.get("location") if response.is_redirect else None
        return {
            "status": response.status_code,
            **({"location": location} if location else {}),
            "content_type": response.headers.get("content-type", ""),
            "text": bytes(body[: settings.http_max_bytes]).decode("utf-8", "replace"),
            "truncated": truncated,
        }

    async def file_read(args: ToolArguments, ctx: ToolContext) -> object:
        return _read_file(ctx.scratch, str(args["path"]), settings.file_max_bytes)

    async def file_write(args: ToolArguments, ctx: ToolContext) -> object:
        return _write_file(
            ctx.scratch, str(args["path"]), str(args["content"]), settings.file_max_bytes
        )

    isolated = {"timeout_s": limits.wall_s + 5, "isolated": True}
    tools: dict[str, tuple[ToolDef, Runner]] = {
        "calculator": (
            ToolDef(tags=("math",), **CALCULATOR.model_dump()),
            calculator,
        ),
        "python": (
            ToolDef(
                name="python",
                description="Run a Python 3 program in an isolated sandbox (no network; only "
                "the job's scratch directory, mounted at /tmp, is writable). Returns its "
                "stdout, stderr and exit code; print what you need.",
                parameters=_object({"code": {"type": "string", "minLength": 1}}, ["code"]),
                tags=("code", "compute"),
                **isolated,
            ),
            python,
        ),
        "http_get": (
            ToolDef(
                name="http_get",
                description="Fetch a web page over HTTP(S) from an allowed domain (redirects "
                "are not followed: the answer gives the status and its location).",
                parameters=_object({"url": {"type": "string", "minLength": 1}}, ["url"]),
                timeout_s=settings.http_timeout_s + 5,
                tags=("web",),
            ),
            http_get,
        ),
        "file_read": (
            ToolDef(
                name="file_read",
                description="Read a text file from the job's scratch directory.",
                parameters=_object({"path": {"type": "string", "minLength": 1}}, ["path"]),
                tags=("files",),
            ),
            file_read,
        ),
        "file_write": (
            ToolDef(
                name="file_write",
                description="Write a text file into the job's scratch directory.",
                parameters=_object(
                    {"path": {"type": "string", "minLength": 1}, "content": {"type": "string"}},
                    ["path", "content"],
                ),
                side_effects=True,
                tags=("files",),
            ),
            file_write,
        ),
    }
    if settings.enable_shell:
        tools["shell"] = (
            ToolDef(
                name="shell",
                description="Run a /bin/sh command in an isolated sandbox (no network).",
                parameters=_object({"command": {"type": "string", "minLength": 1}}, ["command"]),
                tags=("code",),
                **isolated,
            ),
            shell,
        )
    return tools
