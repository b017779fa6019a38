"""The LLM pool on a real Ray: streamed tokens as job events, budgets, the usage report."""

from __future__ import annotations

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import ErrorCode, orchestrator_address


def test_streamed_tokens_arrive_as_job_events_in_order(rt):
    team = runtime.Team(
        name="streaming",
        planner_model="offline",
        agents=[runtime.AgentSpec(name="streamer", role="writer", model="offline", stream=True)],
    )
    text = "Ray actors keep state between calls. What do Ray actors keep?"
    job = rt.submit(text, team=team)
    events = list(job.events(timeout=60))
    result = job.result(timeout=10)

    deltas = [e for e in events if e.type == "llm_delta"]
    assert deltas, "no token events were streamed"
    assert {e.data["agent"] for e in deltas} == {"streamer"}
    streamed = "".join(d["text"] for e in deltas for d in e.data["deltas"])
    outputs = [s.output for s in result.subtasks]
    # every subtask's answer arrived token by token, in order, before its result
    for output in outputs:
        assert output in streamed
    assert events.index(deltas[-1]) < [e.type for e in events].index("job_aggregating")


def test_a_budget_stops_the_job_before_it_is_exceeded(rt):
    priced = runtime.OfflineModel(input_usd_per_mtok=1.0, output_usd_per_mtok=1.0)
    team = runtime.Team(
        name="frugal",
        planner_model="offline",
        models={"priced-offline": priced},
        agents=[
            runtime.AgentSpec(name="spender", role="worker", model="priced-offline"),
        ],
    )
    # each call costs ~$0.000017 (17 tokens) but reserves ~$0.0011 (its prompt and the 1,024
    # tokens it may answer) until it settles: after seven calls or so the next reservation no
    # longer fits in $0.0012, whether the calls run one at a time or together (thirty would
    # need ~$0.0005 spent plus the last one's ~$0.0011 held)
    budget = runtime.Budget(usd=0.0012)
    task = "Tasks:\n" + "\n".join(f"- item number {i}." for i in range(30))
    job = rt.submit(task, team=team, budget=budget)
    with pytest.raises(runtime.JobFailed) as info:
        job.result(timeout=60)

    result = info.value.detail["result"]
    assert result.error.code is ErrorCode.BUDGET_EXCEEDED
    assert any(s.error and s.error.code is ErrorCode.BUDGET_EXCEEDED for s in result.subtasks)
    spent = ray.get(rt.actor("llm/0").spent.remote(f"job:{job.job_id}"))
    assert 0 < spent.usd <= budget.usd
    rows = rt.usage(job.job_id)
    assert sum(r.cost_usd for r in rows) == pytest.approx(spent.usd)


def test_usage_report_by_job_agent_and_model(rt):
    team = runtime.Team(
        name="accounted",
        planning="model",  # the planner's and the aggregation's calls are the job's shard's
        agents=[
            runtime.AgentSpec(name="acct-a", role="worker", model="offline"),
            runtime.AgentSpec(name="acct-b", role="worker", model="offline"),
        ],
    )
    result = rt.submit("- alpha.\n- beta.\n- gamma.\n- delta.", team=team).result(timeout=60)
    rows = rt.usage(result.job_id)

    agents = {r.agent for r in rows}
    shard = orchestrator_address(result.job_id)  # planning and aggregating: the job's shard
    assert {shard} < agents <= {shard, "acct-a", "acct-b"}
    assert all(r.job_id == result.job_id for r in rows)
    assert sum(r.calls for r in rows) == result.usage.calls
    assert sum(r.prompt_tokens + r.completion_tokens for r in rows) == result.usage.total_tokens
    assert {r.model for r in rows} <= {"offline", "default"}
    assert {r.provider for r in rows} == {"offline"}
