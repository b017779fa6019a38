"""SQLite files the actors keep their state in: opened one way, written in transactions.

Each file has one owner process (its actor); ``:memory:`` serves tests. Connections are in
autocommit mode, so a write is durable when the call returns, and :func:`transaction` groups
writes that must land together.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

__all__ = ["open_sqlite", "transaction"]


def open_sqlite(
    path: str | Path, schema: str, *, wal: bool = True, synchronous: str = "NORMAL"
) -> sqlite3.Connection:
    """Open (creating its folder and tables) the SQLite file at ``path``.

    ``wal``: a write-ahead log, with ``synchronous`` (``NORMAL``: a commit survives a crash of
    the process; ``FULL``: also of the machine); without it SQLite's defaults. Writers wait up
    to 5 s for a lock.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA busy_timeout=5000")
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={'FULL' if synchronous == 'FULL' else 'NORMAL'}")
    db.executescript(schema)
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """Run the block's statements as one transaction: all of them land, or none."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
