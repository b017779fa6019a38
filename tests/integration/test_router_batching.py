"""The router client batches concurrent requests on a real Ray, each keeping its own reply."""

from __future__ import annotations

import asyncio

import ray

from actors._ray_client import RayRouterClient
from protocols import AgentMessage, ChatMessage, LLMRequest, LLMResponse


@ray.remote(num_cpus=0)
class Burst:
    """Sends ``n`` model requests at once through the router, as an agent would."""

    def __init__(self, router):
        self._client = RayRouterClient(router, max_batch=256)

    async def fire(self, n):
        async def one(i):
            request = LLMRequest(
                model="default", messages=(ChatMessage(role="user", content=f"Say {i}."),)
            )
            reply = await self._client.request(
                AgentMessage(sender="burst", recipient="llm", payload=request)
            )
            return reply.payload

        return await asyncio.gather(*(one(i) for i in range(n)))


def test_concurrent_requests_travel_in_few_batches_with_a_reply_each(rt):
    router = rt.actor("router")
    before = ray.get(router.stats.remote())
    answers = ray.get(Burst.remote(router).fire.remote(64), timeout=120)
    after = ray.get(router.stats.remote())

    assert all(isinstance(a, LLMResponse) for a in answers)
    assert [a.text for a in answers] == [
        f"My inputs hold no answer to: Say {i}." for i in range(64)
    ]
    assert after.routed - before.routed >= 64
    assert 1 <= after.batches - before.batches <= 8  # not 64 calls
    assert after.dead_lettered == before.dead_lettered
