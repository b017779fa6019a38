"""A/B experiments on live traffic: the split, the measurements, the test and the guard.

:class:`ExperimentDesk` (kept by the front desk, where jobs are admitted) holds the running
experiments. A job that asks for a skill by name while one runs gets the version
:func:`arm_for` picks from a hash of the experiment's name and the job id, weighted: the
same job id always lands on the same arm, and nothing a caller sends can choose it (a job id
is made by the front desk). The assignment is written once the job is admitted, before it
starts, and dropped again if starting it fails.

The shard that runs the job writes its outcome when it finishes (:meth:`ExperimentStore.
outcome`), and a person's feedback when it comes (:meth:`ExperimentStore.feedback`): the
journal's database is shared by every shard, so nothing waits on another actor and nothing
is lost when one restarts.

**The stopping rule and the test.** ``spec.sample_size()`` measured jobs per arm, taken in
the order the jobs were assigned (so a fast arm does not fill its sample with its fastest
jobs): cancelled jobs are left out, as are, for the ``feedback`` metric, jobs nobody scored.
When every arm has its sample, each challenger is compared with the control once, by the
two-sided permutation test of the difference of means
(:func:`raytroupe.actors.evals.stats.permutation_test`), at ``alpha / challengers``. The winner is
the significant challenger with the largest gain. With ``auto_promote`` it becomes the
skill's current version unless it costs more per job than the control by more than
``max_cost_increase`` (the guard). Either way the experiment is then ``decided`` and the
traffic goes back to the skill's current version.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import structlog

from raytroupe.actors.evals.stats import permutation_test
from raytroupe.actors.skills.registry import SkillRegistry
from raytroupe.actors.state import Database, Migration, migrate, open_database
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import ConfigError, Conflict, ExperimentNotFound, JobResult, TroupeError
from raytroupe.protocols.experiments import (
    Arm,
    ArmComparison,
    ArmStats,
    ExperimentDecision,
    ExperimentInfo,
    ExperimentSpec,
)

__all__ = [
    "Assignment",
    "ExperimentDesk",
    "ExperimentStore",
    "Lookup",
    "Outcome",
    "arm_for",
    "decide",
    "sample",
]

log = structlog.get_logger("raytroupe.experiments")

CHECK_EVERY_S = 1.0
"""How often the front desk looks for experiments that reached their horizon."""
STALE_S = 30.0
"""An assignment this old without an outcome is looked up in the journal (see ``sweep``)."""

Lookup = Callable[[str], tuple[bool, JobResult | None]]
"""(whether a job is journaled, its result if it has one)."""


class Assignment(NamedTuple):
    """The experiment a job takes part in, and the version it runs."""

    experiment: str
    version: str


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


def arm_for(experiment: str, key: str, arms: Sequence[Arm]) -> Arm:
    """The arm ``key`` (a job id) lands on: a hash to [0, 1), cut by the weights."""
    digest = hashlib.sha256(f"{experiment}\x00{key}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64 * sum(a.weight for a in arms)
    for arm in arms:
        point -= arm.weight
        if point < 0:
            return arm
    return arms[-1]


def sample(outcomes: Sequence[Outcome], metric: str, size: int) -> tuple[list[float], bool]:
    """(the first ``size`` values of one arm's jobs, in assignment order; whether complete).

    A cancelled job is left out, as is a job without the metric (feedback nobody gave). A
    job still running holds the sample's place: the values after it wait for it, so the
    sample is the same whatever order the jobs finish in.
    """
    values: list[float] = []
    for o in outcomes:
        if len(values) == size:
            break
        if o.status is None:  # still running (feedback comes only after the answer)
            if metric == "feedback":
                continue  # scored later, if ever: not a place-holder
            return values, False
        if o.status == "cancelled":
            continue
        value = o.value(metric)
        if value is not None:
            values.append(value)
    return values, len(values) == size


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def arm_stats(spec: ExperimentSpec, outcomes: Sequence[Outcome]) -> tuple[ArmStats, ...]:
    """Each arm's figures so far."""
    stats = []
    for arm in spec.arms:
        mine = [o for o in outcomes if o.arm == arm.version]
        done = [o for o in mine if o.status is not None]
        counted = [o for o in done if o.status != "cancelled"]
        scored = [o for o in mine if o.feedback is not None]
        values, _ = sample(mine, spec.metric, spec.sample_size())
        stats.append(ArmStats(
            version=arm.version, weight=arm.weight, assigned=len(mine), finished=len(done),
            success_rate=round(sum(o.status == "succeeded" for o in counted) / len(counted), 6)
            if counted else 0.0,
            quality=_mean([o.quality for o in counted if o.quality is not None]),
            judge=_mean([o.judge for o in counted if o.judge is not None]),
            feedback=_mean([o.feedback for o in scored if o.feedback is not None]),
            feedback_count=sum(o.feedback_n for o in scored),
            cost_usd=round(_mean([o.cost_usd for o in counted]) or 0.0, 8),
            latency_p50_s=round(statistics.median([o.latency_s for o in counted]), 4)
            if counted else 0.0,
            sample=len(values), mean=_mean(values),
        ))  # fmt: skip
    return tuple(stats)


def decide(
    spec: ExperimentSpec, outcomes: Sequence[Outcome], *, at: float, draws: int = 10_000
) -> ExperimentDecision | None:
    """The verdict, once every arm has its sample (None before)."""
    size = spec.sample_size()
    samples = {}
    for arm in spec.arms:
        values, complete = sample([o for o in outcomes if o.arm == arm.version], spec.metric, size)
        if not complete:
            return None
        samples[arm.version] = values
    control = spec.arms[0].version
    level = spec.alpha / (len(spec.arms) - 1)
    cost = {s.version: s.cost_usd for s in arm_stats(spec, outcomes)}
    compared = []
    for arm in spec.arms[1:]:
        p = permutation_test(samples[control], samples[arm.version], draws=draws)
        diff = sum(samples[arm.version]) / size - sum(samples[control]) / size
        compared.append(ArmComparison(
            version=arm.version, diff=round(diff, 6), p_value=round(p, 6),
            significant=p < level,
            cost_ratio=round(cost[arm.version] / cost[control], 4) if cost[control] else None,
        ))  # fmt: skip
    better = sorted((c for c in compared if c.significant and c.diff > 0), key=lambda c: -c.diff)
    winner = better[0] if better else None
    if winner is not None:
        reason = (
            f"{winner.version} beats {control} on {spec.metric} by {winner.diff:+.3f} "
            f"(p = {winner.p_value:.4f} < {level:.4f}) over {size} jobs per arm"
        )
    else:
        reason = (
            f"no version beats {control} on {spec.metric} at p < {level:.4f} over {size} jobs "
            "per arm"
        )
    guard = None
    if winner is not None and cost[winner.version] > cost[control] * (1 + spec.max_cost_increase):
        guard = (
            f"{winner.version} costs ${cost[winner.version]:.6f} a job against "
            f"${cost[control]:.6f}: more than {spec.max_cost_increase:.0%} over the control"
        )
    return ExperimentDecision(at=at, winner=winner.version if winner else None,
                              comparisons=tuple(compared), reason=reason, guard=guard)  # fmt: skip


class ExperimentDesk:
    """The running experiments, as the front desk keeps them (see the module docstring).

    Args:
        store: where experiments and their jobs are kept.
        registry: the skills (arms must be registered versions; winners are promoted here).
        lookup: a job as journaled: what fills in an outcome its shard could not write.
        shared: whether every shard writes to ``store`` (False with an in-memory journal and
            more than one shard: then experiments cannot be measured, and are refused).
        clock: UNIX time, injectable for tests.
    """

    def __init__(
        self,
        store: ExperimentStore,
        registry: SkillRegistry,
        lookup: Lookup,
        *,
        shared: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._registry = registry
        self._lookup = lookup
        self._shared = shared
        self._clock = clock
        self._running = {i.spec.skill: i for i in store.headers("running")}
        self._checker: asyncio.Task[None] | None = None

    # -- the split ----------------------------------------------------------------------

    def choose(self, skill: str, tenant: str, job_id: str) -> Assignment | None:
        """The experiment and version ``job_id`` runs, if an experiment on ``skill`` takes it.

        Nothing is recorded: :meth:`record` once the job is admitted, just before it starts.
        """
        running = self._running.get(skill)
        if running is None:
            return None
        spec = running.spec
        if spec.tenants is not None and tenant not in spec.tenants:
            return None
        return Assignment(spec.name, arm_for(spec.name, job_id, spec.arms).version)

    def record(self, job_id: str, assignment: Assignment) -> None:
        """Count ``job_id`` in its experiment (before it starts: its outcome needs the row)."""
        self._store.assign(job_id, assignment.experiment, assignment.version, self._clock())

    def forget(self, job_id: str) -> None:
        """Uncount a job that did not start after all."""
        self._store.forget(job_id)

    # -- managing -----------------------------------------------------------------------

    def start(self, spec: ExperimentSpec) -> ExperimentInfo:
        """Start splitting the skill's traffic as ``spec`` says.

        Raises:
            SkillNotFound: the skill, or an arm's version, is not registered.
            Conflict: the name is taken, or the skill has a running experiment.
            ConfigError: the shards cannot share measurements (no journal database).
        """
        if not self._shared:
            raise ConfigError(
                "experiments need the journal's database with more than one orchestrator "
                "shard: every shard writes its jobs' outcomes there"
            )
        for arm in spec.arms:
            self._registry.get(spec.skill, arm.version)
        if spec.skill in self._running:
            raise Conflict(
                f"skill {spec.skill!r} already has a running experiment "
                f"({self._running[spec.skill].spec.name!r}): stop it first",
                skill=spec.skill,
            )
        info = ExperimentInfo(spec=spec, status="running", started_at=self._clock(),
                              samples_per_arm=spec.sample_size())  # fmt: skip
        if not self._store.create(info):
            raise Conflict(f"an experiment is named {spec.name!r} already", experiment=spec.name)
        self._running[spec.skill] = info
        arms = [a.version for a in spec.arms]
        log.info("experiment_started", experiment=spec.name, skill=spec.skill, arms=arms,
                 samples_per_arm=info.samples_per_arm)  # fmt: skip
        return self._figures(info)

    def stop(self, name: str, *, by: str) -> ExperimentInfo:
        """End a running experiment without a verdict (its figures stay).

        Raises:
            ExperimentNotFound: no such experiment.
            Conflict: it has ended already.
        """
        info = self._header(name)
        if info.status != "running":
            raise Conflict(f"experiment {name!r} has ended ({info.status})", experiment=name)
        info = info.model_copy(update={"status": "stopped", "ended_at": self._clock(),
                                       "stopped_by": by})  # fmt: skip
        self._end(info)
        log.info("experiment_stopped", experiment=name, by=by)
        return self._figures(info)

    def stop_skill(self, skill: str, *, by: str) -> None:
        """Stop the experiment running on ``skill`` (the skill is being deleted), if any."""
        running = self._running.get(skill)
        if running is not None:
            self.stop(running.spec.name, by=by)

    def info(self, name: str) -> ExperimentInfo:
        """An experiment with its arms' figures (the checks decide it, within a second).

        Raises:
            ExperimentNotFound: no such experiment.
        """
        return self._figures(self._header(name))

    def every(self) -> list[ExperimentInfo]:
        """Every experiment, oldest first, with its figures."""
        return [self.info(i.spec.name) for i in self._store.headers()]

    # -- deciding -------------------------------------------------------------------------

    def check(self) -> None:
        """Decide each running experiment that reached its horizon; update the metrics."""
        for info in list(self._running.values()):
            outcomes = self._measured(info)
            if outcomes is not None:
                self._conclude(info, outcomes, decide(info.spec, outcomes, at=self._clock()))

    async def check_off_loop(self) -> None:
        """:meth:`check`, with the tests (seconds for the largest samples) in a thread.

        The store and the registry are used from the event loop only; an experiment stopped
        while its test ran stays stopped.
        """
        for info in list(self._running.values()):
            outcomes = self._measured(info)
            if outcomes is None:
                continue
            decision = await asyncio.to_thread(decide, info.spec, outcomes, at=self._clock())
            if self._running.get(info.spec.skill) is info:
                self._conclude(info, outcomes, decision)

    def _measured(self, info: ExperimentInfo) -> list[Outcome] | None:
        """The experiment's jobs, outcomes swept in (None: the store cannot answer now)."""
        try:
            self.sweep(info.spec.name)
            return self._store.outcomes(info.spec.name)
        except TroupeError:  # the next check tries again
            log.warning("experiment_check_failed", experiment=info.spec.name, exc_info=True)
            return None

    def _conclude(
        self, info: ExperimentInfo, outcomes: list[Outcome], decision: ExperimentDecision | None
    ) -> None:
        """End the experiment with ``decision`` (if it has one); its arms to the metrics."""
        if decision is not None:
            try:
                info = self._settle(info, decision)
            except TroupeError:  # not recorded: the next check decides again
                log.warning("experiment_check_failed", experiment=info.spec.name, exc_info=True)
        for arm in arm_stats(info.spec, outcomes):
            metrics.experiment_arm(info.spec.name, arm)

    def sweep(self, name: str) -> None:
        """Fill in outcomes the jobs' shards did not write (``STALE_S`` after assignment).

        A job whose shard could not reach the store when it finished is read from the
        journal; one the journal never saw (its submission failed between assignment and
        start) is dropped, so that no sample waits for a job that will never finish.
        """
        for job_id in self._store.pending(name, self._clock() - STALE_S):
            known, result = self._lookup(job_id)
            if result is not None:
                self._store.outcome(result)
            elif not known:
                self._store.forget(job_id)
                log.warning("experiment_job_dropped", experiment=name, job_id=job_id)

    def _settle(self, info: ExperimentInfo, decision: ExperimentDecision) -> ExperimentInfo:
        promoted = False
        if decision.winner is not None and info.spec.auto_promote and decision.guard is None:
            try:
                self._registry.promote(info.spec.skill, decision.winner,
                                       source=f"experiment:{info.spec.name}")  # fmt: skip
                promoted = True
            except TroupeError as exc:  # the skill was deleted meanwhile
                decision = decision.model_copy(update={"guard": exc.message})
        info = info.model_copy(update={"status": "decided", "ended_at": decision.at,
                                       "decision": decision, "promoted": promoted})  # fmt: skip
        self._end(info)
        log.info("experiment_decided", experiment=info.spec.name, winner=decision.winner,
                 promoted=promoted, reason=decision.reason, guard=decision.guard)  # fmt: skip
        return info

    def _end(self, info: ExperimentInfo) -> None:
        self._store.put(info)
        self._running.pop(info.spec.skill, None)

    async def start_checking(self) -> None:
        """Check every :data:`CHECK_EVERY_S` seconds, in the background, until stopped."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(CHECK_EVERY_S)
                if self._running:
                    await self.check_off_loop()

        self._checker = asyncio.get_running_loop().create_task(loop())

    async def stop_checking(self) -> None:
        """Stop the background checks."""
        if self._checker is not None:
            self._checker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checker

    # -- helpers --------------------------------------------------------------------------

    def _header(self, name: str) -> ExperimentInfo:
        info = self._store.header(name)
        if info is None:
            raise ExperimentNotFound(f"no experiment is named {name!r}", experiment=name)
        return info

    def _figures(self, info: ExperimentInfo) -> ExperimentInfo:
        return info.model_copy(
            update={"arms": arm_stats(info.spec, self._store.outcomes(info.spec.name))}
        )
