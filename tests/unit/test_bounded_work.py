"""Bounded work on tenants' input, without Ray: limits first, one deadline, off the loop.

Issue 41: a tenant's patterns (JSON Schema ``pattern``, graph ``when``, gate and eval
regexes) and oversized documents must cost their sender time, never every tenant's.
"""

import asyncio
import os
import threading
import time

import pytest
from pydantic import ValidationError
from wiring import run  # first: it imports the actors in an order without cycles

from raytroupe.actors.answer_gate import checked_gate
from raytroupe.actors.evals.scoring import score_answer
from raytroupe.actors.offload import NICE, Offload, Shares
from raytroupe.actors.orchestrator.graphs.routing import Edges
from raytroupe.protocols import Busy, TeamSpec, WorkLimitExceeded
from raytroupe.protocols.bounded import ANSWER_WORK_S, bounded, search, spend
from raytroupe.protocols.evals import MAX_EXPECTATIONS, EvalCase
from raytroupe.protocols.graph import MAX_GRAPH_EDGES, GraphSpec
from raytroupe.protocols.graph_checkpoints import GraphTask
from raytroupe.protocols.team import MAX_AGENTS

EVIL = r"^(a|aa)+$"
"""Backtracks exponentially on 'aaa...!'."""
EVIL_TEXT = "a" * 64 + "!"
ANSWER_EVIL = r"^(.|..)+a$"
"""Backtracks exponentially on any longer text that has an 'a' but does not end with one."""
ANSWER = "The answer is that Ray actors are stateful workers in their own processes."


def _state_schema(patterns: int) -> dict[str, object]:
    props = {f"k{i}": {"type": "string", "pattern": EVIL} for i in range(patterns)}
    return {"type": "object", "properties": props}


def _graph_team(schema: dict[str, object], initial: dict[str, object]) -> dict[str, object]:
    graph = {
        "nodes": [{"id": "n", "role": "r", "instructions": "x"}],
        "start": "n",
        "state": {"json_schema": schema, "initial": initial},
    }
    return {"agents": [{"name": "a", "role": "r"}], "graph": graph}


# -- counts and sizes first ----------------------------------------------------------------


def test_a_team_of_twenty_thousand_agents_is_refused_on_its_count_before_any_agent_is_checked():
    # every agent has the same name: checking them would say "duplicate", the count says first
    agents = [{"name": "same", "role": "r"} for _ in range(20_000)]
    with pytest.raises(ValidationError) as caught:
        TeamSpec.model_validate({"agents": agents})
    errors = caught.value.errors()
    assert [e["type"] for e in errors] == ["too_long"]
    assert errors[0]["loc"] == ("agents",)
    assert str(MAX_AGENTS) in errors[0]["msg"]


def test_duplicate_agent_names_are_found_in_one_pass_and_named():
    agents = [{"name": f"a{i}", "role": "r"} for i in range(MAX_AGENTS - 2)]
    agents += [{"name": "a1", "role": "r"}, {"name": "a7", "role": "r"}]
    with pytest.raises(ValidationError, match="duplicate agent names: a1, a7"):
        TeamSpec.model_validate({"agents": agents})


def test_graph_edges_and_eval_expectations_are_counted_first():
    node = {"id": "n", "role": "r", "instructions": "x"}
    edges = [{"source": "n", "target": "end", "when": EVIL}] * (MAX_GRAPH_EDGES + 1)
    with pytest.raises(ValidationError) as caught:
        GraphSpec.model_validate({"nodes": [node], "start": "n", "edges": edges})
    assert [e["type"] for e in caught.value.errors()] == ["too_long"]
    expect = [{"kind": "regex", "pattern": EVIL}] * (MAX_EXPECTATIONS + 1)
    with pytest.raises(ValidationError) as caught:
        EvalCase.model_validate({"id": "c", "task": "q", "expect": expect})
    assert [e["type"] for e in caught.value.errors()] == ["too_long"]


# -- one deadline for a unit of work -------------------------------------------------------


def test_a_pattern_out_of_its_own_time_fails_closed_without_a_budget():
    assert search(EVIL, EVIL_TEXT) is None
    assert search(EVIL, "aaaa") is True
    assert search(EVIL, "b") is False


def test_a_spent_budget_refuses_the_next_pattern_naming_its_limit():
    with bounded(0.0, "test_work_s"), pytest.raises(WorkLimitExceeded) as caught:
        search("a", "a")
    assert caught.value.detail == {"limit": "test_work_s", "seconds": 0.0}
    assert caught.value.code.value == "work_limit"
    with bounded(0.0, "test_work_s"), pytest.raises(WorkLimitExceeded):
        spend()
    spend()  # outside any unit: nothing to spend


def test_a_unit_that_waits_for_a_core_is_not_charged_for_the_wait():
    # the pool's threads run at a lower priority: on a loaded node a unit may wait longer
    # than its budget before it runs; the budget counts the thread's work, not the wall
    with bounded(0.05, "edges_work_s") as budget:
        time.sleep(0.2)
        assert search("Ray", "Ray actors") is True
        spend()
        assert budget.left() > 0
        with pytest.raises(WorkLimitExceeded):
            search(EVIL, EVIL_TEXT)  # work is charged: a slow pattern still spends it


def test_the_budget_cuts_a_slow_pattern_short_and_nested_units_keep_the_sooner_deadline():
    with (
        bounded(0.05, "outer_s"),
        pytest.raises(WorkLimitExceeded) as caught,
        bounded(60.0, "inner_s"),
    ):
        search(EVIL, EVIL_TEXT)
    assert caught.value.detail["limit"] == "outer_s"


