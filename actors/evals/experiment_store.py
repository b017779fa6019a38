"""Where experiments are kept: their headers, each assigned job and its measured outcome.

:class:`ExperimentStore` keeps the experiments of :mod:`raytroupe.actors.evals.experiments` in
the journal's database (or in memory): the front desk writes each job's assignment when it
admits the job, the shard that runs it writes its outcome when it finishes, and a person's
feedback when it comes. :class:`Outcome` is one assigned job as measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from raytroupe.actors.state import Database, Migration, migrate, open_database
from raytroupe.protocols import JobResult
from raytroupe.protocols.experiments import ExperimentInfo

__all__ = ["ExperimentStore", "Outcome"]


_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS experiments (name TEXT PRIMARY KEY, skill TEXT NOT NULL, "
        "status TEXT NOT NULL, info TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS experiment_jobs (job_id TEXT PRIMARY KEY, "
        "experiment TEXT NOT NULL, arm TEXT NOT NULL, assigned_at DOUBLE PRECISION NOT NULL, "
        "status TEXT, quality DOUBLE PRECISION, judge DOUBLE PRECISION, "
        "cost_usd DOUBLE PRECISION, latency_s DOUBLE PRECISION, "
        "feedback_sum DOUBLE PRECISION NOT NULL DEFAULT 0, "
        "feedback_n INTEGER NOT NULL DEFAULT 0)",
        "CREATE INDEX IF NOT EXISTS experiment_jobs_by_experiment "
        "ON experiment_jobs (experiment, assigned_at)",
    ),
)


@dataclass(frozen=True)
class Outcome:
    """One assigned job as measured (``status`` None: not finished yet)."""

    arm: str
    status: str | None
    quality: float | None
    judge: float | None
    cost_usd: float
    latency_s: float
    feedback: float | None
    feedback_n: int

    def value(self, metric: str) -> float | None:
        """The job's value of ``metric`` (None: not in the sample)."""
        if metric == "feedback":
            return self.feedback
        if metric == "success":
            return 1.0 if self.status == "succeeded" else 0.0
        return self.quality if self.quality is not None else 0.0


class ExperimentStore:
    """Experiments and their jobs in a state database (the journal's, shared by the shards)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "experiments", _MIGRATIONS)

    @classmethod
    def in_memory(cls) -> ExperimentStore:
        """A store of one process (an orchestrator without a journal)."""
        return cls(open_database(":memory:", "experiments", _MIGRATIONS))

    def put(self, info: ExperimentInfo) -> None:
        """Record an experiment's header (its arms' figures are computed, never stored)."""
        header = info.model_copy(update={"arms": ()})
        self._db.execute(
            "INSERT INTO experiments (name, skill, status, info) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET status = excluded.status, info = excluded.info",
            (info.spec.name, info.spec.skill, info.status, header.model_dump_json()),
        )

    def create(self, info: ExperimentInfo) -> bool:
        """Record a new experiment; False if the name is taken (by any, ever)."""
        rows = self._db.execute(
            "INSERT INTO experiments (name, skill, status, info) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name) DO NOTHING RETURNING name",
            (info.spec.name, info.spec.skill, info.status, info.model_dump_json()),
        )
        return bool(rows)

    def headers(self, status: str | None = None) -> list[ExperimentInfo]:
        """Experiments (with ``status``, or all), oldest first."""
        rows = self._db.execute("SELECT status, info FROM experiments")
        found = [ExperimentInfo.model_validate_json(i) for s, i in rows if status in {None, s}]
        return sorted(found, key=lambda i: (i.started_at, i.spec.name))

    def header(self, name: str) -> ExperimentInfo | None:
        """One experiment's header."""
        rows = self._db.execute("SELECT info FROM experiments WHERE name = ?", (name,))
        return ExperimentInfo.model_validate_json(rows[0][0]) if rows else None

    def assign(self, job_id: str, experiment: str, arm: str, at: float) -> None:
        """Record that ``job_id`` runs ``arm`` of ``experiment``."""
        self._db.execute(
            "INSERT INTO experiment_jobs (job_id, experiment, arm, assigned_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
            (job_id, experiment, arm, at),
        )

    def outcome(self, result: JobResult) -> None:
        """Record a finished job's measurements (a job in no experiment changes nothing)."""
        quality = result.output.quality if result.output is not None else None
        judged = [c.score for c in quality.checks if c.score is not None] if quality else []
        self._db.execute(
            "UPDATE experiment_jobs SET status = ?, quality = ?, judge = ?, cost_usd = ?, "
            "latency_s = ? WHERE job_id = ? AND status IS NULL",
            (
                result.status,
                quality.score if quality is not None else None,
                sum(judged) / len(judged) if judged else None,
                result.usage.cost_usd,
                result.timings.total_s,
                result.job_id,
            ),
        )

    def feedback(self, job_id: str, score: float) -> None:
        """Count a person's score for a job (a job in no experiment changes nothing)."""
        self._db.execute(
            "UPDATE experiment_jobs SET feedback_sum = feedback_sum + ?, "
            "feedback_n = feedback_n + 1 WHERE job_id = ?",
            (score, job_id),
        )

    def forget(self, job_id: str) -> None:
        """Drop an assignment (its job was refused, or never started)."""
        self._db.execute("DELETE FROM experiment_jobs WHERE job_id = ?", (job_id,))

    def pending(self, experiment: str, before: float, limit: int = 100) -> list[str]:
        """Jobs of ``experiment`` assigned before ``before`` with no outcome yet."""
        rows = self._db.execute(
            "SELECT job_id FROM experiment_jobs WHERE experiment = ? AND status IS NULL "
            "AND assigned_at < ? ORDER BY assigned_at LIMIT ?",
            (experiment, before, limit),
        )
        return [job_id for (job_id,) in rows]

    def outcomes(self, experiment: str) -> list[Outcome]:
        """Every job of ``experiment``, in the order they were assigned."""
        rows = self._db.execute(
            "SELECT arm, status, quality, judge, cost_usd, latency_s, feedback_sum, feedback_n "
            "FROM experiment_jobs WHERE experiment = ? ORDER BY assigned_at, job_id",
            (experiment,),
        )
        return [
            Outcome(
                arm=arm,
                status=status,
                quality=quality,
                judge=judge,
                cost_usd=float(cost or 0.0),
                latency_s=float(latency or 0.0),
                feedback=float(fsum) / int(fn) if fn else None,
                feedback_n=int(fn),
            )
            for arm, status, quality, judge, cost, latency, fsum, fn in rows
        ]
