"""Webhooks and their deliveries, kept in the journal's database (every shard and the desk's).

A delivery is written in the same transaction as the job event it tells of
(:meth:`WebhookStore.enqueue`, called by the journal), so an event is never journaled without
its deliveries, nor a delivery without its event; a restarted shard finds them pending. Each
delivery row carries the shard that runs its job: that shard's
:class:`~raytroupe.actors.notify.deliverer.Deliverer` sends it.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from raytroupe.actors.notify.bodies import body_of
from raytroupe.actors.state import Database, Migration, Tx, migrate
from raytroupe.protocols import JobEvent, WebhookNotFound, job_shard
from raytroupe.protocols.webhooks import (
    WEBHOOK_EVENTS,
    Delivery,
    WebhookCreated,
    WebhookInfo,
    WebhookSpec,
)

__all__ = ["Due", "WebhookStore"]

_MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        "CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
        "kind TEXT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL, job_id TEXT, "
        "secret TEXT NOT NULL, headers TEXT NOT NULL, description TEXT NOT NULL, "
        "created_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS webhooks_by_tenant ON webhooks (tenant, job_id)",
        "CREATE TABLE IF NOT EXISTS webhook_deliveries (id TEXT PRIMARY KEY, "
        "webhook_id TEXT NOT NULL, tenant TEXT NOT NULL, job_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, type TEXT NOT NULL, shard INTEGER NOT NULL, body TEXT NOT NULL, "
        "state TEXT NOT NULL, attempts INTEGER NOT NULL, next_at DOUBLE PRECISION, "
        "status_code INTEGER, last_error TEXT, created_at DOUBLE PRECISION NOT NULL, "
        "done_at DOUBLE PRECISION, UNIQUE (webhook_id, job_id, seq))",
        "CREATE INDEX IF NOT EXISTS deliveries_due ON webhook_deliveries (state, shard, next_at)",
        "CREATE INDEX IF NOT EXISTS deliveries_of ON webhook_deliveries (webhook_id, created_at)",
    ),
)
_WEBHOOK = "id, tenant, kind, url, events, job_id, description, created_at"
_DELIVERY = (
    "id, webhook_id, job_id, seq, type, state, attempts, next_at, status_code, last_error, "
    "created_at, done_at"
)
_ERROR_CHARS: Final = 500


@dataclass(frozen=True)
class Due:
    """A pending delivery, with what sending it needs."""

    id: str
    webhook_id: str
    kind: str
    url: str
    secret: str
    headers: Mapping[str, str]
    body: str
    attempts: int
    created_at: float


def _info(row: Any) -> WebhookInfo:
    return WebhookInfo(
        id=row[0], tenant=row[1], kind=row[2], url=row[3], events=tuple(json.loads(row[4])),
        job_id=row[5], description=row[6], created_at=row[7],
    )  # fmt: skip


def _delivery(row: Any) -> Delivery:
    return Delivery(
        id=row[0], webhook_id=row[1], job_id=row[2], seq=row[3], type=row[4], state=row[5],
        attempts=row[6], next_at=row[7], status_code=row[8], last_error=row[9],
        created_at=row[10], done_at=row[11],
    )  # fmt: skip


def _due(row: Any) -> Due:
    return Due(
        id=row[0], webhook_id=row[1], kind=row[2], url=row[3], secret=row[4],
        headers=json.loads(row[5]), body=row[6], attempts=row[7], created_at=row[8],
    )  # fmt: skip


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookStore:
    """A tenant's webhooks, and each event's deliveries to them, in ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "webhooks", _MIGRATIONS)

    # -- a tenant's webhooks ----------------------------------------------------------------

    def create(
        self,
        tenant: str,
        spec: WebhookSpec,
        *,
        kind: str = "webhook",
        secret: str | None = None,
        headers: Mapping[str, str] | None = None,
        webhook_id: str | None = None,
    ) -> WebhookCreated:
        """Keep a webhook of ``tenant`` (``secret``: made here unless given, as A2A's token is).

        ``webhook_id`` replaces the tenant's webhook of that id (an A2A config set again).

        Raises:
            Conflict: ``webhook_id`` names another tenant's webhook.
        """
        made = WebhookCreated(
            id=webhook_id or f"wh-{secrets.token_hex(8)}", tenant=tenant, kind=kind,
            url=spec.url, events=spec.events, job_id=spec.job_id,
            description=spec.description, created_at=time.time(),
            secret=new_secret() if secret is None else secret,
        )  # fmt: skip
        with self._db.transaction() as tx:
            held = tx.execute("SELECT tenant FROM webhooks WHERE id = ?", (made.id,))
            if held and held[0][0] != tenant:
                raise WebhookNotFound(f"no webhook {made.id!r}", webhook_id=made.id)
            tx.execute("DELETE FROM webhooks WHERE id = ?", (made.id,))
            tx.execute(
                "INSERT INTO webhooks (id, tenant, kind, url, events, job_id, secret, headers, "
                "description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (made.id, tenant, made.kind, made.url, json.dumps(list(made.events)),
                 made.job_id, made.secret, json.dumps(dict(headers or {})), made.description,
                 made.created_at),
            )  # fmt: skip
        return made

    def webhooks(
        self, tenant: str | None, *, job_id: str | None = None, kind: str | None = None
    ) -> list[WebhookInfo]:
        """The webhooks of ``tenant`` (None: every tenant's), oldest first."""
        sql, args = f"SELECT {_WEBHOOK} FROM webhooks WHERE 1 = 1", []  # noqa: S608 - constant
        for column, value in (("tenant", tenant), ("job_id", job_id), ("kind", kind)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        return [_info(r) for r in self._db.execute(sql + " ORDER BY created_at, id", args)]

    def webhook(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """The webhook of that id (of ``tenant``, unless None).

        Raises:
            WebhookNotFound: there is none (another tenant's is none too).
        """
        rows = self._db.execute(f"SELECT {_WEBHOOK} FROM webhooks WHERE id = ?", (webhook_id,))  # noqa: S608
        if not rows or (tenant is not None and rows[0][1] != tenant):
            raise WebhookNotFound(f"no webhook {webhook_id!r}", webhook_id=webhook_id)
        return _info(rows[0])

    def delete(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """Drop a webhook; its pending deliveries fail (``webhook deleted``).

        Raises:
            WebhookNotFound: there is none (of ``tenant``).
        """
        gone = self.webhook(tenant, webhook_id)
        with self._db.transaction() as tx:
            tx.execute("DELETE FROM webhooks WHERE id = ?", (webhook_id,))
            tx.execute(
                "UPDATE webhook_deliveries SET state = 'failed', next_at = NULL, "
                "last_error = 'webhook deleted', done_at = ? "
                "WHERE webhook_id = ? AND state = 'pending'",
                (time.time(), webhook_id),
            )
        return gone

    def deliveries(self, tenant: str | None, webhook_id: str, limit: int = 100) -> list[Delivery]:
        """A webhook's latest deliveries, newest first (a deleted one's are still listed).

        Raises:
            WebhookNotFound: ``tenant`` has no delivery to a webhook of that id.
        """
        rows = self._db.execute(
            f"SELECT {_DELIVERY}, tenant FROM webhook_deliveries WHERE webhook_id = ? "  # noqa: S608
            "ORDER BY created_at DESC, seq DESC LIMIT ?",
            (webhook_id, limit),
        )
        if tenant is not None and any(r[-1] != tenant for r in rows):
            rows = []
        if not rows:
            self.webhook(tenant, webhook_id)  # none yet, or not the tenant's
        return [_delivery(r) for r in rows]

    # -- the shards' side -------------------------------------------------------------------

    @staticmethod
    def enqueue(tx: Tx, event: JobEvent, shards: int) -> int:
        """Add ``event``'s deliveries to the webhooks that hear it; how many (in ``tx``).

        Called by the journal in the transaction that records the event.
        """
        if event.type not in WEBHOOK_EVENTS:
            return 0
        job = tx.execute("SELECT tenant, context FROM jobs WHERE id = ?", (event.job_id,))
        if not job:
            return 0
        tenant, context = job[0]
        hooks = tx.execute(
            "SELECT id, kind, events FROM webhooks WHERE tenant = ? "
            "AND (job_id IS NULL OR job_id = ?)",
            (tenant, event.job_id),
        )
        now, made = time.time(), 0
        for webhook_id, kind, events in hooks:
            if event.type not in json.loads(events):
                continue
            tx.execute(
                "INSERT INTO webhook_deliveries (id, webhook_id, tenant, job_id, seq, type, "
                "shard, body, state, attempts, next_at, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?) ON CONFLICT DO NOTHING",
                (f"msg_{secrets.token_hex(12)}", webhook_id, tenant, event.job_id, event.seq,
                 event.type, job_shard(event.job_id, shards),
                 body_of(kind, event, tenant, context), now, now),
            )  # fmt: skip
            made += 1
        return made

    def due(self, shard: int, limit: int = 32, now: float | None = None) -> list[Due]:
        """The shard's pending deliveries whose time has come, oldest first.

        Only the first pending delivery of a job's events to a webhook is ever due: the next
        waits until it is delivered or failed, so an endpoint hears a job's events in order
        (an A2A receiver keeps the last state it is pushed).
        """
        rows = self._db.execute(
            "SELECT d.id, d.webhook_id, w.kind, w.url, w.secret, w.headers, d.body, "
            "d.attempts, d.created_at FROM webhook_deliveries d "
            "JOIN webhooks w ON w.id = d.webhook_id "
            "WHERE d.state = 'pending' AND d.shard = ? AND d.next_at <= ? "
            "AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = "
            "d.webhook_id AND e.job_id = d.job_id AND e.seq < d.seq AND e.state = 'pending') "
            "ORDER BY d.next_at, d.created_at LIMIT ?",
            (shard, time.time() if now is None else now, limit),
        )
        return [_due(r) for r in rows]

    def attempted(
        self,
        delivery_id: str,
        *,
        status_code: int | None,
        error: str | None,
        retry_at: float | None,
    ) -> None:
        """Record an attempt: delivered (no ``error``), again at ``retry_at``, or failed."""
        state = "delivered" if error is None else "pending" if retry_at is not None else "failed"
        now = time.time()
        self._db.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, state = ?, next_at = ?, "
            "status_code = ?, last_error = ?, done_at = ? WHERE id = ? AND state = 'pending'",
            (state, retry_at if state == "pending" else None, status_code,
             None if error is None else error[:_ERROR_CHARS],
             None if state == "pending" else now, delivery_id),
        )  # fmt: skip
