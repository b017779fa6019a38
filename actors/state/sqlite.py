"""The SQLite backend: one file per store, on the node its actor runs on (``:memory:`` too).

Each file has one owner process at a time (its actor). The connection is in autocommit mode,
so a write is durable when the call returns, and :meth:`SqliteDatabase.transaction` groups
writes that must land together (``BEGIN IMMEDIATE``: a second writer waits up to 5 s).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from raytroupe.actors.state.database import Row, Tx

__all__ = ["SqliteDatabase"]

_BUSY_S = 5.0  # how long a writer waits for another
_WAL_RETRY_S = 0.01


class SqliteDatabase:
    """A SQLite file (created with its folder) in write-ahead-log mode.

    One connection, used by whichever thread calls (an actor's event loop, and the worker
    threads of ``asyncio.to_thread``): a lock makes each statement, and each transaction
    whole, one thread's at a time, so a statement of another thread never lands inside a
    transaction, nor a second ``BEGIN`` on an open one.
    """

    dialect: Literal["sqlite", "postgresql"] = "sqlite"

    def __init__(self, path: str | Path, *, durable: bool = False) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        self._db.execute(f"PRAGMA busy_timeout={int(_BUSY_S * 1000)}")
        try:
            self._wal()
        except BaseException:
            self._db.close()
            raise
        # NORMAL: a commit survives a crash of the process; FULL: also of the machine
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")

    def _wal(self) -> None:
        """Switch to write-ahead logging, waiting for others as a write would.

        SQLite answers "database is locked" at once, without its busy handler, while another
        connection opening the same new file switches it: retried up to the busy timeout.
        """
        deadline = time.monotonic() + _BUSY_S
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(_WAL_RETRY_S)
            else:
                return

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement (committed on its own, outside a transaction)."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement per row of parameters."""
        with self._lock:
            self._db.executemany(sql, rows)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Tx]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error), this thread's alone."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        """Release the connection(s)."""
        self._db.close()
