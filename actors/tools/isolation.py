"""Run untrusted code (the built-in ``python`` and ``shell`` tools) in an isolated child process.

Each run starts ``_launcher.py`` (a standalone script) with ``start_new_session=True`` and an
empty environment; the launcher builds new network, mount, pid, IPC and UTS namespaces (inside
a user namespace of its own when the service is not root), a read-only root of the system's
directories only, and execs the program with rlimits, without privileges, and with ``/tmp``
bound to the caller's scratch directory. No ``preexec_fn`` is used: Ray actor processes are
multi-threaded.

The wall timeout (or a cancelled call) kills the namespace's init, which the launcher reaps
(then the whole process group, if still needed): the kernel ends everything in the pid
namespace, so nothing the program started survives a run, even after ``setsid()``
(:mod:`raytroupe.actors.tools.supervision` watches the launcher while it runs). Hosts
that cannot isolate fail closed with :class:`~raytroupe.protocols.errors.SandboxUnavailable` unless
``allow_unisolated=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict

from raytroupe.actors.tools.supervision import LauncherStatus, supervise
from raytroupe.protocols.config.tools import Limits, ResourceLimits
from raytroupe.protocols.errors import SandboxUnavailable, ToolError

__all__ = ["LAUNCHER", "Isolation", "Limits", "ResourceLimits", "RunResult"]

log = structlog.get_logger("raytroupe.tools")

LAUNCHER = Path(__file__).with_name("_launcher.py")
_PROBE_STATE = frozenset({"_probe", "_probe_lock", "_probing"})
_SANDBOX_TMP = "/tmp"  # noqa: S108 - inside the sandbox, /tmp is the private scratch directory
_BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": _SANDBOX_TMP, "LANG": "C.UTF-8"}
_PROBE_TIMEOUT_S = 30.0
_APPARMOR_USERNS = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"


class RunResult(BaseModel):
    """How a run ended, with its (possibly truncated) output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    isolation: Literal["namespaces", "none"]

    @property
    def ok(self) -> bool:
        """The program exited with status 0 within its time."""
        return self.exit_code == 0 and not self.timed_out


def _userns_hint() -> str:
    """Why a user namespace may have no rights here, where a host setting says so."""
    if os.geteuid() == 0:
        return ""
    with contextlib.suppress(OSError):
        if Path(_APPARMOR_USERNS).read_text().strip() == "1":
            return (
                f"; {_APPARMOR_USERNS} is 1: AppArmor gives unprivileged user namespaces no "
                "rights (Ubuntu 23.10 and later); cluster.yaml's setup sets it to 0"
            )
    return ""


