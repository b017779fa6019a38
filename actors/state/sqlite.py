"""The SQLite backend: one file per store, on the node its actor runs on (``:memory:`` too).

Each file has one owner process at a time (its actor). The connection is in autocommit mode,
so a write is durable when the call returns, and :meth:`SqliteDatabase.transaction` groups
writes that must land together (``BEGIN IMMEDIATE``: a second writer waits up to 5 s).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from actors.state.database import Row, Tx

__all__ = ["SqliteDatabase"]


class SqliteDatabase:
    """A SQLite file (created with its folder) in write-ahead-log mode."""

    dialect: Literal["sqlite", "postgresql"] = "sqlite"

    def __init__(self, path: str | Path, *, durable: bool = False) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a commit survives a crash of the process; FULL: also of the machine
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement (committed on its own, outside a transaction)."""
        return self._db.execute(sql, params).fetchall()

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement per row of parameters."""
        self._db.executemany(sql, rows)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Tx]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error)."""
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
