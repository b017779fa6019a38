"""The LLM pools' durable state: the budget ledger and the usage report.

A restarted pool (Ray runs ``__init__`` again) reads both back, so a tenant's spend is never
reset by a restart. The tables are shared by every replica of the pool (a SQLite file beside
the journal, or the cluster's PostgreSQL, which a replica restarted on another node reads
back): each account's spend and what its open holds keep back are one row, so a reservation
checks a limit and takes its hold in one statement, atomically across replicas (see
:meth:`PoolState.hold`). Holds a dead replica left open are booked as spent by the
replica that takes its place, except those of kept calls: the call asked again at the same
place takes such a hold over (see :mod:`raytroupe.actors.llm.budget`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from raytroupe.actors.llm.budget import ORPHANS_WAIT_S, KeptCall, Reservation, Spend, over_limit
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
    (  # the hold of a kept call whose replica died waits for the call made again at its place
        "ALTER TABLE holds ADD COLUMN turn TEXT",
        "ALTER TABLE holds ADD COLUMN orphaned DOUBLE PRECISION",
        "ALTER TABLE holds ADD COLUMN adopted_calls BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE holds ADD COLUMN adopted_tokens BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE holds ADD COLUMN adopted_usd DOUBLE PRECISION NOT NULL DEFAULT 0",
        "CREATE INDEX holds_by_turn ON holds (turn)",
    ),
    (  # spend windows: each threshold a window's spend crossed, alerted once
        "CREATE TABLE spend_alerts (key TEXT NOT NULL, threshold DOUBLE PRECISION NOT NULL, "
        "at DOUBLE PRECISION NOT NULL, PRIMARY KEY (key, threshold))",
    ),
    (  # spend limits an admin set at run time (beside the operator's configuration)
        "CREATE TABLE set_spend_limits (name TEXT PRIMARY KEY, spec TEXT NOT NULL, "
        "set_by TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)",
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
        is booked once, whoever else recovers at the same time.

        The hold of a kept call (one named by its place in a job's run) is not booked: the
        call will be asked again at that place, and the call made then takes the hold over
        (:meth:`hold`); it stays held meanwhile. Such holds nobody took over within
        :data:`~raytroupe.actors.llm.budget.ORPHANS_WAIT_S` are booked in full here too.
        Returns how many holds were booked.
        """
        owners, params = "owner = ?", [self.replica]
        if live is not None:
            others = sorted(set(live) - {self.replica})
            marks = ", ".join("?" * len(others))
            owners += f" OR owner NOT IN ({marks})" if others else " OR TRUE"
            params += others
        now = time.time()
        with self._db.transaction() as tx:
            tx.execute(
                f"UPDATE holds SET orphaned = ? WHERE orphaned IS NULL "  # noqa: S608
                f"AND turn IS NOT NULL AND ({owners})",
                [now, *params],
            )
            booked = self._book_in_full(
                tx,
                f"(orphaned IS NULL AND ({owners})) OR orphaned < ?",
                [*params, now - ORPHANS_WAIT_S],
            )
            # and the kept calls it was making: whoever asks one again makes it
            tx.execute(f"DELETE FROM turn_calls WHERE {owners}", params)  # noqa: S608
        return booked

    def book_orphans(self, wait_s: float = ORPHANS_WAIT_S) -> int:
        """Book in full the holds of kept calls nobody asked again within ``wait_s``."""
        with self._db.transaction() as tx:
            return self._book_in_full(tx, "orphaned < ?", [time.time() - wait_s])

    @staticmethod
    def _book_in_full(tx: Tx, where: str, params: list[object]) -> int:
        """Close the holds ``where`` selects, each booked in full with those it took over."""
        rows = tx.execute(
            f"DELETE FROM holds WHERE {where} "  # noqa: S608
            "RETURNING keys, tokens, usd, adopted_tokens, adopted_usd",
            params,
        )
        for keys, tokens, usd, adopted_tokens, adopted_usd in rows:
            for key in sorted(json.loads(keys)):
                tx.execute(_OPEN, (key,))
                tx.execute(_BOOK, (tokens + adopted_tokens, usd + adopted_usd, tokens, usd, key))
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
        self,
        reservation: Reservation,
        limits: Mapping[str, Budget | None] | None = None,
        earlier: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        """Hold ``reservation`` on its accounts before its call is made, if each has room.

        Every account's check and its hold are one ``UPDATE`` in one transaction (accounts
        in a fixed order, so that two replicas never wait on each other): a limit holds
        however many replicas reserve at once.

        A kept call (``reservation.turn``) made again after its replica died takes over the
        hold that call left (on the same accounts): that hold is released here, in the same
        transaction, and the call it stood for is booked when this one settles.

        An account with ``earlier`` accounts (a rolling window's earlier hours) counts their
        spend and holds with its own, read in the same statement.

        Raises:
            BudgetExceeded: an account in ``limits`` has no room; nothing is held.
        """
        limits, earlier = limits or {}, earlier or {}
        with self._db.transaction() as tx:
            adopted = (0, 0, 0.0) if reservation.turn is None else _adopt(tx, reservation)
            for key in sorted(reservation.keys):
                tx.execute(_OPEN, (key,))
                before = earlier.get(key, ())
                sql, params = _take(key, reservation, limits.get(key), before)
                if not tx.execute(sql, params):
                    raise _exceeded(key, reservation, limits.get(key), before, tx)
            tx.execute(
                "INSERT INTO holds (id, keys, tokens, usd, owner, turn, adopted_calls, "
                "adopted_tokens, adopted_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    reservation.id,
                    json.dumps(reservation.keys),
                    reservation.tokens,
                    reservation.usd,
                    self.replica,
                    reservation.turn,
                    *adopted,
                ),
            )

    def settle(
        self, reservation: Reservation, tokens: int, usd: float, turn: KeptCall | None = None
    ) -> None:
        """Close the hold and add what the call cost to each of its accounts, atomically.

        A hold no longer open (booked in full meanwhile by a recovering replica) books nothing
        more. ``turn``, the call's answer, is kept in the same transaction either way (the
        call was paid for): the first answer kept for its key stays.

        The calls whose holds this one took over (:meth:`hold`) are booked with it: each at
        what this one cost (the same request, asked at the same place), at most what their
        holds kept back; in full if this one was not answered.
        """
        with self._db.transaction() as tx:
            if turn is not None:
                tx.execute(
                    "INSERT INTO turns (key, job_id, answer) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO NOTHING",
                    (turn.key, turn.job_id, turn.answer.model_dump_json()),
                )
                tx.execute("DELETE FROM turn_calls WHERE key = ?", (turn.key,))
            row = first(
                tx.execute(
                    "DELETE FROM holds WHERE id = ? "
                    "RETURNING adopted_calls, adopted_tokens, adopted_usd",
                    (reservation.id,),
                )
            )
            if row is None:
                return
            calls, adopted_tokens, adopted_usd = row
            if turn is not None:  # answered: the calls it stands for cost about what it did
                adopted_tokens = min(adopted_tokens, calls * tokens)
                adopted_usd = min(adopted_usd, calls * usd)
            booked = (tokens + adopted_tokens, usd + adopted_usd)
            for key in sorted(reservation.keys):
                tx.execute(_BOOK, (*booked, reservation.tokens, reservation.usd, key))

    def turn(self, key: str) -> LLMResponse | None:
        """The answer kept for the call ``key`` (by any replica), if it was made."""
        row = first(self._db.execute("SELECT answer FROM turns WHERE key = ?", (key,)))
        return None if row is None else LLMResponse.model_validate_json(row[0])

    def total(self, keys: Iterable[str]) -> Spend:
        """What ``keys`` have spent, added up (open holds not included)."""
        keys = sorted(set(keys))
        if not keys:
            return Spend()
        marks = ", ".join("?" * len(keys))
        tokens, usd = self._db.execute(
            f"SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(usd), 0) FROM spent "  # noqa: S608
            f"WHERE key IN ({marks})",
            keys,
        )[0]
        return Spend(int(tokens), float(usd))

    def spent_under(self, prefix: str) -> dict[str, Spend]:
        """What each account whose key starts with ``prefix`` has spent."""
        rows = self._db.execute(  # substr, not LIKE: a key's '_' and '%' are not wildcards
            "SELECT key, tokens, usd FROM spent WHERE substr(key, 1, ?) = ?",
            (len(prefix), prefix),
        )
        return {key: Spend(int(tokens), float(usd)) for key, tokens, usd in rows}

    def set_limits(self) -> list[tuple[str, str, str, float]]:
        """The spend limits set at run time: (name, spec as JSON, by whom, when), by name."""
        rows = self._db.execute("SELECT name, spec, set_by, at FROM set_spend_limits ORDER BY name")
        return [(str(n), str(spec), str(by), float(at)) for n, spec, by, at in rows]

    def set_limit(self, name: str, spec: str | None, by: str = "") -> None:
        """Keep the spend limit ``name`` (its spec as JSON), or drop it (``spec`` None)."""
        if spec is None:
            self._db.execute("DELETE FROM set_spend_limits WHERE name = ?", (name,))
            return
        self._db.execute(
            "INSERT INTO set_spend_limits (name, spec, set_by, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, set_by = excluded.set_by, "
            "at = excluded.at",
            (name, spec, by, time.time()),
        )

    def first_alert(self, key: str, threshold: float) -> bool:
        """Record that ``key`` crossed ``threshold``: True the first time, whoever asks."""
        return bool(
            self._db.execute(
                "INSERT INTO spend_alerts (key, threshold, at) VALUES (?, ?, ?) "
                "ON CONFLICT (key, threshold) DO NOTHING RETURNING key",
                (key, threshold, time.time()),
            )
        )

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
                row = seen + row
            total[key] = row
        return list(total.values())

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def _adopt(tx: Tx, reservation: Reservation) -> tuple[int, int, float]:
    """Take over the holds left by replicas that died making ``reservation``'s kept call.

    Each is closed (what it kept back on its accounts released) if it held the same accounts;
    returns how many calls they stood for and what they kept back, all told.
    """
    calls, tokens, usd = 0, 0, 0.0
    rows = tx.execute(
        "SELECT id, keys FROM holds WHERE turn = ? AND orphaned IS NOT NULL", (reservation.turn,)
    )
    for hold_id, keys in rows:
        if set(json.loads(keys)) != set(reservation.keys):
            continue  # another account's: booked in full when its wait is over
        taken = first(
            tx.execute(  # by this replica only, however many adopt at once
                "DELETE FROM holds WHERE id = ? "
                "RETURNING tokens, usd, adopted_calls, adopted_tokens, adopted_usd",
                (hold_id,),
            )
        )
        if taken is None:
            continue
        held_tokens, held_usd, their_calls, their_tokens, their_usd = taken
        for key in sorted(reservation.keys):
            tx.execute(_BOOK, (0, 0.0, held_tokens, held_usd, key))
        calls += 1 + their_calls
        tokens += held_tokens + their_tokens
        usd += held_usd + their_usd
    return calls, tokens, usd


