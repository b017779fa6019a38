"""The statistics of eval runs: a confidence interval of a mean, and a paired test.

- :func:`mean_ci`: the mean with its 95 % confidence interval by Student's t (critical values
  tabulated for small samples, 1.96 from 120 cases on), clipped to 0-1 as scores are.
- :func:`paired_test`: the two-sided sign-flip permutation test of paired differences (the
  null: each case's difference is as likely negative as positive). Exact for up to 16
  non-zero differences, else 20,000 random sign flips with a fixed seed, so a comparison
  says the same every time it is made.
- :func:`permutation_test`: the two-sided permutation test of two independent samples'
  means (an A/B experiment's arms), by random relabelling with a fixed seed.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Final

import numpy as np

__all__ = ["mean_ci", "paired_test", "permutation_test"]

_T975: Final = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
                8: 2.306, 9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060,
                30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}  # fmt: skip
_EXACT_UP_TO: Final = 16
_DRAWS: Final = 20_000
_SEED: Final = 20_261_203
_BATCH: Final = 2_000
_CELLS: Final = 2_000_000
"""Random keys drawn at once by the permutation test (16 MB of floats)."""


def _t(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (conservative)."""
    if df >= max(_T975):
        return 1.96
    return _T975[min(k for k in _T975 if k >= df)] if df not in _T975 else _T975[df]


def mean_ci(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of ``values`` (scores in 0-1); (0, 0, 0) for none."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = _t(n - 1) * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def paired_test(diffs: Sequence[float]) -> float:
    """Two-sided p-value that the paired ``diffs`` centre on zero (1.0 when all are zero)."""
    nonzero = [d for d in diffs if d != 0.0]
    if not nonzero:
        return 1.0
    observed = abs(sum(nonzero))
    if len(nonzero) <= _EXACT_UP_TO:
        signs = itertools.product((1.0, -1.0), repeat=len(nonzero))
        totals = [abs(sum(s * d for s, d in zip(flip, nonzero, strict=True))) for flip in signs]
        return sum(t >= observed - 1e-12 for t in totals) / len(totals)
    rng = random.Random(_SEED)  # noqa: S311 - a permutation test, not a secret
    hits = sum(
        abs(sum(d if rng.random() < 0.5 else -d for d in nonzero)) >= observed - 1e-12  # noqa: PLR2004 - a fair coin
        for _ in range(_DRAWS)
    )
    return (hits + 1) / (_DRAWS + 1)


def permutation_test(
    control: Sequence[float], other: Sequence[float], *, draws: int = 10_000, seed: int = _SEED
) -> float:
    """Two-sided p-value that two independent samples' means differ only by chance.

    The null: every value is as likely to have come from either sample (the arms are
    exchangeable). ``draws`` random relabellings (a fixed seed: the same answer each time),
    counting those whose difference of means is at least the observed one; (hits + 1) /
    (draws + 1), so the test never claims more than the draws can show. Exact in its level
    whatever the values' distribution: no normal approximation.
    """
    x = np.concatenate([np.asarray(control, dtype=float), np.asarray(other, dtype=float)])
    size, first = len(x), len(control)
    if first in {0, size}:
        return 1.0
    observed = abs(x[:first].mean() - x[first:].mean())
    total = x.sum()
    rng = np.random.default_rng(seed)
    hits = 0
    batch = max(1, min(_BATCH, _CELLS // size))  # at most _CELLS keys drawn at once
    for start in range(0, draws, batch):
        rows = min(batch, draws - start)
        # the ``first`` smallest of random keys: a uniformly random relabelling per row
        picked = np.argpartition(rng.random((rows, size)), first - 1, axis=1)[:, :first]
        sums = x[picked].sum(axis=1)
        diffs = np.abs(sums / first - (total - sums) / (size - first))
        hits += int((diffs >= observed - 1e-12).sum())
    return (hits + 1) / (draws + 1)
