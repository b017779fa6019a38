"""A restarted router rebuilds its registry, then keeps looking for actors that answered late."""

import asyncio

from wiring import Echo, ping, run, started

import raytroupe.actors.router.registry as registry_module
from raytroupe.actors import MessageRouter
from raytroupe.protocols import decode, encode


def test_an_actor_found_after_the_rebuild_is_registered_late_but_not_an_unregistered_one(
    monkeypatch,
):
    monkeypatch.setattr(registry_module, "REDISCOVER_EVERY_S", 0.01)
    early, late, gone = Echo("early"), Echo("late"), Echo("gone")
    rounds = []

    async def discover():
        rounds.append(len(rounds))
        found = [("early", early, ["worker"]), ("gone", gone, [])]
        if len(rounds) > 2:  # "late" was restarting during the first rounds
            found.append(("late", late, ["worker"]))
        return found

    async def main():
        router = await started(MessageRouter(discover=discover))
        assert sorted(await router.registry()) == ["early", "gone"]
        await router.unregister("gone")  # retired on purpose: must stay away
        for _ in range(500):
            if "late" in await router.registry():
                break
            await asyncio.sleep(0.01)
        registry = await router.registry()
        reply = decode(await router.request(encode(ping("late"))))
        return registry, reply

    registry, reply = run(main())
    assert registry == {"early": ["worker"], "late": ["worker"]}
    assert reply.payload.data["by"] == "late"
    assert len(rounds) >= 3


def test_a_router_that_starts_fresh_rebuilds_once_and_stops_looking(monkeypatch):
    monkeypatch.setattr(registry_module, "REDISCOVER_EVERY_S", 0.01)
    early = Echo("early")
    rounds = []

    async def discover():
        rounds.append(len(rounds))
        return [("early", early, ["worker"])]

    async def main():
        router = await started(MessageRouter(discover=discover, restarted=lambda: False))
        registry = await router.registry()
        await asyncio.sleep(0.2)  # twenty catch-up rounds, had it been a restart
        return registry

    assert run(main()) == {"early": ["worker"]}
    assert rounds == [0]
