"""The guardrails as set (every version), which bind a job, and the decisions they made.

Kept in the journal's database (one process's memory for a desk without a journal), so a
restarted desk, or one on another node, binds the same versions. A version is never reused:
a guardrail deleted and set again starts after its last one. Decisions are kept per tenant,
the newest :data:`_KEPT_DECISIONS` of each.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from typing import Any, Final

import phonenumbers
import re2

from raytroupe.actors.state import Database, Migration, migrate, open_database
from raytroupe.protocols import Forbidden, GuardrailNotFound, InvalidInput, QuotaExceeded
from raytroupe.protocols.guardrails import (
    BoundGuardrail,
    DecisionRecord,
    GuardrailDecision,
    GuardrailInfo,
    GuardrailSpec,
)
from raytroupe.protocols.output_schema import check_output_schema

__all__ = ["MAX_GUARDRAILS", "GuardrailStore"]

MAX_GUARDRAILS: Final = 200
"""Guardrails set at once (each is read at every admission)."""
_KEPT_DECISIONS: Final = 1000
"""Decisions kept per tenant (the oldest are dropped)."""

_MIGRATIONS: Final[tuple[Migration, ...]] = (
    (
        "CREATE TABLE IF NOT EXISTS guardrails (name TEXT NOT NULL, version INTEGER NOT NULL, "
        "spec TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL, updated_by TEXT, "
        "deleted INTEGER NOT NULL, PRIMARY KEY (name, version))",
        "CREATE TABLE IF NOT EXISTS guardrail_decisions (id TEXT PRIMARY KEY, "
        "at DOUBLE PRECISION NOT NULL, tenant TEXT NOT NULL, job_id TEXT, decision TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS guardrail_decisions_by_tenant "
        "ON guardrail_decisions (tenant, at)",
    ),
)


def _info(row: Any) -> GuardrailInfo:
    return GuardrailInfo(
        name=row[0], version=row[1], spec=GuardrailSpec.model_validate_json(row[2]),
        updated_at=row[3], updated_by=row[4],
    )  # fmt: skip


class GuardrailStore:
    """Guardrails and their decisions, in ``db``.

    Args:
        db: the journal's database.
        callables: the ``module:function`` targets the operator allows a callable rule to
            name (``guardrails.callables``); any other is refused when set.
    """

    def __init__(self, db: Database, callables: Collection[str] = ()) -> None:
        self._db = db
        self._callables = frozenset(callables)
        migrate(db, "guardrails", _MIGRATIONS)

    @classmethod
    def in_memory(cls, callables: Collection[str] = ()) -> GuardrailStore:
        """A store of one process (a desk without a journal)."""
        return cls(open_database(":memory:", "guardrails", _MIGRATIONS), callables)

    def put(self, name: str, spec: GuardrailSpec, by: str | None) -> GuardrailInfo:
        """Set ``name``'s next version to ``spec``; that version.

        Raises:
            Forbidden: a callable rule names a target the operator did not allow.
            InvalidInput: a JSON Schema rule's schema is not a valid JSON Schema.
            QuotaExceeded: ``MAX_GUARDRAILS`` others are set.
        """
        self._check(spec)
        now = time.time()
        with self._db.transaction() as tx:
            rows = tx.execute(
                "SELECT MAX(version), MIN(deleted) FROM guardrails WHERE name = ?", (name,)
            )
            last, deleted = rows[0] if rows else (None, None)
            if last is None or deleted:
                (count,) = tx.execute(
                    "SELECT COUNT(DISTINCT name) FROM guardrails WHERE deleted = 0"
                )[0]
                if count >= MAX_GUARDRAILS:
                    raise QuotaExceeded(
                        f"{MAX_GUARDRAILS} guardrails are set: delete one first",
                        limit=MAX_GUARDRAILS,
                    )
            version = (last or 0) + 1
            tx.execute("UPDATE guardrails SET deleted = 0 WHERE name = ?", (name,))
            tx.execute(
                "INSERT INTO guardrails (name, version, spec, updated_at, updated_by, deleted) "
                "VALUES (?, ?, ?, ?, ?, 0)",
                (name, version, spec.model_dump_json(by_alias=True), now, by),
            )
        return GuardrailInfo(name=name, version=version, spec=spec, updated_at=now, updated_by=by)

    def _check(self, spec: GuardrailSpec) -> None:
        for index, rule in enumerate(spec.rules):
            if rule.kind == "callable" and rule.target not in self._callables:
                raise Forbidden(
                    f"rule {index} names {rule.target!r}, which the operator does not allow "
                    "(guardrails.callables lists what a callable rule may name)",
                    field=f"rules.{index}.target",
                )
            if rule.kind == "regex":
                for n, pattern in enumerate(rule.patterns):
                    try:
                        re2.compile(pattern)
                    except re2.error as exc:
                        raise InvalidInput(
                            f"rule {index} pattern {n} is not an RE2 regex: {exc}",
                            field=f"rules.{index}.patterns.{n}",
                        ) from None
            if rule.kind == "pii":
                unknown = sorted(set(rule.regions) - phonenumbers.SUPPORTED_REGIONS)
                if unknown:
                    raise InvalidInput(
                        f"rule {index} names phone regions libphonenumber does not know: {unknown}",
                        field=f"rules.{index}.regions",
                    )
            if rule.kind == "json_schema":
                try:
                    check_output_schema(rule.json_schema)
                except ValueError as exc:
                    raise InvalidInput(str(exc), field=f"rules.{index}.schema") from None

    def guardrail(self, name: str, version: int | None = None) -> GuardrailInfo:
        """``name``'s current version (or ``version``, which a deleted one keeps).

        Raises:
            GuardrailNotFound: none is set under ``name`` (or it has no such version).
        """
        if version is None:
            rows = self._db.execute(
                "SELECT name, version, spec, updated_at, updated_by FROM guardrails "
                "WHERE name = ? AND deleted = 0 ORDER BY version DESC LIMIT 1",
                (name,),
            )
        else:
            rows = self._db.execute(
                "SELECT name, version, spec, updated_at, updated_by FROM guardrails "
                "WHERE name = ? AND version = ?",
                (name, version),
            )
        if not rows:
            which = name if version is None else f"{name} v{version}"
            raise GuardrailNotFound(f"no guardrail {which!r}", guardrail=name, version=version)
        return _info(rows[0])

    def guardrails(self) -> list[GuardrailInfo]:
        """Every guardrail set, its current version, by name."""
        rows = self._db.execute(
            "SELECT g.name, g.version, g.spec, g.updated_at, g.updated_by FROM guardrails g "
            "WHERE g.deleted = 0 AND g.version = "
            "(SELECT MAX(version) FROM guardrails h WHERE h.name = g.name) ORDER BY g.name"
        )
        return [_info(r) for r in rows]

    def delete(self, name: str) -> GuardrailInfo:
        """Unset ``name`` (its versions are kept, for the jobs that ran under them); as it was.

        Raises:
            GuardrailNotFound: none is set under ``name``.
        """
        current = self.guardrail(name)
        self._db.execute("UPDATE guardrails SET deleted = 1 WHERE name = ?", (name,))
        return current

    def binding(
        self, tenant: str, team: str | None, skill: str | None, key: str | None
    ) -> tuple[BoundGuardrail, ...]:
        """The enabled guardrails that bind a job of ``tenant``/``team``/``skill`` by ``key``.

        ``team`` None: those that bind whatever team runs the job (none names a team).
        """
        return tuple(
            BoundGuardrail(name=g.name, version=g.version, spec=g.spec)
            for g in self.guardrails()
            if g.spec.enabled and g.spec.applies_to.binds(tenant, team, skill, key)
        )

    def record(self, tenant: str, job_id: str | None, decision: GuardrailDecision) -> None:
        """Keep a decision made for ``tenant`` (of ``job_id``, or of input it refused)."""
        now = time.time()
        with self._db.transaction() as tx:
            tx.execute(
                "INSERT INTO guardrail_decisions (id, at, tenant, job_id, decision) "
                "VALUES (?, ?, ?, ?, ?)",
                (uuid.uuid4().hex, now, tenant, job_id, decision.model_dump_json()),
            )
            tx.execute(
                "DELETE FROM guardrail_decisions WHERE tenant = ? AND id NOT IN (SELECT id "
                "FROM guardrail_decisions WHERE tenant = ? ORDER BY at DESC LIMIT ?)",
                (tenant, tenant, _KEPT_DECISIONS),
            )

    def decisions(
        self, tenant: str | None, *, job_id: str | None = None, limit: int = 100
    ) -> list[DecisionRecord]:
        """``tenant``'s decisions (None: every tenant's), newest first (only ``job_id``'s)."""
        sql = "SELECT at, tenant, job_id, decision FROM guardrail_decisions WHERE TRUE"
        args: list[Any] = []
        if tenant is not None:
            sql, args = f"{sql} AND tenant = ?", [*args, tenant]
        if job_id is not None:
            sql, args = f"{sql} AND job_id = ?", [*args, job_id]
        rows = self._db.execute(f"{sql} ORDER BY at DESC LIMIT ?", [*args, limit])
        return [
            DecisionRecord(
                at=r[0],
                tenant=r[1],
                job_id=r[2],
                decision=GuardrailDecision.model_validate_json(r[3]),
            )
            for r in rows
        ]
