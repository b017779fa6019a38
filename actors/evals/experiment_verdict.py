"""The stopping rule and the test of an experiment: its samples, its arms' figures, its verdict.

:func:`sample` takes one arm's sample in assignment order, :func:`arm_stats` its figures so
far, and :func:`decide` the verdict once every arm has its sample: each challenger against
the control by the permutation test, the winner, and the cost guard (see
:mod:`raytroupe.actors.evals.experiments`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from raytroupe.actors.evals.experiment_store import Outcome
from raytroupe.actors.evals.stats import permutation_test
from raytroupe.protocols.experiments import (
    ArmComparison,
    ArmStats,
    ExperimentDecision,
    ExperimentSpec,
)

__all__ = ["arm_stats", "decide", "sample"]


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
