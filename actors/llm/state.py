"""The LLM pool's durable state: the budget ledger and the usage report.

A restarted pool (Ray runs ``__init__`` again) reads both back, so a tenant's spend is never
reset by a restart. Holds open when the pool died are booked as spent (see
:mod:`actors.llm.budget`). One pool owns the tables: a SQLite file beside the journal, or
the cluster's PostgreSQL, which a pool restarted on another node reads back.
"""

from __future__ import annotations

import json
from pathlib import Path

from actors.llm.budget import Reservation, Spend
from actors.state import Migration, open_database, upsert
from protocols import UsageRow

__all__ = ["PoolState"]

_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS spent (key TEXT PRIMARY KEY, tokens BIGINT NOT NULL, "
        "usd DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS holds (id TEXT PRIMARY KEY, keys TEXT NOT NULL, "
        "tokens BIGINT NOT NULL, usd DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS usage (job_id TEXT NOT NULL, agent TEXT NOT NULL, "
        "model TEXT NOT NULL, deployment TEXT NOT NULL, provider TEXT NOT NULL, row TEXT NOT NULL, "
        "PRIMARY KEY (job_id, agent, model, deployment, provider))",
    ),
)

_USAGE_KEY = ("job_id", "agent", "model", "deployment", "provider")

_ADD = (
    "INSERT INTO spent (key, tokens, usd) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
    "SET tokens = spent.tokens + excluded.tokens, usd = spent.usd + excluded.usd"
)


class PoolState:
    """Spend per account, open holds and usage rows, at a state location (``:memory:`` too)."""

    def __init__(self, location: str | Path) -> None:
        self._db = open_database(location, "llm", _MIGRATIONS)

    def spent(self) -> dict[str, Spend]:
        """What each account spent; holds left open by a dead pool are booked in full first."""
        with self._db.transaction() as tx:
            for _, keys, tokens, usd in tx.execute("SELECT id, keys, tokens, usd FROM holds"):
                tx.executemany(_ADD, [(k, tokens, usd) for k in json.loads(keys)])
            tx.execute("DELETE FROM holds")
        rows = self._db.execute("SELECT key, tokens, usd FROM spent")
        return {key: Spend(tokens, usd) for key, tokens, usd in rows}

    def hold(self, reservation: Reservation) -> None:
        """Record a hold before its call is made."""
        self._db.execute(
            "INSERT INTO holds VALUES (?, ?, ?, ?)",
            (reservation.id, json.dumps(reservation.keys), reservation.tokens, reservation.usd),
        )

    def settle(self, reservation: Reservation, tokens: int, usd: float) -> None:
        """Close the hold and add what the call cost to each of its accounts, atomically."""
        with self._db.transaction() as tx:
            tx.execute("DELETE FROM holds WHERE id = ?", (reservation.id,))
            tx.executemany(_ADD, [(k, tokens, usd) for k in reservation.keys])

    def book(self, row: UsageRow) -> None:
        """Keep ``row`` (the running totals of one job, agent and model), replacing its last."""
        self._db.execute(
            upsert("usage", (*_USAGE_KEY, "row"), key=_USAGE_KEY),
            (
                row.job_id or "",
                row.agent,
                row.model,
                row.deployment,
                row.provider,
                row.model_dump_json(),
            ),
        )

    def usage(self) -> list[UsageRow]:
        """Every usage row kept."""
        rows = self._db.execute("SELECT row FROM usage")
        return [UsageRow.model_validate_json(row) for (row,) in rows]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
