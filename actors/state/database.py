"""The :class:`Database` interface, how a location picks its backend, and migrations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from raytroupe.protocols import ConfigError
from raytroupe.protocols.config.state import checked_state_url, is_postgres, redact_url, state_url

__all__ = [
    "Database",
    "Migration",
    "Row",
    "Tx",
    "apply_migrations",
    "checked_state_url",
    "first",
    "is_postgres",
    "open_database",
    "redact_url",
    "state_url",
    "upsert",
]

_MIGRATION_LOCK = 7240155
"""PostgreSQL advisory lock held while a store's migrations apply (one migrator at a time)."""

Migration = tuple[str, ...]
"""One step of a store's schema: statements applied together, in one transaction."""

Row = tuple[Any, ...]
"""A row of a result, its columns in the order selected."""


class Tx(Protocol):
    """Statements in portable SQL (``?`` placeholders), run now; rows come back as tuples."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement; its rows (none for a statement that returns none)."""
        ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters."""
        ...


class Database(Tx, Protocol):
    """A store's connection: each statement commits on its own unless in :meth:`transaction`."""

    dialect: Literal["sqlite", "postgresql"]

    def transaction(self) -> contextlib.AbstractContextManager[Tx]:
        """Statements that land together or not at all; a second writer waits for the first."""
        ...

    def close(self) -> None:
        """Release the connection(s)."""
        ...


def upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    """``INSERT`` of a row of ``columns`` into ``table`` that replaces the row with its ``key``."""
    if not all(name.isidentifier() for name in (table, *columns, *key)):
        raise ValueError(f"not SQL identifiers: {table!r} {columns!r} {key!r}")
    keep = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    # identifiers checked above; values go in as parameters
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "  # noqa: S608
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {keep}"
    )


def first(rows: list[Row]) -> Row | None:
    """The first of ``rows``, or None when there are none."""
    return rows[0] if rows else None


def open_database(
    location: str | Path,
    component: str,
    migrations: Sequence[Migration],
    *,
    durable: bool = False,
) -> Database:
    """Open the store ``component`` at ``location`` and bring its tables up to date.

    ``durable``: a commit also survives a crash of the machine (SQLite: synchronous ``FULL``;
    PostgreSQL: ``synchronous_commit`` on), not only of the process (SQLite ``NORMAL``;
    PostgreSQL ``synchronous_commit`` off: the server may lose its last ~0.2 s of commits
    if it crashes, never a half-written one).

    Raises:
        StateUnavailable: the PostgreSQL server cannot be reached (the error names it,
            without its password).
    """
    if is_postgres(location):
        from raytroupe.actors.state.postgres import PostgresDatabase  # noqa: PLC0415 - clusters only

        db: Database = PostgresDatabase(str(location), durable=durable)
    else:
        from raytroupe.actors.state.sqlite import SqliteDatabase  # noqa: PLC0415

        db = SqliteDatabase(location, durable=durable)
    try:
        migrate(db, component, migrations)
    except BaseException:
        db.close()
        raise
    return db


def migrate(db: Database, component: str, migrations: Sequence[Migration]) -> int:
    """Bring ``component``'s tables in ``db`` up to date; its schema version after.

    For stores that keep their tables in another store's database (the skills and eval runs
    in the journal's). On PostgreSQL, processes migrating at once (orchestrator shards
    starting together) take turns on an advisory lock: one migrates, the others then find
    the tables done.
    """
    with db.transaction() as tx:
        if db.dialect == "postgresql":
            tx.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
        return apply_migrations(tx, component, migrations)


def apply_migrations(tx: Tx, component: str, migrations: Sequence[Migration]) -> int:
    """Apply the steps of ``component``'s schema the database lacks; its version after."""
    tx.execute(
        "CREATE TABLE IF NOT EXISTS raytroupe_schema "
        "(component TEXT PRIMARY KEY, version BIGINT NOT NULL)"
    )
    rows = tx.execute("SELECT version FROM raytroupe_schema WHERE component = ?", (component,))
    version = int(rows[0][0]) if rows else 0
    if version > len(migrations):
        raise ConfigError(
            f"the {component!r} tables are at schema version {version}, newer than this "
            f"raytroupe knows ({len(migrations)}): upgrade raytroupe, or point it elsewhere",
            component=component,
            version=version,
        )
    for step in migrations[version:]:
        for statement in step:
            tx.execute(statement)
    if version < len(migrations):
        tx.execute(
            "INSERT INTO raytroupe_schema (component, version) VALUES (?, ?) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            (component, len(migrations)),
        )
    return len(migrations)
