"""An A/B experiment: two versions of a skill share live traffic until a stated test decides.

Usage: python examples/ab_experiment.py [--name NAME] [--auto-promote]

Version 1 of the ``notes-code`` skill reads the alpha and beta notes of a request, version 2
the beta and delta notes; the code asked for is in the beta note of even requests and the
delta note of odd ones, and the skill's quality gate checks the code. With the offline model
version 1 is right on about half the requests, version 2 on all of them. Jobs ask for
``notes-code`` by name, as an application would; the experiment sends each to a version by
a hash of its job id, measures both, and decides at the horizon it stated before the first
job. On a cluster (``RAY_ADDRESS`` set) it joins that Ray; else it starts one of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os

from raytroupe import runtime
from raytroupe.protocols.experiments import ExperimentInfo
from raytroupe.protocols.skill import SkillSpec

MAX_JOBS = 400


def notes_skill(version: str, instructions: str, name: str = "notes-code") -> SkillSpec:
    """A version of the skill: its prompt differs, nothing else."""
    return SkillSpec.model_validate({
        "name": name, "version": version, "description": "The code of the right note.",
        "execution_mode": "direct", "prompt": {"instructions": instructions},
        "quality_gate": {"regex": [{"pattern": r"\b\d*22\b", "message": "not the code"}],
                         "max_retries": 0},
    })  # fmt: skip


def request(k: int) -> str:
    """The k-th request: the right code ends in 22, in the beta or the delta note."""
    if k % 2 == 0:
        return f"Alpha note: code {k}11. Beta note: code {k}22. Gamma note: code {k}33."
    return f"Alpha note: code {k}11. Gamma note: code {k}33. Delta note: code {k}22."


def show(info: ExperimentInfo) -> None:
    """Each arm's figures and the decision."""
    print(f"{'arm':<12}{'jobs':>6}{'success':>9}{'sample':>9}{'mean':>7}{'cost/job $':>12}")
    for k, arm in enumerate(info.arms):
        name = arm.version + (" (control)" if k == 0 else "")
        mean = "-" if arm.mean is None else f"{arm.mean:.3f}"
        sample = f"{arm.sample}/{info.samples_per_arm}"
        print(f"{name:<12}{arm.assigned:>6}{arm.success_rate:>9.0%}{sample:>9}{mean:>7}"
              f"{arm.cost_usd:>12.6f}")  # fmt: skip
    if info.decision is not None:
        print(f"decision: {info.decision.reason}")
        for c in info.decision.comparisons:
            print(f"  {c.version}: diff {c.diff:+.3f}, p = {c.p_value:.5f}, "
                  f"significant: {c.significant}")  # fmt: skip
        print(f"promoted: {info.promoted}")


def main() -> None:
    """Register both versions, start the experiment, send traffic until it decides."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", default=f"notes-ab-{os.urandom(2).hex()}")
    parser.add_argument("--auto-promote", action="store_true", help="make the winner current")
    args = parser.parse_args()
    rt = runtime.connect(log_level="warning")
    try:
        rt.put_skill(notes_skill("2", "Read the beta and delta notes."))
        rt.put_skill(notes_skill("1", "Read the alpha and beta notes."))  # current: 1
        info = rt.start_experiment({
            "name": args.name, "skill": "notes-code", "min_effect": 0.4,
            "arms": [{"version": "1"}, {"version": "2"}], "auto_promote": args.auto_promote,
        })  # fmt: skip
        print(f"experiment {args.name}: {info.samples_per_arm} jobs per arm, then a two-sided "
              f"permutation test at alpha {info.spec.alpha}")  # fmt: skip
        sent = 0
        while info.status == "running" and sent < MAX_JOBS:
            wave = [rt.submit(request(sent + i), skill="notes-code") for i in range(8)]
            for job in wave:
                with contextlib.suppress(runtime.JobFailed):  # a wrong answer fails its gate
                    job.result(timeout=60)
            sent += len(wave)
            info = rt.experiment(args.name)
        print(f"sent {sent} jobs asking for 'notes-code'\n")
        show(info)
        print(f"\ncurrent version of notes-code: {rt.skill('notes-code').version}")
    finally:
        rt.shutdown()


if __name__ == "__main__":
    main()
