"""A/B experiments: live traffic of a skill split between its versions, and a stated test.

An :class:`ExperimentSpec` names a skill and two or more of its registered versions
(:class:`Arm`, with weights); the first arm is the *control*. While it runs, every job that
asks for the skill by name (not ``name@version``) goes to an arm chosen by a hash of its
job id, as the weights say. Each arm's jobs are measured: success, the quality gate's score,
a judge's score (when the gate has one), people's feedback, cost and latency.

**The design is fixed-horizon.** ``samples_per_arm`` (given, or computed from ``alpha``,
``power`` and ``min_effect``) is decided before the first job; the test is run once, when
every arm has that many measured jobs, so looking at the numbers earlier never changes the
false-positive rate. :class:`ExperimentInfo` carries the per-arm figures and, once
decided, the :class:`ExperimentDecision`. Pure data: no I/O.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.addresses import Name

__all__ = [
    "Arm",
    "ArmComparison",
    "ArmStats",
    "ExperimentDecision",
    "ExperimentInfo",
    "ExperimentMetric",
    "ExperimentSpec",
    "ExperimentStatus",
    "required_samples",
]

ExperimentMetric = Literal["success", "quality", "feedback"]
ExperimentStatus = Literal["running", "decided", "stopped"]

MAX_ARMS = 8
MAX_SAMPLES = 20_000
"""Jobs per arm at most: the test relabels 2 x 20,000 values 10,000 times (a few seconds)."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def required_samples(alpha: float, power: float, min_effect: float, comparisons: int) -> int:
    """Jobs per arm for the stated power against a ``min_effect`` difference of means.

    The normal approximation for two means with the largest variance a 0-1 metric can have
    (0.25), two-sided at ``alpha / comparisons`` (Bonferroni over the challengers)::

        n = ceil(2 * 0.25 * (z(1 - alpha / (2 * comparisons)) + z(power))^2 / min_effect^2)
    """
    z = NormalDist().inv_cdf
    spread = z(1 - alpha / (2 * comparisons)) + z(power)
    return math.ceil(2 * 0.25 * spread**2 / min_effect**2)


class Arm(_Config):
    """A version of the skill and its share of the traffic."""

    version: str = Field(min_length=1, max_length=64)
    weight: float = Field(default=1.0, gt=0.0, le=1000.0, description="Relative share.")


class ExperimentSpec(_Config):
    """What to split, how to measure it and how to decide (see the module docstring)."""

    name: Name
    skill: Name
    arms: tuple[Arm, ...] = Field(
        min_length=2, max_length=MAX_ARMS, description="The first is the control."
    )
    metric: ExperimentMetric = Field(
        default="success",
        description="What the test compares: 'success' (1 if the job succeeded, else 0), "
        "'quality' (the quality gate's score, 0 for a job with none) or 'feedback' (the mean "
        "of people's scores; jobs without feedback are not in the sample).",
    )
    alpha: float = Field(default=0.05, ge=0.001, le=0.2, description="False-positive rate.")
    power: float = Field(default=0.8, ge=0.5, le=0.99, description="At ``min_effect``.")
    min_effect: float = Field(
        default=0.2, ge=0.02, le=1.0, description="The difference of means worth finding."
    )
    samples_per_arm: int | None = Field(
        default=None, ge=5, le=MAX_SAMPLES, description="Override the computed sample size."
    )
    tenants: tuple[str, ...] | None = Field(
        default=None,
        max_length=1000,
        description="Only these tenants' jobs take part (None: every tenant's).",
    )
    auto_promote: bool = Field(
        default=False, description="Make the winner current when decided (if the guard allows)."
    )
    max_cost_increase: float = Field(
        default=0.1,
        ge=0.0,
        description="The guard: a winner costing more per job than the control by more than "
        "this fraction is not promoted automatically.",
    )

    @model_validator(mode="after")
    def _distinct(self) -> ExperimentSpec:
        versions = [a.version for a in self.arms]
        if len(set(versions)) != len(versions):
            raise ValueError(f"each arm is a different version (got {', '.join(versions)})")
        if self.sample_size() > MAX_SAMPLES:
            raise ValueError(
                f"min_effect {self.min_effect} needs {self.sample_size()} jobs per arm "
                f"(at most {MAX_SAMPLES}): look for a larger effect"
            )
        return self

    def sample_size(self) -> int:
        """Measured jobs per arm before the test is run (the stopping rule)."""
        if self.samples_per_arm is not None:
            return self.samples_per_arm
        return required_samples(self.alpha, self.power, self.min_effect, len(self.arms) - 1)


class ArmStats(_Config):
    """One arm's jobs so far."""

    version: str
    weight: float
    assigned: int = Field(description="Jobs sent to it.")
    finished: int = Field(description="Of those, finished (cancelled ones included).")
    success_rate: float = Field(description="Succeeded / finished (cancelled ones left out).")
    quality: float | None = Field(description="Mean quality-gate score, when there were any.")
    judge: float | None = Field(description="Mean judge score, when the gate has a judge.")
    feedback: float | None = Field(description="Mean of people's scores, when there are any.")
    feedback_count: int = 0
    cost_usd: float = Field(description="Mean cost per finished job.")
    latency_p50_s: float = Field(description="Median seconds from submission to result.")
    sample: int = Field(description="Jobs measured for the test (at most the sample size).")
    mean: float | None = Field(description="The metric's mean over that sample.")


class ArmComparison(_Config):
    """A challenger against the control, at the horizon."""

    version: str
    diff: float = Field(description="Its metric mean minus the control's.")
    p_value: float = Field(description="Two-sided permutation test of the difference.")
    significant: bool = Field(description="p below alpha / (number of challengers).")
    cost_ratio: float | None = Field(description="Its mean cost over the control's.")


class ExperimentDecision(_Config):
    """The test's verdict, made once, at the horizon."""

    at: float = Field(description="UNIX time.")
    winner: str | None = Field(description="The version that beat the control, if any.")
    comparisons: tuple[ArmComparison, ...]
    reason: str
    guard: str | None = Field(default=None, description="Why the winner was not promoted.")


class ExperimentInfo(_Config):
    """An experiment as it stands."""

    spec: ExperimentSpec
    status: ExperimentStatus
    started_at: float
    ended_at: float | None = None
    samples_per_arm: int = Field(description="The horizon: measured jobs per arm.")
    arms: tuple[ArmStats, ...] = ()
    decision: ExperimentDecision | None = None
    promoted: bool = Field(default=False, description="The winner became current.")
    stopped_by: str | None = Field(default=None, description="Who stopped it early.")