class Isolation:
    """Runs programs isolated from the host: namespaces, a system-only root and rlimits.

    ``uid``/``gid`` are the ids programs run as when the service is root; without root,
    programs keep the service's uid (in a user namespace, with no capabilities).
    """

    def __init__(
        self,
        *,
        uid: int = 65534,
        gid: int = 65534,
        python: str = "/usr/bin/python3",
        allow_unisolated: bool = False,
    ) -> None:
        self.uid = uid
        self.gid = gid
        self.python = python
        self.allow_unisolated = allow_unisolated
        self._warned = False
        self._reset_probe()

    def _reset_probe(self) -> None:
        # One probe at a time: it spawns from an event loop of its own (in a thread), and
        # uvloop (Ray's loop) refuses to spawn while another loop of the process is spawning
        # ("Racing with another loop to spawn a process"); concurrent first calls did that.
        self._probe: tuple[bool, str] | None = None
        self._probe_lock = threading.Lock()
        self._probing: asyncio.Future[tuple[bool, str]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # another process may be on another host: it probes again
        return {k: v for k, v in self.__dict__.items() if k not in _PROBE_STATE}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset_probe()

    def probe(self) -> tuple[bool, str]:
        """Whether this host can isolate (cached): runs the launcher once with ``/bin/true``."""
        with self._probe_lock:
            if self._probe is None:
                self._probe = self._probe_once()
            return self._probe

    def _probe_once(self) -> tuple[bool, str]:
        if not sys.platform.startswith("linux"):
            return False, f"namespaces need Linux, this is {sys.platform}"
        with tempfile.TemporaryDirectory(prefix="troupe-probe-") as tmp:
            limits = ResourceLimits(wall_s=_PROBE_TIMEOUT_S)
            config = self._config(["/bin/true"], self._prepare_scratch(Path(tmp)), limits, None)
            run = self._execute(config, b"", limits, "namespaces")
            with ThreadPoolExecutor(1) as pool:  # a loop of its own, whoever the caller is
                try:
                    result = pool.submit(asyncio.run, run).result()
                except (ToolError, OSError) as exc:
                    return False, f"the isolation probe failed: {exc}{_userns_hint()}"
        if result.exit_code != 0:
            failure = result.stderr.strip() or result
            return False, f"the isolation probe failed: {failure}{_userns_hint()}"
        if os.geteuid() == 0:
            return True, (
                f"namespaces (net, mount, pid, ipc, uts), a read-only system-only root, "
                f"uid {self.uid} and rlimits work"
            )
        return True, (
            "a user namespace with namespaces (net, mount, pid, ipc, uts), a read-only "
            f"system-only root and rlimits work (not root: programs keep uid {os.geteuid()})"
        )

    async def _isolated(self) -> bool:
        if self._probe is not None:
            ok, reason = self._probe
        else:  # concurrent first calls share one probe, and none spawns while it runs
            if self._probing is None:
                self._probing = asyncio.ensure_future(asyncio.to_thread(self.probe))
                self._probing.add_done_callback(self._probed)
            ok, reason = await asyncio.shield(self._probing)
        if ok:
            return True
        if not self.allow_unisolated:
            raise SandboxUnavailable(
                f"refusing to run untrusted code: this host cannot isolate it ({reason})",
                reason=reason,
            )
        if not self._warned:
            self._warned = True
            log.warning("sandbox_unisolated", reason=reason, protection="rlimits, env, session")
        return False

    def _probed(self, future: asyncio.Future[tuple[bool, str]]) -> None:
        if self._probing is future:
            self._probing = None  # the result is cached by probe(); a failure may be retried

    async def run(
        self,
        argv: Sequence[str],
        *,
        scratch: Path,
        stdin: bytes = b"",
        limits: ResourceLimits = ResourceLimits(),  # noqa: B008 - frozen: one shared default is safe
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``argv`` isolated, with ``/tmp`` (its cwd and HOME) being ``scratch``."""
        if not argv:
            raise ToolError("nothing to run: empty argv")
        isolate = await self._isolated()
        prepared = self._prepare_scratch(scratch)
        config = self._config(argv, prepared, limits, env, isolate=isolate)
        return await self._execute(config, stdin, limits, "namespaces" if isolate else "none")

    async def run_python(
        self,
        code: str,
        *,
        scratch: Path,
        limits: ResourceLimits = ResourceLimits(),  # noqa: B008 - frozen: one shared default is safe
    ) -> RunResult:
        """Run Python source with the system interpreter (``-I -S``) from a file in scratch.

        The file has a name of its own (``main-<random>.py``), so that the calls of one job,
        which share its scratch directory, never run each other's code; it is removed after.
        """
        isolate = await self._isolated()
        name = f"main-{secrets.token_hex(8)}.py"
        path = self._prepare_scratch(scratch) / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, code.encode("utf-8", errors="surrogatepass"))
                if os.geteuid() == 0:
                    os.fchown(fd, self.uid, self.gid)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ToolError(f"cannot write {name} to the scratch directory: {exc}") from exc
        script = f"{_SANDBOX_TMP}/{name}" if isolate else str(path)
        try:
            return await self.run([self.python, "-I", "-S", script], scratch=scratch, limits=limits)
        finally:
            path.unlink(missing_ok=True)  # removes a link planted in its place, never its target

    def _prepare_scratch(self, scratch: Path) -> Path:
        path = Path(scratch).resolve()
        try:
            path.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                os.chown(path, self.uid, self.gid, follow_symlinks=False)
            os.chmod(path, 0o700, follow_symlinks=False)
        except (OSError, OverflowError) as exc:
            raise ToolError(f"cannot prepare the scratch directory {path}: {exc}") from exc
        return path

    def _config(
        self,
        argv: Sequence[str],
        scratch: Path,
        limits: ResourceLimits,
        env: Mapping[str, str] | None,
        *,
        isolate: bool = True,
    ) -> dict[str, Any]:
        home = _SANDBOX_TMP if isolate else str(scratch)
        full_env = {**_BASE_ENV, "HOME": home}
        if not isolate:
            full_env["TMPDIR"] = str(scratch)
        full_env.update(env or {})  # a NUL or '=' in a name: the exec fails, exit code 127
        return {
            "isolate": isolate,
            "argv": [str(arg) for arg in argv],
            "env": full_env,
            "scratch": str(scratch),
            "uid": self.uid,
            "gid": self.gid,
            "tmpfs_mb": limits.file_mb,
            "limits": {
                "as_bytes": limits.memory_mb * 2**20,
                "cpu_s": limits.cpu_s,
                "fsize_bytes": limits.file_mb * 2**20,
                "nofile": limits.open_files,
                "nproc": limits.processes,
            },
        }

    @staticmethod
    def _command(config: dict[str, Any], status_fd: int) -> list[str]:
        payload = json.dumps({**config, "status_fd": status_fd})
        return [sys.executable, "-I", "-S", str(LAUNCHER), payload]

    async def _execute(
        self,
        config: dict[str, Any],
        stdin: bytes,
        limits: ResourceLimits,
        isolation: Literal["namespaces", "none"],
    ) -> RunResult:
        started = time.monotonic()
        status_r, status_w = os.pipe()
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self._command(config, status_w),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env={},
                    start_new_session=True,
                    pass_fds=(status_w,),
                )
            finally:
                os.close(status_w)
            status = LauncherStatus(status_r)
            out, err, timed_out = await supervise(proc, status, stdin, limits, isolation)
            exit_code, signum = status.outcome(proc.returncode)
        finally:
            os.close(status_r)
        return RunResult(
            exit_code=exit_code,
            signal=signum,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            isolation=isolation,
        )
