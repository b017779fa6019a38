"""The PostgreSQL backend: a server every node reaches, through a small connection pool.

Stores write SQL with ``?`` placeholders; here they become psycopg's ``%s``. Each statement
outside :meth:`PostgresDatabase.transaction` commits on its own (autocommit). A pooled
connection idle for more than :data:`CHECK_IDLE_S` is checked before use (one round trip), so
a server restart costs a reconnect, not an error; a busy one is not, and a server that goes
away under it fails that call with ``StateUnavailable``.
Failures to reach the server become :class:`~raytroupe.protocols.StateUnavailable`, naming the
server without its password.
"""

from __future__ import annotations

import contextlib
import functools
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from raytroupe.actors.state.database import Row, Tx, redact_url
from raytroupe.protocols import StateUnavailable

__all__ = ["PostgresDatabase"]

POOL_SIZE = 4
"""Connections per store and process at most (an actor's calls share them)."""

CONNECT_TIMEOUT_S = 10.0

CHECK_IDLE_S = 1.0
"""A connection idle longer than this is pinged before it is used again."""

_LAST_USED: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = weakref.WeakKeyDictionary()


def _check(conn: psycopg.Connection[Any]) -> None:
    """The pool's check: ping a connection only if it sat idle (a busy one just worked)."""
    if time.monotonic() - _LAST_USED.get(conn, 0.0) > CHECK_IDLE_S:
        ConnectionPool.check_connection(conn)


@functools.lru_cache(maxsize=256)
def _psycopg(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


@functools.lru_cache(maxsize=256)
def _returns_rows(sql: str) -> bool:
    text = sql.lstrip().upper()
    return text.startswith(("SELECT", "WITH")) or " RETURNING " in f" {text} "


class _Connection:
    """One pooled connection's statements (a transaction's).

    In a transaction they go as a pipeline: a statement whose rows are not asked for costs no
    round trip of its own.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cursor = self._conn.execute(_psycopg(sql), tuple(params))
        return cursor.fetchall() if _returns_rows(sql) else []

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_psycopg(sql), [tuple(row) for row in rows])


class PostgresDatabase:
    """The database at ``url`` (``postgresql://user[:password]@host[:port]/name``).

    A password is better left out of the URL: libpq reads ``PGPASSWORD`` or ``~/.pgpass``
    (``~/.troupe/env`` is where a ``ray up`` cluster keeps such secrets).
    """

    dialect: Literal["sqlite", "postgresql"] = "postgresql"

    def __init__(self, url: str, *, durable: bool = True) -> None:
        self._where = redact_url(url)
        self._password = urlsplit(url).password
        try:  # first, one connection: a refusal (a wrong password) is said at once, as it is
            psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S)).close()
        except psycopg.Error as exc:
            raise StateUnavailable(
                f"the state store {self._where} cannot be reached: {self._said(exc)}",
                store=self._where,
            ) from None
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={
                "autocommit": True,
                "connect_timeout": int(CONNECT_TIMEOUT_S),
                "options": f"-c synchronous_commit={'on' if durable else 'off'}",
            },
            check=_check,
            open=False,
            name="raytroupe-state",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout:
            self._pool.close()
            raise StateUnavailable(
                f"the state store {self._where} cannot be reached "
                f"(no connection within {CONNECT_TIMEOUT_S:g} s)",
                store=self._where,
            ) from None

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool.connection(timeout=CONNECT_TIMEOUT_S) as conn:
                try:
                    yield conn
                finally:
                    _LAST_USED[conn] = time.monotonic()
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StateUnavailable(
                f"the state store {self._where} failed: {self._said(exc)}", store=self._where
            ) from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement in a connection of the pool, committed on its own."""
        with self._connection() as conn:
            return _Connection(conn).execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement per row of parameters."""
        with self._connection() as conn:
            _Connection(conn).executemany(sql, rows)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One pooled connection's statements, committed together (rolled back on an error)."""
        with self._connection() as conn, conn.pipeline(), conn.transaction():
            yield _Connection(conn)

    def close(self) -> None:
        """Release the connection(s)."""
        self._pool.close()

    def _said(self, exc: BaseException) -> str:
        """The first line of what the driver said, never with the password in it."""
        text = str(exc).strip()
        line = text.splitlines()[0] if text else type(exc).__name__
        return line.replace(self._password, "***") if self._password else line