def _take(
    key: str, reservation: Reservation, limit: Budget | None, earlier: tuple[str, ...] = ()
) -> tuple[str, tuple[object, ...]]:
    """The ``UPDATE`` that holds ``reservation`` on ``key`` only if it stays within ``limit``.

    ``earlier`` accounts' spend and holds count with ``key``'s own (a subquery: the row the
    ``UPDATE`` locks is ``key``'s, which every call under the same window takes first).
    """
    sql, params = _TAKE, [reservation.tokens, reservation.usd, key]
    marks = ", ".join("?" * len(earlier))
    for measure, need, most in (
        ("tokens", reservation.tokens, None if limit is None else limit.tokens),
        ("usd", reservation.usd, None if limit is None or limit.usd is None else limit.usd),
    ):
        if most is None:
            continue
        sql += f" AND {measure} + held_{measure} + ?"
        if earlier:
            sql += (
                f" + (SELECT COALESCE(SUM(e.{measure} + e.held_{measure}), 0) "  # noqa: S608
                f"FROM spent e WHERE e.key IN ({marks}))"  # a column of ours; the keys bound
            )
            params += [need, *earlier]
        else:
            params.append(need)
        sql += " <= ?"
        params.append(most + _USD_SLACK if measure == "usd" else most)
    return sql + " RETURNING key", tuple(params)


def _exceeded(
    key: str, reservation: Reservation, limit: Budget | None, earlier: tuple[str, ...], tx: Tx
) -> Exception:
    """Why the hold of ``reservation`` does not fit ``key`` (read in the same transaction)."""
    rows = tx.execute(
        "SELECT tokens, usd, held_tokens, held_usd FROM spent WHERE key IN "  # noqa: S608
        f"({', '.join('?' * (1 + len(earlier)))})",
        (key, *earlier),
    )
    tokens = sum(r[0] for r in rows)
    usd = sum(r[1] for r in rows)
    held_tokens = sum(r[2] for r in rows)
    held_usd = sum(r[3] for r in rows)
    spent, held = Spend(tokens, usd), Spend(held_tokens, held_usd)
    need = Spend(reservation.tokens, reservation.usd)
    return over_limit(key, limit, spent, held, need) or (
        BudgetExceeded(f"{key} has no room for the call", account=key)
    )
