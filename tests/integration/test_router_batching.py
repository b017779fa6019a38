"""The router client batches concurrent requests on a real Ray, each keeping its own reply."""

from __future__ import annotations

import asyncio

import ray

from raytroupe.actors.endpoint import TakesBatches, serve_envelope
from raytroupe.actors.router_handles import RayRouterClient
from raytroupe.protocols import LLM_POOL, AgentMessage, ChatMessage, Event, LLMRequest, LLMResponse


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
                AgentMessage(sender="burst", recipient=LLM_POOL, payload=request)
            )
            return reply.payload

        return await asyncio.gather(*(one(i) for i in range(n)))


def test_concurrent_requests_travel_in_few_batches_with_a_reply_each(rt):
    router = rt.actor("router/0")
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


@ray.remote(num_cpus=0)
class Probe(TakesBatches):
    """A recipient that holds envelopes of job ``slow`` until :meth:`open` is called."""

    def __init__(self):
        self._gate = asyncio.Event()

    async def open(self):
        self._gate.set()

    async def receive(self, data, /):
        return await serve_envelope(data, self._answer, me="hol-probe", accepts=(Event,))

    async def _answer(self, message, _payload):
        if message.job_id == "slow":
            await self._gate.wait()
        return message.reply(Event(name="pong"), sender="hol-probe")


@ray.remote(num_cpus=0)
class Mixed:
    """Sends one slow and several quick requests in the same event-loop turn."""

    def __init__(self, router):
        self._client = RayRouterClient(router)  # batching as actors have it by default
        self._tasks = []

    async def fire(self, quick):
        def one(job):
            message = AgentMessage(
                sender="mixed", recipient="hol-probe", job_id=job, payload=Event(name="ping")
            )
            return asyncio.ensure_future(self._client.request(message))

        self._tasks = [one("slow"), *(one(f"quick-{i}") for i in range(quick))]
        await asyncio.gather(*self._tasks[1:])  # every quick reply, while the slow one is held
        return self._tasks[0].done()

    async def slow(self):
        return (await self._tasks[0]).payload.name


def test_a_quick_reply_is_not_held_back_by_a_slow_one_of_its_batch(rt):
    router = rt.actor("router/0")
    probe = Probe.remote()
    ray.get(router.register.remote("hol-probe", probe, []))
    try:
        before = ray.get(router.stats.remote())
        mixed = Mixed.remote(router)
        slow_done_already = ray.get(mixed.fire.remote(8), timeout=60)
        after = ray.get(router.stats.remote())
        assert slow_done_already is False  # the quick replies came back on their own
        assert after.batches - before.batches == 1  # all nine went in one call
        assert after.in_flight == {"hol-probe": 1}
        ray.get(probe.open.remote())
        assert ray.get(mixed.slow.remote(), timeout=60) == "pong"
        assert ray.get(router.stats.remote()).in_flight == {}
    finally:
        ray.get(router.unregister.remote("hol-probe"))
        ray.kill(probe)
