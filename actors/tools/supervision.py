"""One launcher process while it runs: its pipes fed and drained, its status read, its stop.

Output is kept up to a cap per stream (the rest drained and dropped); the launcher's status
pipe says the namespace's init PID, then how the program ended. At the wall deadline, or
when the call is cancelled, init is killed (the launcher reaps it), else the whole group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import TYPE_CHECKING

from raytroupe.protocols.errors import SandboxUnavailable

if TYPE_CHECKING:
    from raytroupe.actors.tools.isolation import ResourceLimits

__all__ = ["Capture", "LauncherStatus", "supervise"]

_CHUNK = 65536
_STATUS_MAX = 65536  # bytes of status lines kept
_GRACE_S = 2.0  # after a kill, how long the pipes may take to report end of file


class Capture:
    """One output stream: keeps the first ``cap`` bytes, drains and discards the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    async def drain(self, stream: asyncio.StreamReader) -> None:
        """Read ``stream`` to its end."""
        while chunk := await stream.read(_CHUNK):
            room = self.cap - len(self.data)
            if len(chunk) > room:
                self.truncated = True
                chunk = chunk[: max(room, 0)]
            self.data += chunk

    def text(self) -> str:
        """What was kept, decoded (bad bytes replaced)."""
        return self.data.decode("utf-8", errors="replace")


async def _feed(writer: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            writer.write(data)
            await writer.drain()
        writer.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class LauncherStatus:
    """The launcher's status pipe (``init PID``, then the outcome), read without blocking."""

    def __init__(self, fd: int) -> None:
        self.fd, self.data = fd, b""
        os.set_blocking(fd, False)

    def first(self, *kinds: str) -> tuple[str, str]:
        """``(kind, value)`` of the first line of one of ``kinds``, else ``("", "")``."""
        with contextlib.suppress(BlockingIOError):
            while len(self.data) < _STATUS_MAX and (chunk := os.read(self.fd, 4096)):
                self.data += chunk
        for line in self.data.decode("utf-8", errors="replace").splitlines():
            kind, _, value = line.strip().partition(" ")
            if kind in kinds:
                return kind, value
        return "", ""

    def outcome(self, returncode: int | None) -> tuple[int | None, int | None]:
        """``(exit_code, signal)``: from the launcher's status line, else its return code."""
        kind, number = self.first("exit", "signal", "setup")
        if kind == "setup":
            raise SandboxUnavailable(f"the sandbox could not be built: {number}", reason=number)
        if kind == "exit" and number.lstrip("-").isdigit():
            return int(number), None
        if kind == "signal" and number.isdigit():
            return None, int(number)
        if returncode is not None and returncode < 0:
            return None, -returncode
        return returncode, None


async def _stop(proc: asyncio.subprocess.Process, status: LauncherStatus) -> None:
    """Kill a run still going: init first (the launcher reaps it), else the whole group."""
    try:
        _, init_pid = status.first("init")
        if init_pid.isdigit() and int(init_pid) > 1 and proc.returncode is None:
            # The launcher lives, so init is not reaped: the pid cannot be anyone else's yet.
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(init_pid), signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_GRACE_S):
                    await proc.wait()
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)


async def supervise(
    proc: asyncio.subprocess.Process,
    status: LauncherStatus,
    stdin: bytes,
    limits: ResourceLimits,
    isolation: str,
) -> tuple[Capture, Capture, bool]:
    """Feed, drain and wait for the launcher until it ends or ``limits.wall_s`` passes.

    Returns its stdout, its stderr and whether it timed out; nothing it started outlives
    the call, even a cancelled one.
    """
    if proc.stdin is None or proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the launcher was started without pipes")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.wall_s
    out, err = Capture(limits.output_bytes), Capture(limits.output_bytes)
    drains = [
        asyncio.create_task(out.drain(proc.stdout)),
        asyncio.create_task(err.drain(proc.stderr)),
    ]
    feeder = asyncio.create_task(_feed(proc.stdin, stdin))
    timed_out = False
    try:
        try:
            async with asyncio.timeout_at(deadline):
                await proc.wait()
        except TimeoutError:
            timed_out = True
            await _stop(proc, status)
        if isolation == "none" and not timed_out:
            _kill_group(proc.pid)  # stragglers; with namespaces none can outlive the run
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(max(deadline, loop.time() + _GRACE_S)):
                await asyncio.gather(*drains)
    finally:
        if proc.returncode is None:
            await _stop(proc, status)  # cancelled, or failed: nothing may outlive the call
        for task in (*drains, feeder):
            task.cancel()
        await asyncio.gather(*drains, feeder, return_exceptions=True)
        await proc.wait()
    return out, err, timed_out
