"""Chaos smoke test: a few jobs while the router, an agent and a tool sandbox are killed.

The small, CI-sized run of ``tests.support.chaos`` (the full run is
``tests/reliability/test_chaos.py``). It shares the session's Ray and leaves it healthy:
every killed actor is back and registered with the router before the test ends.
"""

from __future__ import annotations

import pytest

from tests.support.chaos import ChaosPlan, run_chaos

pytestmark = pytest.mark.system  # system tier: the reliability smoke: actors killed under load

PLAN = ChaosPlan(
    jobs=8,
    seed=9,
    prefix="smoke",
    kill_interval_s=(0.8, 1.5),
    kinds=("agent", "router", "sandbox", "llm"),
    must_kill=("router", "agent", "sandbox"),
    max_kills=5,
    max_kills_per_actor=1,
    concurrency=4,
    side_effect_every=4,
    job_timeout_s=45.0,
    latency_s=0.5,
)


def test_jobs_complete_or_fail_typed_while_actors_are_killed(rt, tmp_path):
    """No job hangs or answers wrong, envelopes are accounted for, no side effect runs twice."""
    result = run_chaos(rt, PLAN, tmp_path)
    result.record("chaos", note="smoke")

    assert result.violations() == [], result.violations()
    assert {"router", "agent", "sandbox"} <= {k.kind for k in result.kills}, result.kills
    assert result.count("completed") + result.count("failed_typed") == PLAN.jobs
    assert result.count("completed") >= PLAN.jobs // 2, result.outcomes
    assert result.tool_runs, "no side-effect job ran"
