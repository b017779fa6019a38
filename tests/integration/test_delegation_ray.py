"""Delegation on a real Ray, between tenants: work sent on stays the caller's.

The tenants ``deleg-a`` and ``deleg-b`` run inline teams whose manager has the ``delegate``
tool. Their model is the operator's: a loopback server speaking the OpenAI wire protocol, which
records each request.
"""

from __future__ import annotations

import time
import uuid

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import PlannedSubtask, TenantPolicy, scoped_name
from tests.support.wire_server import Default, Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

WIRE = "deleg-wire"


@pytest.fixture(scope="module")
def wire(rt):
    with WireServer() as server:
        models = {
            WIRE: runtime.OpenAICompatibleModel(base_url=server.base_url_openai, model="w"),
        }
        ray.get(rt.actor("llm/0").configure.remote(models, operator=True))
        policy = TenantPolicy(inline_teams=True, models=(WIRE, "offline"),
                              tools=("delegate", "slow"))  # fmt: skip
        for tenant in ("deleg-a", "deleg-b"):
            rt.put_policy(tenant, policy)
        yield server
        for tenant in ("deleg-a", "deleg-b"):
            rt.delete_policy(tenant)


def _agent(name, model=WIRE, **fields):
    return runtime.AgentSpec(name=name, role=fields.pop("role", name), model=model, **fields)


def _team(*agents, **fields):
    return runtime.Team(
        name=fields.pop("name", f"deleg-{uuid.uuid4().hex[:6]}"),
        planner_model="offline",
        agents=list(agents),
        plan=[PlannedSubtask(id="s1", role=agents[0].role, instructions="{task}")],
        **fields,
    )


def _boss():
    return _agent("boss", tools=["delegate"], memory=runtime.MemoryPolicy(recall=False))


def _spent(rt, account):
    return ray.get(rt.actor("llm/0").spent.remote(account)).tokens


def _tool_texts(request):
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def _poll(condition, within_s=60.0):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {within_s} s")


def test_delegated_work_recalls_writes_and_spends_as_the_callers_tenant(rt, wire):
    rt.remember("The code word is HERON.", tenant="deleg-a")
    rt.remember("The code word is SPARROW.", tenant="default")
    wire.reset()
    wire.script(
        Reply.tool("delegate", {"agent": "helper", "instructions": "What is the code word?"}),
        Reply(text="The code word is HERON, say the notes."),
        Reply(text="The helper found it."),
    )
    before = {t: _spent(rt, f"tenant:{t}") for t in ("deleg-a", "default")}
    team = _team(_boss(), _agent("helper", memory=runtime.MemoryPolicy(write_results=True)))

    result = rt.as_tenant("deleg-a").submit("Find the code word.", team).result(timeout=120)

    assert result.status == "succeeded", result.error
    boss_first, helper, boss_last = wire.requests
    assert helper.body["messages"][-1]["content"].startswith("What is the code word?")
    memories = [m["content"] for m in helper.body["messages"] if m["role"] == "system"]
    assert any("HERON" in m for m in memories)  # the caller's tenant's memory was recalled
    assert not any("SPARROW" in m for m in memories)  # never the default tenant's
    assert "HERON" in _tool_texts(boss_last)[0]
    # the helper's model calls are the job's and the tenant's spend, none the default's
    helper_rows = [
        r
        for r in rt.usage(result.job_id)
        if r.agent == "helper"  # as deleg-a wrote it
    ]
    assert helper_rows
    assert helper_rows[0].prompt_tokens > 0
    assert _spent(rt, "tenant:deleg-a") - before["deleg-a"] == _spent(rt, f"job:{result.job_id}")
    assert _spent(rt, "tenant:default") == before["default"]
    # and what the helper learned was written to the caller's tenant's memory
    written = [h.text for h in rt.recall("What is the code word?", tenant="deleg-a")]
    assert any("-> The code word is HERON, say the notes." in t for t in written)
    assert not any("say the notes" in h.text for h in rt.recall("code word", tenant="default"))
    assert boss_first.body["model"] == "w"


def test_a_manager_cannot_reach_another_tenants_agent(rt, wire):
    wire.reset()
    wire.script(Default())
    theirs = rt.as_tenant("deleg-b").submit("- be there.", _team(_agent("vault")))
    assert theirs.result(timeout=120).status == "succeeded"
    target = scoped_name("deleg-b", "vault")
    assert target in rt.router_stats().registered  # their agent is there to be asked
    wire.reset()
    wire.script(
        Reply.tool("delegate", {"agent": target, "instructions": "Tell me your secrets."}),
        Reply(text="Refused, as it should be."),
    )

    result = rt.as_tenant("deleg-a").submit("Ask them.", _team(_boss(), _agent("helper")))

    assert result.result(timeout=120).status == "succeeded"
    assert wire.request_count == 2  # the boss twice; their agent never worked for us
    (refusal,) = _tool_texts(wire.requests[1])
    assert refusal == f"ERROR: boss may not delegate to {target!r}; it may ask: helper"
    assert not [r for r in rt.usage(result.job_id) if r.agent == target]


@pytest.mark.parametrize("outside", [False, True], ids=["teammate", "allow-listed"])
def test_cancelling_the_job_stops_the_delegated_work_at_the_other_agent(rt, wire, outside):
    # the agent asked is busy in a slow MCP tool (no model call the pool could drop): only
    # the job's cancel, reaching that agent, stops its work
    tenant = rt.as_tenant("deleg-a")
    slow = _agent(f"slow-{int(outside)}", tools=["slow"], memory=runtime.MemoryPolicy(recall=False))
    name = scoped_name("deleg-a", slow.name)
    if outside:  # the slow agent is the tenant's, in another team; the boss's team lists it
        wire.reset()
        wire.script(Reply(text="here."))
        assert tenant.submit("- be there.", _team(slow)).result(timeout=120).status == "succeeded"
        team = _team(_boss(), delegates=[slow.name])
    else:
        team = _team(_boss(), slow)
    wire.reset()
    wire.script(
        Reply.tool("delegate", {"agent": slow.name, "instructions": "Take your time."}),
        Reply.tool("slow", {"seconds": 30}),
    )
    job = tenant.submit("Delegate it.", team)

    def in_its_tool():
        in_flight = rt.router_stats().in_flight
        at_the_pool = any(n.startswith("llm-") for n in in_flight)  # either replica
        return wire.request_count == 2 and not at_the_pool and in_flight.get(name) == 1

    _poll(in_its_tool)  # the agent asked has its answer from the model, and runs the tool
    assert job.cancel() is True
    with pytest.raises(runtime.JobCancelled):
        job.result(timeout=60)
    _poll(lambda: not rt.router_stats().in_flight.get(name), within_s=15)  # the tool takes 30 s
    assert wire.request_count == 2  # and it never went on to its next turn
