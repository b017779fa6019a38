"""The front desk's calls that make skills better: evals, experiments, optimising, promoting.

:attr:`raytroupe.runtime.client.SystemClient.evolution` is one; on the desk these are its
``Evolution`` part (:mod:`raytroupe.actors.desk.evolution`).
"""

from __future__ import annotations

from typing import Any

from raytroupe.protocols import Budget, SkillSpec
from raytroupe.protocols.evals import EvalComparison, EvalRun, EvalSuite, OptimisationReport
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.runtime.ray_calls import call

__all__ = ["EvolutionClient"]


class EvolutionClient:
    """Typed calls to the front desk's eval runs, experiments and skill optimisation."""

    def __init__(self, desk: Any) -> None:
        self._desk = desk

    async def start_eval(
        self,
        suite: EvalSuite,
        *,
        skill: str | None = None,
        team: str | None = None,
        tenant: str = "default",
        admin: bool = True,
        concurrency: int = 4,
        budget: Budget | None = None,
    ) -> str:
        """Start running an eval suite on the cluster; the run's id."""
        ref = self._desk.start_eval.remote(
            suite, skill=skill, team=team, tenant=tenant, admin=admin,
            concurrency=concurrency, budget=budget,
        )  # fmt: skip
        result: str = await call(ref)
        return result

    async def eval_run(
        self, run_id: str, timeout: float | None = 0.0, *, tenant: str | None = None
    ) -> EvalRun:
        """An eval run as it stands (with ``timeout``: once finished, or after that long)."""
        ref = self._desk.eval_run.remote(run_id, timeout, tenant=tenant)
        result: EvalRun = await call(ref)
        return result

    async def eval_runs(self, *, tenant: str | None = None) -> list[EvalRun]:
        """Eval runs (of ``tenant``, or all), oldest first, without their cases."""
        result: list[EvalRun] = await call(self._desk.eval_runs.remote(tenant=tenant))
        return result

    async def compare_evals(
        self, base: str, other: str, *, tenant: str | None = None
    ) -> EvalComparison:
        """Two runs of one suite compared case by case."""
        ref = self._desk.compare_evals.remote(base, other, tenant=tenant)
        result: EvalComparison = await call(ref)
        return result

    async def optimise_skill(
        self,
        name: str,
        suite: EvalSuite,
        *,
        variants: int = 3,
        model: str = "default",
        concurrency: int = 4,
        budget: Budget | None = None,
        promote: bool = False,
    ) -> OptimisationReport:
        """Propose better prompts for a skill and prove them on a suite (waits for it)."""
        ref = self._desk.optimise_skill.remote(
            name, suite, variants=variants, model=model, concurrency=concurrency,
            budget=budget, promote=promote,
        )  # fmt: skip
        result: OptimisationReport = await call(ref)
        return result

    async def start_experiment(self, spec: ExperimentSpec) -> ExperimentInfo:
        """Start an A/B experiment on a skill's live traffic."""
        result: ExperimentInfo = await call(self._desk.start_experiment.remote(spec))
        return result

    async def experiment(self, name: str) -> ExperimentInfo:
        """An experiment with each arm's figures (and the decision, once made)."""
        result: ExperimentInfo = await call(self._desk.experiment.remote(name))
        return result

    async def experiments(self) -> list[ExperimentInfo]:
        """Every experiment, oldest first."""
        result: list[ExperimentInfo] = await call(self._desk.experiments.remote())
        return result

    async def stop_experiment(self, name: str, *, by: str = "api") -> ExperimentInfo:
        """End a running experiment without a verdict."""
        ref = self._desk.stop_experiment.remote(name, by=by)
        result: ExperimentInfo = await call(ref)
        return result

    async def promote_skill(self, name: str, version: str, *, source: str = "api") -> SkillSpec:
        """Make a registered version (a proposal) of a skill the current one."""
        ref = self._desk.promote_skill.remote(name, version, source=source)
        result: SkillSpec = await call(ref)
        return result
