"""Delegation and handoff keep the caller's context, and reach only the caller's peers."""

import asyncio

import pytest
from wiring import Tap, build_troupe, in_process_sandbox, order, run

from raytroupe.actors import LocalRouterClient, MessageRouter
from raytroupe.actors.tools.grants import Grants
from raytroupe.protocols import (
    AgentSpec,
    Budget,
    ErrorCode,
    LLMRequest,
    OfflineModel,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TaskRequest,
    TeamSpec,
    ToolCall,
)
from tests.support.inline import agent_name, written


def delegate(agent, instructions="Help.", call_id="d"):
    return ToolCall(call_id=call_id, tool="delegate",
                    arguments={"agent": agent, "instructions": instructions})  # fmt: skip


def handoff(agent, instructions="Finish it."):
    return ToolCall(call_id="h", tool="handoff",
                    arguments={"agent": agent, "instructions": instructions})  # fmt: skip


def tapped():
    """Envelopes each agent receives, by name, and the ``wrap`` that records them."""
    seen = {}

    def wrap(name, agent):
        seen[written(name)] = Tap(agent)  # by the name the team wrote
        return seen[written(name)]

    return seen, wrap


def one_step(*agents, **fields):
    """A team whose job is one subtask, given to the first agent."""
    return TeamSpec(
        name=fields.pop("name", "deleg"),
        planner_model="offline",
        agents=agents,
        plan=(PlannedSubtask(id="s1", role=agents[0].role, instructions="{task}"),),
        **fields,
    )


def tool_texts(troupe, model):
    """What the tools told ``model``'s agent, from its last request."""
    asked = [r for r in troupe.llm.payloads(LLMRequest) if r.model == model]
    return [m.text for m in asked[-1].messages if m.role == "tool"]


