"""Router shards on a real Ray: the session's router has two (``router/0``, ``router/1``).

Every integration test runs on them (tests/conftest.py sets ``scale.router_shards=2``);
these check what sharding adds: one registry on every shard, each sender's envelopes routed
by one shard, senders (and so role traffic) spread over both, de-duplication across clients,
and a shard that dies losing no job.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.router_handles import RouterShards
from raytroupe.protocols import (
    LLM_POOL,
    AgentMessage,
    ErrorCode,
    ErrorPayload,
    Event,
    LLMRequest,
    LLMResponse,
    router_shard,
)
from tests.support.inline import agent_name
from tests.support.restarts import kill_and_wait_for_restart, wait_started

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system


def _shards(rt: Any) -> RouterShards:
    shards: RouterShards = rt.client.handles.routers
    return shards


def _stats(rt: Any) -> list[Any]:
    return [ray.get(h.stats.remote()) for h in _shards(rt).handles]


def _ask(tag: str, i: int) -> AgentMessage:
    say = {"role": "user", "content": f"Say {tag} {i}."}
    request = LLMRequest(model="offline", purpose="chat", messages=[say])
    return AgentMessage(sender="driver", recipient=LLM_POOL, payload=request)


def test_every_shard_holds_the_whole_registry(rt):
    team = runtime.Team(
        name="shardreg",
        agents=[runtime.AgentSpec(name=f"shardreg-{i}", role="worker") for i in range(3)],
    )
    assert rt.submit("- one\n- two\n- three", team=team).result(timeout=60).status == "succeeded"

    registries = [set(s.registered) for s in _stats(rt)]
    assert len(registries) == 2
    expected = {"orchestrator", "memory", "llm-0", "llm-1", "tools-0"}
    expected |= {agent_name(f"shardreg-{i}") for i in range(3)}  # the driver's, scoped
    for registry in registries:
        assert expected <= registry
    assert registries[0] == registries[1]


def test_a_sender_has_one_shard_and_senders_spread_over_both(rt):
    tag = uuid.uuid4().hex[:8]
    client = _shards(rt).client()
    senders = [f"sender-{tag}-{i}" for i in range(8)]
    strays = [  # each sender writes to two unknown names and asks the pool once
        AgentMessage(sender=who, recipient=f"stray-{tag}-{i}-{n}", payload=Event(name="ping"))
        for i, who in enumerate(senders)
        for n in range(2)
    ]
    asks = [_ask(tag, i).model_copy(update={"sender": who}) for i, who in enumerate(senders)]
    before = [s.routed for s in _stats(rt)]

    async def send_all() -> list[AgentMessage]:
        return await asyncio.gather(*(client.request(m) for m in [*strays, *asks]))

    replies = asyncio.run(send_all())
    after = [s.routed for s in _stats(rt)]

    # a sender's envelopes, whatever their recipient, went through its shard: their dead
    # letters are there, not on the other
    for reply in replies[: len(strays)]:
        assert isinstance(reply.payload, ErrorPayload)
        assert reply.payload.code is ErrorCode.UNKNOWN_RECIPIENT
    letters = [ray.get(h.dead_letters.remote(10_000)) for h in _shards(rt).handles]
    for stray in strays:
        home = router_shard(stray.sender, 2)
        assert any(d.message_id == stray.id for d in letters[home])
        assert not any(d.message_id == stray.id for d in letters[1 - home])
    assert {router_shard(who, 2) for who in senders} == {0, 1}
    # role traffic of many senders: every model call answered, each shard took some of them
    assert all(isinstance(r.payload, LLMResponse) for r in replies[len(strays) :])
    assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)
    assert sum(after) - sum(before) >= len(strays) + len(asks)
    # and the driver sees one router: the shards' dead letters together, oldest first
    merged = {d.message_id for d in rt.dead_letters(limit=10_000)}
    assert {s.id for s in strays} <= merged


def test_an_envelope_sent_again_by_another_client_meets_its_first_shard(rt):
    asked = _ask(uuid.uuid4().hex[:8], 0)
    first_client, second_client = _shards(rt).client(), _shards(rt).client()
    before = rt.router_stats().duplicates

    async def twice() -> list[AgentMessage]:
        return await asyncio.gather(first_client.request(asked), second_client.request(asked))

    first, second = asyncio.run(twice())
    assert first == second
    assert isinstance(first.payload, LLMResponse)
    assert rt.router_stats().duplicates == before + 1


def test_a_shard_that_dies_mid_job_loses_no_subtask_and_finds_the_registry_again(rt):
    team = runtime.Team(
        name="shardloss",
        max_parallel=6,
        models={"shardloss-slow": runtime.OfflineModel(latency_s=0.5)},
        agents=[
            runtime.AgentSpec(
                name=f"shardloss-{i}",
                role="worker",
                model="shardloss-slow",
                memory=runtime.MemoryPolicy(recall=False),
            )
            for i in range(3)
        ],
    )
    task = "Tasks:\n" + "\n".join(f"- Say word {n}." for n in range(6))
    job = rt.submit(task, team=team)
    wait_started(job)
    shard = _shards(rt).handles[1]
    kill_and_wait_for_restart(shard)

    result = job.result(timeout=180)
    assert result.status == "succeeded", result.error
    assert len(result.subtasks) == 6
    registry = ray.get(shard.stats.remote()).registered  # the new shard found every actor
    assert {agent_name(f"shardloss-{i}") for i in range(3)} <= set(registry)
    assert {"orchestrator", "memory", "llm-0", "llm-1"} <= set(registry)
    after = rt.submit("- after the loss.\n- still here.", team=team).result(timeout=60)
    assert after.status == "succeeded", after.error
