"""Durable state: one interface to the tables the actors keep, on SQLite or PostgreSQL.

Every store (the orchestrator's journal, the LLM pool's ledger, the tools' idempotency
records and grants) opens a :class:`Database` from a *location*:

- a file path or ``:memory:`` (SQLite, the embedded default: one file per store, on the
  node its actor runs on);
- a ``postgresql://`` URL (a server every node reaches: the cluster's choice; every store
  of every actor shares it).

Stores write portable SQL (``?`` placeholders, ``INSERT ... ON CONFLICT``, ``RETURNING``)
and declare their tables as numbered migrations (:func:`migrate`), applied once per
database whichever process opens it first.
"""

from raytroupe.actors.state.database import (
    Database,
    Migration,
    Tx,
    checked_state_url,
    first,
    is_postgres,
    migrate,
    open_database,
    redact_url,
    state_url,
    upsert,
)

__all__ = [
    "Database",
    "Migration",
    "Tx",
    "checked_state_url",
    "first",
    "is_postgres",
    "migrate",
    "open_database",
    "redact_url",
    "state_url",
    "upsert",
]