def test_a_loop_of_delegations_ends_at_the_hop_limit_with_a_dead_letter():
    # A asks B, B asks A, ... each delivery is one routing further, so the 8th level's request
    # meets the router's hop limit (16); every level then answers with what it heard
    depth = 8
    script = ScriptedModel(turns=(
        *(ScriptedTurn(tool_calls=(delegate(peer),)) for peer in ["b", "a"] * (depth // 2)),
        *(ScriptedTurn(text=f"level {n} answers") for n in range(depth, 0, -1)),
    ))  # fmt: skip

    async def main():
        troupe = await build_troupe({"loop": script})
        team = one_step(
            AgentSpec(name="a", role="ra", model="loop", tools=("delegate",)),
            AgentSpec(name="b", role="rb", model="loop", tools=("delegate",)),
        )
        result = await troupe.run("Go round.", team)
        return result, troupe, await troupe.router.dead_letters()

    result, troupe, dead = run(main())
    assert result.status == "succeeded", result.error
    assert result.subtasks[0].output == "level 1 answers"
    (letter,) = dead
    assert letter.reason == ErrorCode.HOP_LIMIT
    assert isinstance(letter.message.payload, TaskRequest)
    assert written(letter.message.recipient) == "a"  # the 9th level, never started
    work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    assert len(work) == 2 * depth  # one delegation and one answer per level, no more
    deepest = [m.text for m in work[depth].messages if m.role == "tool"]
    assert deepest == ["ERROR: cannot reach a: hop limit 16 reached"]


def test_only_the_callers_peers_can_be_asked_and_the_model_hears_whom_it_may_ask():
    outsider = AgentSpec(name="outsider", role="o", model="offline")
    script = ScriptedModel(turns=(
        ScriptedTurn(tool_calls=(delegate("outsider"),)),
        ScriptedTurn(text="refused"),
        ScriptedTurn(tool_calls=(delegate("outsider"),)),
        ScriptedTurn(text="asked"),
    ))  # fmt: skip
    boss = AgentSpec(name="boss", role="m", model="boss", tools=("delegate",))
    helper = AgentSpec(name="helper", role="h", model="offline")

    async def main():
        seen, wrap = tapped()
        troupe = await build_troupe({"boss": script}, wrap=wrap)
        await troupe.run("- be there.", TeamSpec(name="other", planner_model="offline",
                                                  agents=(outsider,)))  # fmt: skip
        before = len(seen["outsider"].seen)
        refused = await troupe.run("Ask.", one_step(boss, helper))
        refusal = tool_texts(troupe, "boss")
        reached = len(seen["outsider"].seen) - before
        allowed = await troupe.run("Ask.", one_step(boss, helper, delegates=("outsider",)))
        return refused, refusal, reached, allowed, tool_texts(troupe, "boss")

    refused, refusal, reached, allowed, answer = run(main())
    assert refused.status == "succeeded"
    assert refusal == ["ERROR: boss may not delegate to 'outsider'; it may ask: helper"]
    assert reached == 0
    assert allowed.status == "succeeded"
    assert '"agent": "outsider"' in answer[0]


def test_delegated_work_runs_in_the_callers_tenant_job_trace_deadline_and_budget():
    script = ScriptedModel(turns=(
        ScriptedTurn(tool_calls=(delegate("helper", "Sum it up."),)),
        ScriptedTurn(text="done"),
    ))  # fmt: skip
    budget = Budget(tokens=50_000)

    async def main():
        seen, wrap = tapped()
        troupe = await build_troupe({"boss": script}, wrap=wrap)
        team = one_step(
            AgentSpec(name="boss", role="m", model="boss", tools=("delegate",)),
            AgentSpec(name="helper", role="h", model="offline"),
            subtask_timeout_s=60,
        )
        job_id = await troupe.desk.submit(*order("Ask.", team, tenant="acme", budget=budget))
        result = await troupe.orchestrator.wait(job_id, 10)
        spent = {t: troupe.pool._ledger.spent(f"tenant:{t}") for t in ("acme", "default")}
        return result, seen, spent, troupe

    result, seen, spent, troupe = run(main())
    assert result.status == "succeeded", result.error
    (asked,) = [m for m in seen["boss"].seen if isinstance(m.payload, TaskRequest)]
    (sent,) = [m for m in seen["helper"].seen if isinstance(m.payload, TaskRequest)]
    assert (sent.tenant, sent.job_id) == ("acme", asked.job_id)
    assert sent.trace.trace_id == asked.trace.trace_id
    assert sent.deadline is not None
    assert sent.deadline <= asked.deadline
    assert sent.hops == asked.hops + 2  # the tool call's routing, then its own
    assert sent.payload.budget == budget
    assert sent.payload.inputs == {"from": "boss"}
    calls = [m for m in troupe.llm.seen if isinstance(m.payload, LLMRequest)]
    helper_calls = [m for m in calls if written(m.sender) == "helper"]
    assert helper_calls
    assert {m.tenant for m in helper_calls} == {"acme"}
    assert all(m.payload.budget == budget for m in helper_calls)
    assert spent["default"].tokens == 0  # all of it, the helper's included, is acme's
    assert spent["acme"].tokens == sum(r.prompt_tokens + r.completion_tokens
                                       for r in troupe.pool._usage.rows.values())  # fmt: skip


def test_a_handoff_goes_to_a_peer_in_the_callers_context():
    script = ScriptedModel(turns=(ScriptedTurn(tool_calls=(handoff("closer"),)),))

    async def main():
        seen, wrap = tapped()
        troupe = await build_troupe({"opener": script}, wrap=wrap)
        team = one_step(
            AgentSpec(name="opener", role="o", model="opener", tools=("handoff",)),
            AgentSpec(name="closer", role="c", model="offline"),
        )
        job_id = await troupe.desk.submit(*order("Close it.", team, tenant="acme"))
        return await troupe.orchestrator.wait(job_id, 10), seen

    result, seen = run(main())
    assert result.status == "succeeded", result.error
    assert result.subtasks[0].stop_reason == "handoff"
    (sent,) = [m for m in seen["closer"].seen if isinstance(m.payload, TaskRequest)]
    assert sent.tenant == "acme"
    assert "Context handed over by opener" in sent.payload.instructions


@pytest.mark.parametrize("outside", [False, True], ids=["teammate", "allow-listed"])
def test_cancelling_the_job_stops_the_delegated_work(outside):
    script = ScriptedModel(turns=(ScriptedTurn(tool_calls=(delegate("slow"),)),))

    async def main():
        seen, wrap = tapped()
        troupe = await build_troupe(
            {"boss": script, "slow-model": OfflineModel(latency_s=60)}, wrap=wrap
        )
        boss = AgentSpec(name="boss", role="m", model="boss", tools=("delegate",))
        slow = AgentSpec(name="slow", role="s", model="slow-model")
        if outside:  # the slow agent belongs to another (inline) team; the boss's lists it
            theirs = slow.model_copy(update={"name": agent_name("slow")})
            await troupe.provisioner.provision(TeamSpec(name="elsewhere", agents=(theirs,)))
            team = one_step(boss, delegates=("slow",))
        else:
            team = one_step(boss, slow)
        job_id = await troupe.desk.submit(*order("Ask.", team))
        agents = troupe.provisioner.agents
        name = agent_name("slow")
        while name not in agents or not agents[name]._by_job.get(job_id):  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # bounded by the test's guard
        agent = agents[name]
        cancelled = await troupe.orchestrator.cancel(job_id)
        result = await troupe.orchestrator.wait(job_id, 5)
        requests = [m for m in seen["slow"].seen if isinstance(m.payload, TaskRequest)]
        return cancelled, result, agent._by_job, requests, troupe

    cancelled, result, running, requests, troupe = run(main())
    assert cancelled is True
    assert result.status == "cancelled"
    assert [m.job_id for m in requests] == [result.job_id]
    assert running == {}  # nothing of the job runs at the slow agent any more
    assert [key for key in troupe.pool._usage.rows if key[1] == "slow"] == []  # no answer came


def test_an_old_grant_without_peers_delegates_to_nobody(tmp_path):
    async def main():
        router = LocalRouterClient(MessageRouter())
        box = await in_process_sandbox(router, root=tmp_path)
        await box.grant("boss", ["delegate"], ["helper"])
        await box.close()
        db = Grants(tmp_path / "state" / "grants.sqlite")
        db._db.execute("DELETE FROM peers")  # as a file from before peers were kept
        db.close()
        again = await in_process_sandbox(router, root=tmp_path)
        return again._grants.get("boss"), again._grants.peers("boss")

    tools, peers = run(main())
    assert (tools, peers) == (frozenset({"delegate"}), frozenset())
