"""Cancelling a job on a real Ray: its agents stop their subtasks."""

from __future__ import annotations

import time

import pytest

from raytroupe import runtime


def test_cancel_ends_the_job_and_its_running_subtasks(rt):
    team = runtime.Team(
        name="cancelme",
        planner_model="offline",
        models={"cancel-slow": runtime.OfflineModel(latency_s=60.0)},
        agents=[runtime.AgentSpec(name="cancel-agent", role="worker", model="cancel-slow",
                                  memory=runtime.MemoryPolicy(recall=False))],
    )  # fmt: skip
    job = rt.submit("- one.\n- two.", team=team)
    for event in job.events(timeout=60):
        if event.type == "subtask_started":
            break

    assert job.cancel() is True
    with pytest.raises(runtime.JobCancelled) as info:
        job.result(timeout=30)

    result = info.value.detail["result"]
    assert result.status == "cancelled"
    assert job.status() == "cancelled"
    assert job.cancel() is False
    # nothing the agents were doing for the job completed a model call
    assert [r for r in rt.usage(job.job_id) if r.agent == "cancel-agent"] == []
    # and the pool dropped them, on every replica: nothing is left in flight at any (the
    # calls would take 60 s)
    deadline = time.monotonic() + 20
    while (held := _at_the_pool(rt)) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the router's counters, bounded by the deadline
    assert held == {}


def _at_the_pool(rt) -> dict[str, int]:
    return {n: k for n, k in rt.router_stats().in_flight.items() if n.startswith("llm-")}
