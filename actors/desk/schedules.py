"""Schedules, kept in the journal's database, and the loop that fires them.

A firing is claimed by inserting its row ``(tenant, name, fire_at)`` into ``schedule_runs``;
the primary key lets one claimer in, so two desks (a restarted one beside its stale
incarnation, or a second one on the same database) never submit one firing twice. The claim
comes before the submit: a desk that dies between the two loses that firing rather than
doubling it. After each firing the schedule's next time is the expression's first after now,
so a desk that was down fires a missed time once, not once per miss.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog

from raytroupe.actors.state import Database, Migration, migrate
from raytroupe.protocols import QuotaExceeded, ScheduleNotFound, TroupeError
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.schedules import ScheduleInfo, ScheduleRun, ScheduleSpec, next_firing

__all__ = ["MAX_SCHEDULES", "ScheduleStore", "Scheduler"]

log = structlog.get_logger("raytroupe.schedules")

MAX_SCHEDULES: Final = 100
"""Schedules one tenant may hold."""
_KEPT_RUNS: Final = 50
"""Firings kept per schedule (the oldest are dropped)."""

_MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        "CREATE TABLE IF NOT EXISTS schedules (tenant TEXT NOT NULL, name TEXT NOT NULL, "
        "spec TEXT NOT NULL, next_at DOUBLE PRECISION, fired INTEGER NOT NULL, "
        "created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (tenant, name))",
        "CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_at)",
        "CREATE TABLE IF NOT EXISTS schedule_runs (tenant TEXT NOT NULL, name TEXT NOT NULL, "
        "fire_at DOUBLE PRECISION NOT NULL, job_id TEXT, error TEXT, "
        "PRIMARY KEY (tenant, name, fire_at))",
    ),
)
_COLUMNS = "tenant, name, spec, next_at, fired, created_at, updated_at"

Submit = Callable[[JobOrder, Submitter], Awaitable[str]]
"""How a firing submits its job (the front desk's ``submit``): the job's id."""


def _info(row: Any, runs: tuple[ScheduleRun, ...] = ()) -> ScheduleInfo:
    return ScheduleInfo(
        tenant=row[0], name=row[1], spec=ScheduleSpec.model_validate_json(row[2]),
        next_at=row[3], fired=row[4], created_at=row[5], updated_at=row[6], runs=runs,
    )  # fmt: skip


class ScheduleStore:
    """The tenants' schedules and their firings, in ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "schedules", _MIGRATIONS)

    def put(self, tenant: str, name: str, spec: ScheduleSpec) -> tuple[ScheduleInfo, bool]:
        """Keep the schedule (replacing the tenant's of that name); it, and whether it is new.

        Its next firing is the expression's first after now (None when disabled).

        Raises:
            QuotaExceeded: the tenant holds ``MAX_SCHEDULES`` others.
        """
        now = time.time()
        next_at = next_firing(spec.cron, spec.timezone, now) if spec.enabled else None
        with self._db.transaction() as tx:
            held = tx.execute(
                "SELECT created_at, fired FROM schedules WHERE tenant = ? AND name = ?",
                (tenant, name),
            )
            if not held:
                (count,) = tx.execute("SELECT COUNT(*) FROM schedules WHERE tenant = ?",
                                      (tenant,))[0]  # fmt: skip
                if count >= MAX_SCHEDULES:
                    raise QuotaExceeded(
                        f"tenant {tenant!r} holds {MAX_SCHEDULES} schedules: delete one first",
                        limit=MAX_SCHEDULES,
                    )
            created, fired = held[0] if held else (now, 0)
            tx.execute("DELETE FROM schedules WHERE tenant = ? AND name = ?", (tenant, name))
            tx.execute(
                f"INSERT INTO schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                (tenant, name, spec.model_dump_json(), next_at, fired, created, now),
            )
        info = ScheduleInfo(name=name, tenant=tenant, spec=spec, next_at=next_at,
                            created_at=created, updated_at=now, fired=fired)  # fmt: skip
        return info, not held

    def schedules(self, tenant: str | None) -> list[ScheduleInfo]:
        """The tenant's schedules (None: every tenant's), by name."""
        sql = f"SELECT {_COLUMNS} FROM schedules"  # noqa: S608 - constant
        args: tuple[str, ...] = ()
        if tenant is not None:
            sql, args = f"{sql} WHERE tenant = ?", (tenant,)
        return [_info(r) for r in self._db.execute(f"{sql} ORDER BY tenant, name", args)]

    def schedule(self, tenant: str, name: str, runs: int = 20) -> ScheduleInfo:
        """The tenant's schedule with its latest ``runs`` firings.

        Raises:
            ScheduleNotFound: the tenant has none of that name.
        """
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM schedules WHERE tenant = ? AND name = ?",  # noqa: S608
            (tenant, name),
        )
        if not rows:
            raise ScheduleNotFound(f"no schedule {name!r}", schedule=name)
        fired = self._db.execute(
            "SELECT fire_at, job_id, error FROM schedule_runs WHERE tenant = ? AND name = ? "
            "ORDER BY fire_at DESC LIMIT ?",
            (tenant, name, runs),
        )
        found = tuple(ScheduleRun(fire_at=r[0], job_id=r[1], error=r[2]) for r in fired)
        return _info(rows[0], found)

    def delete(self, tenant: str, name: str) -> ScheduleInfo:
        """Drop the tenant's schedule and its firings' records (their jobs stay).

        Raises:
            ScheduleNotFound: the tenant has none of that name.
        """
        gone = self.schedule(tenant, name, runs=0)
        with self._db.transaction() as tx:
            tx.execute("DELETE FROM schedules WHERE tenant = ? AND name = ?", (tenant, name))
            tx.execute("DELETE FROM schedule_runs WHERE tenant = ? AND name = ?", (tenant, name))
        return gone

    # -- firing ----------------------------------------------------------------------------

    def due(self, now: float) -> list[ScheduleInfo]:
        """The enabled schedules whose next firing has come."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM schedules WHERE next_at IS NOT NULL AND next_at <= ? "  # noqa: S608
            "ORDER BY next_at",
            (now,),
        )
        return [_info(r) for r in rows]

    def claim(self, due: ScheduleInfo, now: float) -> bool:
        """Take the firing ``due.next_at`` (True: this caller submits it; once per firing).

        Either way the schedule's next firing moves past now, unless the schedule changed
        since it was read (then its new next firing stands).
        """
        fire_at = due.next_at
        if fire_at is None:
            return False
        following = next_firing(due.spec.cron, due.spec.timezone, max(now, fire_at))
        with self._db.transaction() as tx:
            won = tx.execute(
                "INSERT INTO schedule_runs (tenant, name, fire_at) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING RETURNING fire_at",
                (due.tenant, due.name, fire_at),
            )
            tx.execute(
                "UPDATE schedules SET next_at = ?, fired = fired + ? "
                "WHERE tenant = ? AND name = ? AND next_at = ?",
                (following, 1 if won else 0, due.tenant, due.name, fire_at),
            )
        return bool(won)

    def ran(self, due: ScheduleInfo, job_id: str | None, error: str | None) -> None:
        """Record what the firing ``due.next_at`` submitted; keep the latest firings only."""
        with self._db.transaction() as tx:
            tx.execute(
                "UPDATE schedule_runs SET job_id = ?, error = ? "
                "WHERE tenant = ? AND name = ? AND fire_at = ?",
                (job_id, error, due.tenant, due.name, due.next_at),
            )
            tx.execute(
                "DELETE FROM schedule_runs WHERE tenant = ? AND name = ? AND fire_at NOT IN "
                "(SELECT fire_at FROM schedule_runs WHERE tenant = ? AND name = ? "
                "ORDER BY fire_at DESC LIMIT ?)",
                (due.tenant, due.name, due.tenant, due.name, _KEPT_RUNS),
            )


class Scheduler:
    """Fires due schedules: each firing claimed once, its job submitted as the tenant's.

    Args:
        store: where schedules are kept.
        submit: how a job is submitted (the front desk's own admission).
        poll_s: how often it looks for due schedules.
    """

    def __init__(self, store: ScheduleStore, submit: Submit, poll_s: float = 1.0) -> None:
        self._store, self._submit, self._poll_s = store, submit, poll_s

    async def run(self) -> None:
        """Fire due schedules until cancelled."""
        while True:
            try:
                await self.fire_due()
            except Exception as exc:  # noqa: BLE001 - a store hiccup: look again later
                log.warning("schedules_unread", error=str(exc)[:300])
            await asyncio.sleep(self._poll_s)

    async def fire_due(self, now: float | None = None) -> list[str]:
        """Claim and submit every firing due at ``now``; the jobs it submitted."""
        at = time.time() if now is None else now
        started: list[str] = []
        for due in await asyncio.to_thread(self._store.due, at):
            if not await asyncio.to_thread(self._store.claim, due, at):
                continue  # another desk fired it
            job_id, error = await self._fire(due)
            await asyncio.to_thread(self._store.ran, due, job_id, error)
            if job_id is not None:
                started.append(job_id)
        return started

    async def _fire(self, due: ScheduleInfo) -> tuple[str | None, str | None]:
        spec = due.spec
        order = JobOrder(task=spec.task, team=spec.team, skill=spec.skill, input=spec.input,
                         budget=spec.budget)  # fmt: skip
        caller = Submitter(tenant=due.tenant, admin=False, by=f"schedule:{due.name}")
        try:
            job_id = await self._submit(order, caller)
        except TroupeError as exc:
            log.warning("schedule_not_fired", tenant=due.tenant, schedule=due.name,
                        code=exc.code.value, error=exc.message[:300])  # fmt: skip
            return None, f"{exc.code.value}: {exc.message}"[:500]
        log.info("schedule_fired", tenant=due.tenant, schedule=due.name, job_id=job_id)
        return job_id, None
