"""Money fails closed across a pool restart, and a joining driver replaces no one's models.

On the session Ray: the tenant ``frugal`` has a token budget in the pool's configuration
(``tests/conftest.py``); the pool is killed in the middle of one of its jobs.
"""

from __future__ import annotations

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.llm.budget import Spend
from tests.support.keys import FRUGAL_BUDGET, FRUGAL_TENANT
from tests.support.restarts import after_restart, kill_and_wait_for_restart

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system


def _frugal_team() -> runtime.Team:
    return runtime.Team(
        name="frugal-team",
        # planned and aggregated by the model, as the spend below was sized for: a job of the
        # tenant's costs some 300 tokens, so a dozen jobs meet the 3,000-token budget
        planning="model",
        planner_model="offline",
        max_parallel=1,
        models={"frugal-slow": runtime.OfflineModel(latency_s=0.4)},
        agents=[runtime.AgentSpec(name="frugal-a", role="worker", model="frugal-slow",
                                  memory=runtime.MemoryPolicy(recall=False))],
    )  # fmt: skip


def _run(rt, task):
    return _result_of(rt.submit(task, team=_frugal_team(), tenant=FRUGAL_TENANT))


def test_a_pool_killed_mid_job_keeps_the_tenants_spend_and_its_budget_holds(rt):
    llm = rt.actor("llm/0")
    job = rt.submit("- one.\n- two.\n- three.", team=_frugal_team(), tenant=FRUGAL_TENANT)
    for event in job.events(timeout=60):
        if event.type == "subtask_finished":
            break
    before: Spend = ray.get(llm.spent.remote(f"tenant:{FRUGAL_TENANT}"))
    assert before.tokens > 0
    kill_and_wait_for_restart(llm)
    after: Spend = after_restart(lambda: llm.spent.remote(f"tenant:{FRUGAL_TENANT}"))
    assert after.tokens >= before.tokens  # not reset to zero by the restart

    outcomes = [_result_of(job)]
    for n in range(12):  # spend the rest of the budget: it must stop there
        result = _run(rt, f"- item {n}.\n- another {n}.")
        outcomes.append(result)
        if result.error is not None and result.error.code.value == "budget_exceeded":
            break
    spent: Spend = ray.get(llm.spent.remote(f"tenant:{FRUGAL_TENANT}"))
    assert FRUGAL_BUDGET.tokens is not None
    assert spent.tokens <= FRUGAL_BUDGET.tokens
    assert outcomes[-1].error is not None
    assert outcomes[-1].error.code.value == "budget_exceeded"
    assert all(o.status in {"succeeded", "failed"} for o in outcomes)  # every job ended


def _result_of(job):
    try:
        return job.result(timeout=120)
    except runtime.JobFailed as failed:
        return failed.detail["result"]


def test_a_driver_joining_the_cluster_replaces_no_alias_without_saying_so(rt):
    llm = rt.actor("llm/0")
    default = ray.get(llm.models.remote())["default"]
    with pytest.raises(runtime.ConfigError, match="replace") as refused:
        runtime.connect(llm=runtime.OfflineModel(latency_s=1.0))  # joins the session's Ray
    assert "default" in refused.value.message
    assert ray.get(llm.models.remote())["default"] == default

    runtime.connect(llm={"joiner-x": runtime.OfflineModel(latency_s=0.1)})  # a new alias: fine
    mine = runtime.OfflineModel(latency_s=0.2)
    runtime.connect(llm={"joiner-x": mine}, replace_models=True)  # said so: replaced
    assert ray.get(llm.models.remote())["joiner-x"] == mine
    assert ray.get(llm.models.remote())["default"] == default
