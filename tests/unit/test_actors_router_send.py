import asyncio

import pytest
from wiring import Echo, Gated, ask, ping, run

from raytroupe.actors import MessageRouter
from raytroupe.protocols import (
    ErrorCode,
    MalformedEnvelope,
    UnknownRecipient,
    decode,
    encode,
)


def test_same_id_requested_twice_runs_once_and_both_get_the_reply():
    async def main():
        router = MessageRouter()
        gate = asyncio.Event()
        slow = Gated("a", gate)
        await router.register("a", slow)
        data = encode(ping("a"))
        first = asyncio.create_task(router.request(data))
        await slow.arrived.wait()
        second = asyncio.create_task(router.request(data))
        gate.set()
        one, two = await asyncio.gather(first, second)
        assert one == two
        assert decode(one).payload.data == {"by": "a"}
        third = await router.request(data)  # after completion, still the first reply
        assert third == one
        assert len(slow.seen) == 1
        stats = await router.stats()
        assert (stats.delivered, stats.duplicates) == (1, 2)

    run(main())


def test_send_returns_accepted_duplicate_or_dead_lettered():
    async def main():
        router = MessageRouter()
        echo = Echo("a")
        await router.register("a", echo)
        data = encode(ping("a"))
        assert await router.send(data) == "accepted"
        await echo.arrived.wait()
        assert await router.send(data) == "duplicate"
        assert await router.send(encode(ping("nobody"))) == "dead_lettered"
        assert len(echo.seen) == 1
        [letter] = await router.dead_letters()
        assert letter.reason is ErrorCode.UNKNOWN_RECIPIENT

    run(main())


def test_send_routes_the_reply_on_to_reply_to():
    async def main():
        router = MessageRouter()
        echo, collector = Echo("a"), Echo("collector", reply=False)
        await router.register("a", echo)
        await router.register("collector", collector)
        message = ping("a", reply_to="collector")
        assert await router.send(encode(message)) == "accepted"
        await collector.arrived.wait()
        [forwarded] = collector.seen
        assert forwarded.correlation_id == message.id
        assert forwarded.payload.data["by"] == "a"

    run(main())


def test_topic_send_reaches_every_subscriber():
    async def main():
        router = MessageRouter()
        a, b, c = Echo("a"), Echo("b"), Echo("c")
        for name, box in (("a", a), ("b", b), ("c", c)):
            await router.register(name, box)
        await router.subscribe("a", "news")
        await router.subscribe("b", "news")
        message = ping("topic:news")
        assert await router.send(encode(message)) == "accepted"
        await a.arrived.wait()
        await b.arrived.wait()
        assert [m.id for m in a.seen] == [m.id for m in b.seen] == [message.id]
        assert c.seen == []
        await router.unregister("a")
        await router.unregister("b")
        assert await router.send(encode(ping("topic:news"))) == "dead_lettered"
        with pytest.raises(UnknownRecipient):
            await router.subscribe("ghost", "news")

    run(main())


def test_request_to_a_topic_is_refused():
    async def main():
        router = MessageRouter()
        await router.register("a", Echo("a"))
        await router.subscribe("a", "news")
        reply = await ask(router, ping("topic:news"))
        assert reply.payload.code is ErrorCode.INVALID_INPUT

    run(main())


def test_stats_count_routing():
    async def main():
        router = MessageRouter()
        await router.register("a", Echo("a"), ["w"])
        data = encode(ping("a"))
        await router.request(data)
        await router.request(data)  # duplicate
        await router.request(encode(ping("role:w")))
        await router.request(encode(ping("nobody")))
        with pytest.raises(MalformedEnvelope):
            await router.request(b"junk")
        stats = await router.stats()
        assert stats.routed == 5
        assert stats.delivered == 2
        assert stats.duplicates == 1
        assert stats.dead_lettered == 2
        assert stats.registered == {"a": ["w"]}
        assert stats.in_flight == {}

    run(main())


def test_dedupe_window_forgets_old_ids():
    async def main():
        router = MessageRouter(dedupe_window=1)
        echo = Echo("a")
        await router.register("a", echo)
        first = encode(ping("a"))
        await router.request(first)
        await router.request(encode(ping("a")))  # pushes the first id out of the window
        await router.request(first)
        assert len(echo.seen) == 3
        assert (await router.stats()).duplicates == 0

    run(main())


def test_request_after_send_of_the_same_id_still_gets_a_reply_envelope():
    async def main():
        router = MessageRouter()
        echo = Echo("a")
        await router.register("a", echo)
        data = encode(ping("a"))
        assert await router.send(data) == "accepted"
        await echo.arrived.wait()
        reply = decode(await router.request(data))
        assert reply.correlation_id == decode(data).id
        assert reply.payload.code is ErrorCode.DELIVERY
        assert "one-way" in reply.payload.message
        assert len(echo.seen) == 1

    run(main())
