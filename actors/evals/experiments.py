"""A/B experiments on live traffic: the split, the measurements, the test and the guard.

:class:`ExperimentDesk` (kept by the front desk, where jobs are admitted) holds the running
experiments. A job that asks for a skill by name while one runs gets the version
:func:`arm_for` picks from a hash of the experiment's name and the job id, weighted: the
same job id always lands on the same arm, and nothing a caller sends can choose it (a job id
is made by the front desk). The assignment is written once the job is admitted, before it
starts, and dropped again if starting it fails.

The shard that runs the job writes its outcome when it finishes (:meth:`ExperimentStore.
outcome`), and a person's feedback when it comes (:meth:`ExperimentStore.feedback`, in
:mod:`raytroupe.actors.evals.experiment_store`): the journal's database is shared by every
shard, so nothing waits on another actor and nothing is lost when one restarts.

**The stopping rule and the test** (:mod:`raytroupe.actors.evals.experiment_verdict`).
``spec.sample_size()`` measured jobs per arm, taken in the order the jobs were assigned (so a
fast arm does not fill its sample with its fastest jobs): cancelled jobs are left out, as
are, for the ``feedback`` metric, jobs nobody scored.
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
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import structlog

from raytroupe.actors.evals.experiment_store import ExperimentStore, Outcome
from raytroupe.actors.evals.experiment_verdict import arm_stats, decide
from raytroupe.actors.skills.registry import SkillRegistry
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import ConfigError, Conflict, ExperimentNotFound, JobResult, TroupeError
from raytroupe.protocols.experiments import (
    Arm,
    ExperimentDecision,
    ExperimentInfo,
    ExperimentSpec,
)

__all__ = ["Assignment", "ExperimentDesk", "Lookup", "arm_for"]

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


def arm_for(experiment: str, key: str, arms: Sequence[Arm]) -> Arm:
    """The arm ``key`` (a job id) lands on: a hash to [0, 1), cut by the weights."""
    digest = hashlib.sha256(f"{experiment}\x00{key}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64 * sum(a.weight for a in arms)
    for arm in arms:
        point -= arm.weight
        if point < 0:
            return arm
    return arms[-1]


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