def test_many_slow_patterns_in_one_state_schema_share_the_request_budget():
    document = _graph_team(_state_schema(5), {f"k{i}": EVIL_TEXT for i in range(5)})
    # alone, each pattern fails closed after its own time: the value is refused
    with pytest.raises(ValidationError, match="took over"):
        TeamSpec.model_validate(document)
    # within a unit of work shorter than one pattern's limit, the unit's limit is named
    with bounded(0.1, "request_work_s"), pytest.raises(WorkLimitExceeded) as caught:
        TeamSpec.model_validate(document)
    assert caught.value.detail["limit"] == "request_work_s"


def test_a_graphs_when_edges_share_one_budget_on_a_models_text():
    node = {"id": "n", "role": "r", "instructions": "x"}
    edges = [{"source": "n", "target": "end", "when": ANSWER_EVIL} for _ in range(100)]
    graph = GraphSpec.model_validate({"nodes": [node], "start": "n", "edges": edges})
    routing = Edges(graph, "task", 8)
    with bounded(0.3, "edges_work_s"), pytest.raises(WorkLimitExceeded) as caught:
        routing.routed([(GraphTask(node="n"), ANSWER)], {}, {})
    assert caught.value.detail["limit"] == "edges_work_s"


def test_an_answer_whose_schema_checks_run_out_of_time_fails_its_gate_naming_the_limit():
    schema = {
        "type": "object",
        "properties": {f"k{i}": {"type": "string", "pattern": ANSWER_EVIL} for i in range(8)},
    }
    answer = "{" + ", ".join(f'"k{i}": "{ANSWER}"' for i in range(8)) + "}"
    problems = run(checked_gate(answer, schema, tenant="t"))
    assert len(problems) == 1
    assert "answer_work_s" in problems[0]
    assert ANSWER_WORK_S < 8 * 0.2  # the eight patterns alone would take longer


def test_an_eval_cases_patterns_share_its_budget():
    expect = [{"kind": "regex", "pattern": ANSWER_EVIL}] * MAX_EXPECTATIONS
    case = EvalCase.model_validate({"id": "c", "task": "q", "expect": expect})

    async def no_model(request):
        raise AssertionError(f"no model call expected: {request.purpose}")

    with pytest.raises(WorkLimitExceeded) as caught:
        run(score_answer(case, ANSWER, no_model, tenant="t"))
    assert caught.value.detail["limit"] == "eval_case_work_s"


# -- off the loop, in fair shares ----------------------------------------------------------


def test_work_off_the_loop_leaves_the_loop_serving_while_it_runs():
    release = threading.Event()

    async def scenario():
        offload = Offload(Shares(per_tenant=1, waiting=0, threads=2))
        held = asyncio.ensure_future(offload.run("a", 30.0, "x", release.wait, 30))
        # the loop still turns while the unit blocks its thread
        served = await asyncio.wait_for(asyncio.sleep(0, result="served"), 30)
        release.set()
        assert await held is True
        offload.close()
        return served

    assert asyncio.run(scenario()) == "served"


def test_a_tenant_past_its_share_and_queue_is_refused_while_another_tenant_goes_through():
    release = threading.Event()

    async def scenario():
        offload = Offload(Shares(per_tenant=1, waiting=1, threads=3))
        running = asyncio.ensure_future(offload.run("a", 30.0, "x", release.wait, 30))
        started = threading.Event()
        for _ in range(100):  # a few turns of the loop, bounded: the task takes its turn
            if offload_has_started(offload, "a"):
                break
            await asyncio.sleep(0)
        assert offload_has_started(offload, "a")
        queued = asyncio.ensure_future(offload.run("a", 30.0, "x", lambda: "queued"))
        await asyncio.sleep(0)  # let it take its place in the queue
        with pytest.raises(Busy) as caught:
            await offload.run("a", 30.0, "x", lambda: "third")
        assert caught.value.retryable
        assert caught.value.detail["retry_after_s"] >= 1
        # another tenant's work is not held up by the first one's flood
        other = await offload.run("b", 30.0, "x", started.set)
        assert other is None
        assert started.is_set()
        # work a running job needs waits its turn instead of being refused
        needed = asyncio.ensure_future(offload.runs("a", 30.0, "x", lambda: "needed"))
        release.set()
        results = (await running, await queued, await needed)
        offload.close()
        return results

    assert asyncio.run(scenario()) == (True, "queued", "needed")


def offload_has_started(offload: Offload, tenant: str) -> bool:
    """Whether ``tenant`` holds a turn (its semaphore taken)."""
    state = offload._tenants.get(tenant)
    return state is not None and state.running.locked()


def test_a_units_budget_holds_on_the_pool_thread():
    async def scenario():
        offload = Offload()
        try:
            await offload.run("a", 0.05, "unit_s", search, EVIL, EVIL_TEXT)
        finally:
            offload.close()

    with pytest.raises(WorkLimitExceeded) as caught:
        asyncio.run(scenario())
    assert caught.value.detail["limit"] == "unit_s"


def test_the_pools_threads_run_at_a_lower_cpu_priority_than_the_loop():
    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    async def scenario():
        offload = Offload()
        try:
            return niceness(), await offload.run("a", 1.0, "x", niceness)
        finally:
            offload.close()

    loop_nice, pool_nice = asyncio.run(scenario())
    assert pool_nice == max(loop_nice, NICE)  # lower, unless the process already runs lower
