"""LLM pool replicas on a real Ray: the session's pool has two (``llm-0``, ``llm-1``).

Every integration test runs on them (tests/conftest.py sets ``LLMConfig(replicas=2)``); these
check what replicas add: calls spread over both, one configuration, one ledger, cooldowns and
cancels reaching the other replica.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.actors.router_handles import RayRouterClient
from raytroupe.protocols import LLM_POOL, AgentMessage, LLMRequest, LLMResponse, Overloaded
from tests.support.wire_model import HttpError, Reply
from tests.support.wire_server import WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

REPLICAS = ("llm/0", "llm/1")


def _pools() -> list[object]:
    return [ray.get_actor(name, namespace=NAMESPACE) for name in REPLICAS]


def test_model_calls_spread_over_both_replicas(rt):
    before = [len(ray.get(p.usage_here.remote())) for p in _pools()]
    tag = uuid.uuid4().hex[:8]
    client = RayRouterClient(rt.actor("router/0"))

    async def burst() -> list[AgentMessage]:
        def ask(i: int) -> AgentMessage:
            say = {"role": "user", "content": f"Say {tag} {i}."}
            request = LLMRequest(model="offline", purpose="chat", messages=[say])
            return AgentMessage(sender="driver", recipient=LLM_POOL, payload=request)

        asks = [ask(i) for i in range(16)]
        return await asyncio.gather(*(client.request(a) for a in asks))

    replies = asyncio.run(burst())
    assert all(isinstance(r.payload, LLMResponse) for r in replies)
    calls = [
        sum(row.calls for row in ray.get(p.usage_here.remote()) if row.job_id is None)
        for p in _pools()
    ]
    assert all(c > 0 for c in calls), (before, calls)  # the least busy replica took each
    assert "llm-1" in rt.router_stats().registered


def test_one_configuration_one_ledger_and_a_cooldown_for_both(rt):
    alias = f"wire-{uuid.uuid4().hex[:8]}"
    first, second = _pools()
    with WireServer() as wire:
        spec = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="w")
        ray.get(first.configure.remote({alias: spec}, operator=True))
        try:
            assert alias in ray.get(second.models.remote())  # passed on by llm-0

            # a 429 asking for 2 minutes, seen by llm-0: llm-1 does not call the server either
            wire.script(HttpError(429, retry_after=120), Reply(text="never"))
            request = LLMRequest(model=alias, messages=[{"role": "user", "content": "hi"}])
            with pytest.raises(ray.exceptions.RayTaskError) as seen:
                ray.get(first.complete.remote(request))
            assert isinstance(seen.value.cause, Overloaded), seen.value
            deadline = time.monotonic() + 10  # the peer is told without waiting
            while True:
                with pytest.raises(ray.exceptions.RayTaskError) as rested:
                    ray.get(second.complete.remote(request))
                if wire.request_count == 1 and isinstance(rested.value.cause, Overloaded):
                    break
                assert time.monotonic() < deadline, (wire.request_count, rested.value)
                time.sleep(0.1)  # bounded by the deadline
            assert "cools down" in str(rested.value.cause)
        finally:
            ray.get(first.remove.remote(alias))
    assert alias not in ray.get(second.models.remote())

    # one ledger: what a job spent is the same whichever replica is asked
    job = rt.submit("- one thing.\n- another thing.\n- a third thing.", team=runtime.Team(
        name="replicated", planner_model="offline",
        agents=[runtime.AgentSpec(name=f"rep-{i}", role="worker") for i in range(3)],
    ))  # fmt: skip
    job.result(timeout=60)
    spent = [ray.get(p.spent.remote(f"job:{job.job_id}")) for p in (first, second)]
    assert spent[0] == spent[1]
    rows = rt.usage(job.job_id)
    assert spent[0].tokens == sum(r.prompt_tokens + r.completion_tokens for r in rows)
