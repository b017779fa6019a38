"""The memory actor on a real Ray with the real offline MiniLM model and Chroma on disk."""

from __future__ import annotations

import uuid

import ray

from raytroupe import runtime
from raytroupe.protocols import AgentMessage, MemoryHits, MemoryQuery, MemoryWrite, decode, encode
from tests.support.restarts import after_restart, kill_and_wait_for_restart
from tests.support.wire_server import Default, WireServer


def _tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:8]}"


def test_memories_survive_a_kill_of_the_memory_actor(rt):
    tenant = _tenant()
    facts = [
        "The deployment freeze starts on the first of December.",
        "Grace prefers reports as bullet points, never as tables.",
        "The staging database lives on host db-staging-2.",
    ]
    ids = [rt.remember(fact, tenant=tenant) for fact in facts]
    assert len(set(ids)) == 3

    memory = rt.actor("memory")
    kill_and_wait_for_restart(memory)
    count = after_restart(lambda: memory.count.remote(tenant))
    assert count == 3
    (best, *_) = rt.recall("When can we no longer deploy?", tenant=tenant)
    assert best.text == facts[0]
    assert best.id == ids[0]


def test_one_tenant_never_sees_another_tenants_memories(rt):
    alice, bob = _tenant(), _tenant()
    rt.remember("Alice's launch code is kept in the red binder.", tenant=alice)
    rt.remember("Bob's favourite colour is green.", tenant=bob)

    assert [h.text for h in rt.recall("Where is the launch code kept?", tenant=alice)][:1] == [
        "Alice's launch code is kept in the red binder."
    ]
    leaked = rt.recall("Where is the launch code kept?", tenant=bob)
    assert all("launch code" not in h.text for h in leaked)
    removed = ray.get(rt.actor("memory").delete.remote(bob, agent=""))
    assert removed == 1  # bob's one memory (written without an agent); alice's untouched
    assert ray.get(rt.actor("memory").count.remote(alice)) == 1


def test_an_agent_recalls_what_an_earlier_job_wrote(rt):
    with WireServer() as server:
        model = runtime.OpenAICompatibleModel(base_url=server.base_url_openai, model="wire-mem")
        writer = runtime.AgentSpec(
            name="scribe",
            role="writer",
            model="offline",
            memory=runtime.MemoryPolicy(write_results=True, importance=0.9),
        )
        reader = runtime.AgentSpec(name="reader", role="reader", model="wire-mem")
        first = runtime.Team(name="scribes", planner_model="offline", agents=[writer])
        context = "The quarterly offsite will be held in Lisbon in March."
        rt.submit(f"{context}\n- Where will the quarterly offsite be held?", team=first).result(
            timeout=60
        )

        server.script(Default())
        second = runtime.Team(
            name="readers", planner_model="offline", models={"wire-mem": model}, agents=[reader]
        )
        rt.submit("Which city hosts the team offsite?", team=second).result(timeout=60)

        system = [m for m in server.requests[0].body["messages"] if m["role"] == "system"]
        recalled = [m["content"] for m in system if m["content"].startswith("Relevant memories")]
        assert recalled, system
        assert "Lisbon" in recalled[0]


def test_memory_envelopes_through_the_router(rt):
    tenant = _tenant()
    router = rt.actor("router/0")
    wrote = decode(ray.get(router.request.remote(encode(AgentMessage(
        sender="driver", recipient="memory", tenant=tenant,
        payload=MemoryWrite(text="Envelopes reach the memory actor through the router."),
    )))))  # fmt: skip
    assert isinstance(wrote.payload, MemoryHits)
    found = decode(ray.get(router.request.remote(encode(AgentMessage(
        sender="driver", recipient="memory", tenant=tenant,
        payload=MemoryQuery(query="How do envelopes reach memory?"),
    )))))  # fmt: skip
    assert found.payload.hits[0].text.startswith("Envelopes reach the memory actor")
