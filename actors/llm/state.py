"""The LLM pools' durable state: the budget ledger and the usage report.

A restarted pool (Ray runs ``__init__`` again) reads both back, so a tenant's spend is never
reset by a restart. The tables are shared by every replica of the pool (a SQLite file beside
the journal, or the cluster's PostgreSQL, which a replica restarted on another node reads
back): each account's spend and what its open holds keep back are one row, so a reservation
checks a limit and takes its hold in one statement, atomically across replicas (see
:meth:`PoolState.reserve`). Holds a dead replica left open are booked as spent by the
replica that takes its place (see :mod:`raytroupe.actors.llm.budget`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping
from pathlib import Path

from raytroupe.actors.llm.budget import KeptCall, Reservation, Spend, over_limit
from raytroupe.actors.state import Migration, Tx, first, open_database, upsert
from raytroupe.protocols import Budget, BudgetExceeded, LLMResponse, UsageRow

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
    (  # replicas: held amounts beside the spend, holds by owner, usage rows by replica
        "ALTER TABLE spent ADD COLUMN held_tokens BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE spent ADD COLUMN held_usd DOUBLE PRECISION NOT NULL DEFAULT 0",
        "ALTER TABLE holds ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "CREATE TABLE usage_rows (replica TEXT NOT NULL, job_id TEXT NOT NULL, "
        "agent TEXT NOT NULL, model TEXT NOT NULL, deployment TEXT NOT NULL, "
        "provider TEXT NOT NULL, row TEXT NOT NULL, "
        "PRIMARY KEY (replica, job_id, agent, model, deployment, provider))",
        "INSERT INTO usage_rows SELECT '', job_id, agent, model, deployment, provider, row "
        "FROM usage",
        "DROP TABLE usage",
        "CREATE INDEX usage_rows_by_job ON usage_rows (job_id)",
    ),
    (  # turn-level durability: each answered call, kept with its cost
        "CREATE TABLE turns (key TEXT PRIMARY KEY, job_id TEXT NOT NULL, answer TEXT NOT NULL)",
        "CREATE INDEX turns_by_job ON turns (job_id)",
    ),
    (  # a kept call being made, and by which replica: another asked it waits for its answer
        "CREATE TABLE turn_calls (key TEXT PRIMARY KEY, owner TEXT NOT NULL, "
        "since DOUBLE PRECISION NOT NULL)",
    ),
)

_USAGE_KEY = ("replica", "job_id", "agent", "model", "deployment", "provider")

_OPEN = "INSERT INTO spent (key, tokens, usd) VALUES (?, 0, 0) ON CONFLICT (key) DO NOTHING"
_TAKE = "UPDATE spent SET held_tokens = held_tokens + ?, held_usd = held_usd + ? WHERE key = ?"
_BOOK = (
    "UPDATE spent SET tokens = tokens + ?, usd = usd + ?, held_tokens = held_tokens - ?, "
    "held_usd = held_usd - ? WHERE key = ?"
)
_USD_SLACK = 1e-12
"""Float rounding a dollar limit tolerates (as the in-memory ledger does)."""


class PoolState:
    """Spend and holds per account, open holds and usage rows, at a state location.

    Args:
        location: a SQLite path (``:memory:`` too) or a PostgreSQL URL.
        replica: the name of the replica writing (its holds and usage rows carry it).
    """

    def __init__(self, location: str | Path, *, replica: str = "") -> None:
        self._db = open_database(location, "llm", _MIGRATIONS)
        self.replica = replica

    def recover(self, live: Collection[str] | None = None) -> int:
        """Book as spent, in full, the holds this replica left open when it died.

        Its calls may have been billed. With ``live`` (the replicas configured now), also those
        of any other owner (a replica scaled away, or a pool from before replicas). Each hold
        is booked once, whoever else recovers at the same time. Returns how many were booked.
        """
        sql, params = "DELETE FROM holds WHERE owner = ?", [self.replica]
        if live is not None:
            others = sorted(set(live) - {self.replica})
            marks = ", ".join("?" * len(others))
            sql += f" OR owner NOT IN ({marks})" if others else " OR TRUE"
            params += others
        with self._db.transaction() as tx:
            rows = tx.execute(sql + " RETURNING keys, tokens, usd", params)
            for keys, tokens, usd in rows:
                for key in sorted(json.loads(keys)):
                    tx.execute(_OPEN, (key,))
                    tx.execute(_BOOK, (tokens, usd, tokens, usd, key))
            # and the kept calls it was making: whoever asks one again makes it
            tx.execute(sql.replace("FROM holds", "FROM turn_calls", 1), params)
        return len(rows)

    def claim_turn(self, key: str, lease_s: float) -> str | None:
        """Take the making of the kept call ``key``: None if this replica makes it now.

        Otherwise the replica making it. A claim older than ``lease_s`` is taken over (its
        replica died, and was not started again to clear it).
        """
        now = time.time()
        with self._db.transaction() as tx:
            if tx.execute(
                "INSERT INTO turn_calls (key, owner, since) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING RETURNING key",
                (key, self.replica, now),
            ):
                return None
            if tx.execute(
                "UPDATE turn_calls SET owner = ?, since = ? WHERE key = ? AND since < ? "
                "RETURNING key",
                (self.replica, now, key, now - lease_s),
            ):
                return None
            row = first(tx.execute("SELECT owner FROM turn_calls WHERE key = ?", (key,)))
        return None if row is None else str(row[0])

    def release_turn(self, key: str) -> None:
        """Give up making the kept call ``key`` (it failed: whoever asks it again makes it)."""
        self._db.execute("DELETE FROM turn_calls WHERE key = ? AND owner = ?", (key, self.replica))

    def spent(self) -> dict[str, Spend]:
        """What each account has spent (open holds not included)."""
        rows = self._db.execute("SELECT key, tokens, usd FROM spent")
        return {key: Spend(tokens, usd) for key, tokens, usd in rows}

    def account(self, key: str) -> tuple[Spend, Spend]:
        """What ``key`` has spent, and what open holds keep back on it."""
        rows = self._db.execute(
            "SELECT tokens, usd, held_tokens, held_usd FROM spent WHERE key = ?", (key,)
        )
        if not rows:
            return Spend(), Spend()
        tokens, usd, held_tokens, held_usd = rows[0]
        return Spend(tokens, usd), Spend(held_tokens, held_usd)

    def hold(
        self, reservation: Reservation, limits: Mapping[str, Budget | None] | None = None
    ) -> None:
        """Hold ``reservation`` on its accounts before its call is made, if each has room.

        Every account's check and its hold are one ``UPDATE`` in one transaction (accounts
        in a fixed order, so that two replicas never wait on each other): a limit holds
        however many replicas reserve at once.

        Raises:
            BudgetExceeded: an account in ``limits`` has no room; nothing is held.
        """
        limits = limits or {}
        with self._db.transaction() as tx:
            for key in sorted(reservation.keys):
                tx.execute(_OPEN, (key,))
                sql, params = _take(key, reservation, limits.get(key))
                if not tx.execute(sql, params):
                    raise _exceeded(key, reservation, limits.get(key), tx)
            tx.execute(
                "INSERT INTO holds (id, keys, tokens, usd, owner) VALUES (?, ?, ?, ?, ?)",
                (
                    reservation.id,
                    json.dumps(reservation.keys),
                    reservation.tokens,
                    reservation.usd,
                    self.replica,
                ),
            )

    def settle(
        self, reservation: Reservation, tokens: int, usd: float, turn: KeptCall | None = None
    ) -> None:
        """Close the hold and add what the call cost to each of its accounts, atomically.

        A hold no longer open (booked in full meanwhile by a recovering replica) books nothing
        more. ``turn``, the call's answer, is kept in the same transaction either way (the
        call was paid for): the first answer kept for its key stays.
        """
        with self._db.transaction() as tx:
            if turn is not None:
                tx.execute(
                    "INSERT INTO turns (key, job_id, answer) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO NOTHING",
                    (turn.key, turn.job_id, turn.answer.model_dump_json()),
                )
                tx.execute("DELETE FROM turn_calls WHERE key = ?", (turn.key,))
            if not tx.execute("DELETE FROM holds WHERE id = ? RETURNING id", (reservation.id,)):
                return
            for key in sorted(reservation.keys):
                held = (reservation.tokens, reservation.usd)
                tx.execute(_BOOK, (tokens, usd, *held, key))

    def turn(self, key: str) -> LLMResponse | None:
        """The answer kept for the call ``key`` (by any replica), if it was made."""
        row = first(self._db.execute("SELECT answer FROM turns WHERE key = ?", (key,)))
        return None if row is None else LLMResponse.model_validate_json(row[0])

    def book(self, row: UsageRow) -> None:
        """Keep ``row`` (this replica's running totals of one job, agent and model)."""
        self._db.execute(
            upsert("usage_rows", (*_USAGE_KEY, "row"), key=_USAGE_KEY),
            (
                self.replica,
                row.job_id or "",
                row.agent,
                row.model,
                row.deployment,
                row.provider,
                row.model_dump_json(),
            ),
        )

    def usage(self, *, replica: str | None = None, job_id: str | None = None) -> list[UsageRow]:
        """Usage rows added up over replicas (only ``replica``'s, ``job_id``'s when given)."""
        sql, params = "SELECT row FROM usage_rows WHERE TRUE", list[str]()
        if replica is not None:
            sql, params = sql + " AND replica = ?", [*params, replica]
        if job_id is not None:
            sql, params = sql + " AND job_id = ?", [*params, job_id]
        rows = self._db.execute(sql, params)
        total: dict[tuple[str | None, str, str, str, str], UsageRow] = {}
        for (text,) in rows:
            row = UsageRow.model_validate_json(text)
            key = (row.job_id, row.agent, row.model, row.deployment, row.provider)
            if (seen := total.get(key)) is not None:
                row = seen.model_copy(
                    update={
                        "calls": seen.calls + row.calls,
                        "prompt_tokens": seen.prompt_tokens + row.prompt_tokens,
                        "completion_tokens": seen.completion_tokens + row.completion_tokens,
                        "cost_usd": seen.cost_usd + row.cost_usd,
                    }
                )
            total[key] = row
        return list(total.values())

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def _take(
    key: str, reservation: Reservation, limit: Budget | None
) -> tuple[str, tuple[object, ...]]:
    """The ``UPDATE`` that holds ``reservation`` on ``key`` only if it stays within ``limit``."""
    sql, params = _TAKE, [reservation.tokens, reservation.usd, key]
    if limit is not None and limit.tokens is not None:
        sql += " AND tokens + held_tokens + ? <= ?"
        params += [reservation.tokens, limit.tokens]
    if limit is not None and limit.usd is not None:
        sql += " AND usd + held_usd + ? <= ?"
        params += [reservation.usd, limit.usd + _USD_SLACK]
    return sql + " RETURNING key", tuple(params)


def _exceeded(key: str, reservation: Reservation, limit: Budget | None, tx: Tx) -> Exception:
    """Why the hold of ``reservation`` does not fit ``key`` (read in the same transaction)."""
    tokens, usd, held_tokens, held_usd = tx.execute(
        "SELECT tokens, usd, held_tokens, held_usd FROM spent WHERE key = ?", (key,)
    )[0]
    spent, held = Spend(tokens, usd), Spend(held_tokens, held_usd)
    need = Spend(reservation.tokens, reservation.usd)
    return over_limit(key, limit, spent, held, need) or (
        BudgetExceeded(f"{key} has no room for the call", account=key)
    )
