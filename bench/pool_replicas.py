"""LLM pool replicas: the fan-out job of ``fanout.py`` on one pool replica, then on two.

A job of N parallel subtasks, every model call ``L`` s, as in ``fanout.py`` section 2; the
same jobs on a fresh local Ray whose pool has ``LLMConfig(replicas=1)``, then ``replicas=2``
(one budget ledger in SQLite, shared). Figures: actual / ideal for each, and the two-replica
time against the one-replica time, measured in the same run. With one replica every model
call of the job passes one process (~0.6 ms of CPU each), which is what keeps N=128 above
its goal; two share that work, on the 2 cores of this machine.

Usage: python bench/pool_replicas.py [--quick] [--json PATH]
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from _common import Figure, Section, machine, main, median
from fanout import LATENCY_S, _actual, _capacity, _job, _team, connect

from raytroupe import runtime

NS = (128, 512)
MEASURED = (
    "measured 2026-12-02 on this 2-core machine (load ~1.4): two replicas took 1.02x the time "
    "of one at N=128 (1.71 vs 1.68 s) and at N=512 (2.74 vs 2.70 s). Both cores are busy "
    "with the whole job (router, orchestrator, agents and pool: ~2 ms of CPU per subtask, "
    "the pool ~0.5 of it), so a second pool process adds no CPU here; replicas pay off where "
    "they run on nodes of their own, which this machine cannot show"
)
EFFICIENCY_GOALS = {128: 1.05, 512: 1.10}  # the goals for N=128 and N=512


def _measure(replicas: int, repeats: int) -> dict[int, float]:
    """Median actual seconds per N on a fresh Ray whose pool has ``replicas`` replicas."""
    with tempfile.TemporaryDirectory(prefix="replicas-") as tmp:
        root = Path(tmp)
        rt = connect(
            root,
            {"slow": runtime.OfflineModel(latency_s=LATENCY_S)},
            runtime.LLMConfig(replicas=replicas),
        )
        try:
            team = _team("replicas", "slow")
            _job(rt, team, 8)  # spawn the agents, warm every path
            return {n: median([_actual(_job(rt, team, n)) for _ in range(repeats)]) for n in NS}
        finally:
            rt.shutdown()


def run(quick: bool) -> Section:
    """Both pools, one after the other, on a local Ray of 2 CPUs."""
    repeats = 2 if quick else 5
    load_before = machine()["load"]
    section = Section(title="LLM pool replicas: fan-out on one replica and on two")
    capacity = _capacity(_team("replicas", "slow"))
    one, two = _measure(1, repeats), _measure(2, repeats)
    for n in NS:
        ideal = LATENCY_S * (2 + math.ceil(n / capacity))
        section.figures += [
            Figure(f"fan-out N={n}, L={LATENCY_S:g} s, 1 replica: actual", one[n], ideal, "s",
                   "ideal (formula)", EFFICIENCY_GOALS[n], "at_most"),
            Figure(f"fan-out N={n}, L={LATENCY_S:g} s, 2 replicas: actual", two[n], ideal, "s",
                   "ideal (formula)", EFFICIENCY_GOALS[n], "at_most"),
            Figure(f"fan-out N={n}: 2 replicas against 1", two[n], one[n], "s", "1 replica"),
        ]  # fmt: skip
    section.notes.append(MEASURED)
    section.notes.append(
        f"{repeats} repeats per point, medians; team: capacity {capacity} subtasks at once, "
        f"recall off; load average (1, 5, 15 min) before the run {load_before}"
    )
    return section


if __name__ == "__main__":
    main(run)
