"""The supervisor of one ``llama-server``: a plain class; Ray makes it the actor ``model/<alias>``.

It starts the server on a free port of its node with a key made for it, waits until the model
is loaded, and then watches it: a server that exits, or stops answering its health check
three times running, is killed and started again (with a growing pause), and the endpoint's
``generation`` counts the starts so callers know to reconnect. The server dies with the
supervisor (``PR_SET_PDEATHSIG`` on Linux), so a supervisor that Ray restarts leaves no
orphan behind, and the new one starts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx
import structlog

from raytroupe.actors.llm.local.launch import (
    check_files,
    die_with_parent,
    free_port,
    server_command,
    url_host,
)
from raytroupe.protocols import ConfigError, LocalModel, ProviderUnavailable

__all__ = ["LlamaServer", "LocalEndpoint"]

log = structlog.get_logger(__name__)

HEALTH_EVERY_S: Final = 1.0
"""How often a running server's process and ``/health`` are checked."""
HEALTH_TIMEOUT_S: Final = 10.0
"""How long ``/health`` may take (a loaded 2-core machine answers slowly)."""
UNHEALTHY_AFTER: Final = 3
"""Failed health checks in a row after which the server is killed and started again."""
START_FAILURES: Final = 3
"""Starts in a row that never became ready before the supervisor gives up (until asked again)."""
RESTART_PAUSE_S: Final = (0.2, 1.0, 2.0, 5.0, 10.0)
"""The pause before each restart in a row (the last repeats)."""
LOG_LINES: Final = 40
"""Lines of the server's output kept for error messages."""


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a running server answers, and the key it takes."""

    base_url: str
    api_key: str
    generation: int
    pid: int


class LlamaServer:
    """Runs ``llama-server`` for one :class:`LocalModel` and keeps it running.

    Args:
        alias: the model alias it serves (its actor is ``model/<alias>``).
        spec: the model; :meth:`endpoint` may be given a newer one (the server then restarts).
        host: the address it listens on (under Ray: the node's, so that pools on other nodes
            reach it; the key keeps everyone else out).
        log_dir: where the server's output is written (``llama-server-<alias>.log``).
        health_timeout_s: how long ``/health`` may take before the check counts as failed.
    """

    def __init__(
        self,
        alias: str,
        spec: LocalModel,
        *,
        host: str = "127.0.0.1",
        log_dir: str | Path | None = None,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
    ) -> None:
        self._alias, self._spec, self._host = alias, spec, host
        self._health_timeout_s = health_timeout_s
        root = Path(log_dir) if log_dir else Path(tempfile.gettempdir()) / "raytroupe-models"
        self._log_path = root / f"llama-server-{alias.replace('/', '_')}.log"
        self._process: asyncio.subprocess.Process | None = None
        self._endpoint: LocalEndpoint | None = None
        self._generation = 0
        self._restarts = 0
        self._failed_starts = 0
        self._problem: BaseException | None = None
        self._ready = asyncio.Event()
        self._lock = asyncio.Lock()
        self._watch: asyncio.Task[None] | None = None
        self._tail: deque[str] = deque(maxlen=LOG_LINES)
        self._checked: str | None = None  # the gguf whose sha256 was checked
        self._secret_dir: Path | None = None

    async def on_start(self) -> None:
        """Start the server (in the background: :meth:`endpoint` waits for it)."""
        self._begin()

    async def on_stop(self) -> None:
        """Stop watching and end the server."""
        await self.stop()

    async def endpoint(self, spec: LocalModel | None = None) -> LocalEndpoint:
        """Where the server answers, once its model is loaded (started now if need be).

        Given a ``spec`` other than the one it serves, the server is restarted with it.

        Raises:
            ConfigError: the model file or the server binary is missing, or the file's
                sha256 is not ``spec.sha256``.
            ProviderUnavailable: the server did not become ready in ``startup_timeout_s``,
                or kept failing to start (its last output is in the message).
        """
        if spec is not None and spec != self._spec:
            log.info("local_model_respec", alias=self._alias)
            await self.stop()
            self._spec = spec
            self._checked = None
        if self._process is not None and self._process.returncode is not None:
            self._ready.clear()  # died a moment ago: wait for the watch to start it again
        if self._problem is not None or self._watch is None or self._watch.done():
            self._problem, self._failed_starts = None, 0
            self._begin()
        watch = self._watch
        assert watch is not None  # noqa: S101 - _begin set it
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait(
                {ready, watch},
                timeout=self._spec.startup_timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            ready.cancel()
        if self._problem is not None:
            raise self._problem
        if self._endpoint is None or not self._ready.is_set():
            raise ProviderUnavailable(
                f"local model {self._alias!r}: the server was not ready within "
                f"{self._spec.startup_timeout_s:g} s{self._last_words()}",
                provider="local",
            )
        return self._endpoint

    async def info(self) -> dict[str, object]:
        """The server's state: pid, port, starts and restarts, the log file's path."""
        endpoint = self._endpoint
        return {
            "alias": self._alias,
            "gguf": self._spec.gguf,
            "pid": self._process.pid if self._process else None,
            "ready": self._ready.is_set(),
            "base_url": endpoint.base_url if endpoint else None,
            "generation": self._generation,
            "restarts": self._restarts,
            "problem": str(self._problem) if self._problem else None,
            "log": str(self._log_path),
        }

    async def kill_server(self) -> int | None:
        """SIGKILL the server now (what a crash looks like); the watch starts it again."""
        process = self._process
        if process is None or process.returncode is not None:
            return None
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        return process.pid

    async def stop(self) -> None:
        """Stop watching and end the server (SIGTERM, then SIGKILL after 5 s)."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        await self._end()

    def _begin(self) -> None:
        self._watch = asyncio.get_running_loop().create_task(self._keep_running())

    async def _keep_running(self) -> None:
        """Start the server, and start it again whenever it dies or stops answering."""
        in_a_row = 0
        try:
            while True:
                started = await self._start()
                if started:
                    in_a_row = 0
                    await self._watch_health()
                elif self._problem is not None:
                    return
                self._ready.clear()
                await self._end()
                pause = RESTART_PAUSE_S[min(in_a_row, len(RESTART_PAUSE_S) - 1)]
                in_a_row += 1
                self._restarts += 1
                log.warning("local_model_restart", alias=self._alias, pause_s=pause)
                await asyncio.sleep(pause)
        except (ConfigError, ProviderUnavailable) as exc:
            self._problem = exc
        finally:
            self._ready.clear()

    async def _start(self) -> bool:
        """One start: True once ready; False when the process died or hung while loading."""
        spec = self._spec
        binary = await asyncio.to_thread(self._check_files, spec)
        port = free_port(self._host)
        key = secrets.token_urlsafe(24)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        key_file = self._write_key(key)
        command = server_command(spec, binary=binary, host=self._host, port=port, key_file=key_file)
        output = self._log_path.open("ab")
        try:
            self._process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            output.close()
        self._generation += 1
        base = f"http://{url_host(self._host)}:{port}"
        log.info("local_model_starting", alias=self._alias, pid=self._process.pid, base=base)
        if not await self._until_ready(base):
            self._failed_starts += 1
            if self._failed_starts >= START_FAILURES:
                raise ProviderUnavailable(
                    f"local model {self._alias!r}: llama-server failed to start "
                    f"{self._failed_starts} times{self._last_words()}",
                    provider="local",
                )
            return False
        self._failed_starts = 0
        self._endpoint = LocalEndpoint(
            base_url=f"{base}/v1", api_key=key, generation=self._generation, pid=self._process.pid
        )
        self._ready.set()
        log.info("local_model_ready", alias=self._alias, pid=self._process.pid)
        return True

    def _write_key(self, key: str) -> Path:
        """The key in a file of a fresh private folder (mode 0600); removed at :meth:`_end`."""
        self._secret_dir = Path(tempfile.mkdtemp(prefix="raytroupe-key-"))  # mode 0700
        path = self._secret_dir / "key"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(key + "\n")
        return path

    def _check_files(self, spec: LocalModel) -> str:
        binary = check_files(self._alias, spec, hash_file=self._checked != spec.gguf)
        self._checked = spec.gguf if spec.sha256 is not None else None
        return binary

    async def _until_ready(self, base: str) -> bool:
        process = self._process
        assert process is not None  # noqa: S101 - just started
        deadline = time.monotonic() + self._spec.startup_timeout_s
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:
            while time.monotonic() < deadline:
                if process.returncode is not None:
                    self._read_tail()
                    log.warning("local_model_exited", alias=self._alias, code=process.returncode)
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{base}/health")).status_code == 200:  # noqa: PLR2004
                        return True
                await asyncio.sleep(0.1)
        self._read_tail()
        return False

    async def _watch_health(self) -> None:
        """Return when the running server died or failed its health check too often."""
        process, endpoint = self._process, self._endpoint
        if process is None or endpoint is None:  # not started: nothing to watch
            return
        health = endpoint.base_url.removesuffix("/v1") + "/health"
        failed = 0
        async with httpx.AsyncClient(timeout=self._health_timeout_s) as client:
            while failed < UNHEALTHY_AFTER:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(process.wait(), HEALTH_EVERY_S)
                if process.returncode is not None:
                    self._read_tail()
                    log.warning("local_model_died", alias=self._alias, code=process.returncode)
                    return
                try:
                    ok = (await client.get(health)).status_code == 200  # noqa: PLR2004
                except httpx.HTTPError:
                    ok = False
                failed = 0 if ok else failed + 1
        log.warning("local_model_unhealthy", alias=self._alias, checks=failed)

    async def _end(self) -> None:
        process, self._process = self._process, None
        self._ready.clear()
        secret_dir, self._secret_dir = self._secret_dir, None
        if secret_dir is not None:
            shutil.rmtree(secret_dir, ignore_errors=True)
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    def _read_tail(self) -> None:
        with contextlib.suppress(OSError):
            with self._log_path.open("rb") as handle:
                handle.seek(max(0, self._log_path.stat().st_size - 8192))
                lines = handle.read().decode("utf-8", "replace").splitlines()
            self._tail.clear()
            self._tail.extend(lines[-LOG_LINES:])

    def _last_words(self) -> str:
        if not self._tail:
            return ""
        return "; its last output:\n" + "\n".join(list(self._tail)[-8:])
