"""Graph checkpoints, resumes and forks, in the journal's database.

A checkpoint is written after every superstep, before the next one starts; a resume (a
person's value or state edit for an interrupt) is written before the graph is woken; a
team or skill node's child job is written as soon as it exists. So a restarted
orchestrator, on this node or another (PostgreSQL), finds every graph where it was.
"""

from __future__ import annotations

import json
import time
from typing import Any

from raytroupe.actors.state import Database, Migration, first, migrate, open_database
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphState

__all__ = ["CheckpointStore", "Fork", "Resume"]

_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS graph_checkpoints (job_id TEXT NOT NULL, "
        "namespace TEXT NOT NULL, step BIGINT NOT NULL, checkpoint TEXT NOT NULL, "
        "PRIMARY KEY (job_id, namespace, step))",
        "CREATE TABLE IF NOT EXISTS graph_resumes (job_id TEXT NOT NULL, "
        "interrupt_id TEXT NOT NULL, resume TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (job_id, interrupt_id))",
        "CREATE TABLE IF NOT EXISTS graph_children (job_id TEXT NOT NULL, "
        "node_key TEXT NOT NULL, child_id TEXT NOT NULL, PRIMARY KEY (job_id, node_key))",
        "CREATE TABLE IF NOT EXISTS graph_forks (job_id TEXT PRIMARY KEY, "
        "parent_id TEXT NOT NULL, step BIGINT NOT NULL, edited TEXT)",
    ),
)

Resume = tuple[Any, GraphState | None]
"""A person's answer to an interrupt: (value, state edit)."""

Fork = tuple[str, int, GraphState | None]
"""Where a job was forked from: (job id, step, the state edit made then)."""


class CheckpointStore:
    """Checkpoints of every graph job of the orchestrator (its shards share the tables)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "graphs", _MIGRATIONS)

    @classmethod
    def in_memory(cls) -> CheckpointStore:
        """A store of one process (an orchestrator without a journal)."""
        return cls(open_database(":memory:", "graphs", _MIGRATIONS))

    def put(self, checkpoint: GraphCheckpoint) -> None:
        """Record ``checkpoint`` (again, if the step was checkpointed before: it replaces it)."""
        self._db.execute(
            "INSERT INTO graph_checkpoints VALUES (?, ?, ?, ?) ON CONFLICT (job_id, namespace, "
            "step) DO UPDATE SET checkpoint = excluded.checkpoint",
            (
                checkpoint.job_id,
                checkpoint.namespace,
                checkpoint.step,
                checkpoint.model_dump_json(),
            ),
        )

    def latest(self, job_id: str, namespace: str = "") -> GraphCheckpoint | None:
        """The job's last checkpoint in ``namespace`` (a subgraph's path; '' for the graph)."""
        row = first(
            self._db.execute(
                "SELECT checkpoint FROM graph_checkpoints WHERE job_id = ? AND namespace = ? "
                "ORDER BY step DESC LIMIT 1",
                (job_id, namespace),
            )
        )
        return None if row is None else GraphCheckpoint.model_validate_json(row[0])

    def get(self, job_id: str, step: int, namespace: str = "") -> GraphCheckpoint | None:
        """The job's checkpoint after ``step`` supersteps."""
        row = first(
            self._db.execute(
                "SELECT checkpoint FROM graph_checkpoints WHERE job_id = ? AND namespace = ? "
                "AND step = ?",
                (job_id, namespace, step),
            )
        )
        return None if row is None else GraphCheckpoint.model_validate_json(row[0])

    def all(self, job_id: str) -> list[GraphCheckpoint]:
        """Every checkpoint of the job, subgraphs' too, by namespace then step."""
        rows = self._db.execute(
            "SELECT checkpoint FROM graph_checkpoints WHERE job_id = ? ORDER BY namespace, step",
            (job_id,),
        )
        return [GraphCheckpoint.model_validate_json(r[0]) for r in rows]

    def resume(self, job_id: str, interrupt_id: str, value: Any, edit: GraphState | None) -> bool:
        """Record a person's answer to an interrupt; False if it was answered before."""
        with self._db.transaction() as tx:
            known = tx.execute(
                "SELECT 1 FROM graph_resumes WHERE job_id = ? AND interrupt_id = ?",
                (job_id, interrupt_id),
            )
            if known:
                return False
            tx.execute(
                "INSERT INTO graph_resumes VALUES (?, ?, ?, ?)",
                (job_id, interrupt_id, json.dumps([value, edit]), time.time()),
            )
        return True

    def resumed(self, job_id: str, interrupt_id: str) -> Resume | None:
        """The answer recorded for an interrupt, if any."""
        row = first(
            self._db.execute(
                "SELECT resume FROM graph_resumes WHERE job_id = ? AND interrupt_id = ?",
                (job_id, interrupt_id),
            )
        )
        if row is None:
            return None
        value, edit = json.loads(row[0])
        return value, edit

    def child(self, job_id: str, key: str, child_id: str | None = None) -> str | None:
        """The child job a node run started (recording ``child_id`` first, when given)."""
        if child_id is not None:
            self._db.execute(
                "INSERT INTO graph_children VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (job_id, key, child_id),
            )
        row = first(
            self._db.execute(
                "SELECT child_id FROM graph_children WHERE job_id = ? AND node_key = ?",
                (job_id, key),
            )
        )
        return None if row is None else str(row[0])

    def depth(self, job_id: str, deepest: int) -> int:
        """How many graph jobs ``job_id`` is a child job of, counting up to ``deepest``."""
        depth, current = 0, job_id
        while depth < deepest:
            row = first(
                self._db.execute("SELECT job_id FROM graph_children WHERE child_id = ?", (current,))
            )
            if row is None:
                break
            depth, current = depth + 1, str(row[0])
        return depth

    def fork(self, job_id: str, start: GraphCheckpoint, parent: Fork) -> None:
        """Record that ``job_id`` starts from ``start``, a checkpoint of job ``parent[0]``."""
        parent_id, step, edit = parent
        with self._db.transaction() as tx:
            tx.execute(
                "INSERT INTO graph_forks VALUES (?, ?, ?, ?)",
                (job_id, parent_id, step, None if edit is None else json.dumps(edit)),
            )
            tx.execute(
                "INSERT INTO graph_checkpoints VALUES (?, ?, ?, ?)",
                (job_id, "", start.step, start.model_dump_json()),
            )

    def forked_from(self, job_id: str) -> Fork | None:
        """Which job and checkpoint ``job_id`` was forked from, if it was."""
        row = first(
            self._db.execute(
                "SELECT parent_id, step, edited FROM graph_forks WHERE job_id = ?", (job_id,)
            )
        )
        if row is None:
            return None
        return str(row[0]), int(row[1]), None if row[2] is None else json.loads(row[2])
