import asyncio
import time

import pytest
from wiring import Echo, Gated, Raising, ask, ping, run

from raytroupe.actors import MessageRouter
from raytroupe.actors.router import RouterStats
from raytroupe.protocols import (
    ErrorCode,
    ErrorPayload,
    Event,
    InvalidInput,
    MalformedEnvelope,
    RecipientUnavailable,
    encode,
)


def test_register_unregister_and_registry():
    async def main():
        router = MessageRouter()
        await router.register("a", Echo("a"), ["x", "y"])
        await router.register("b", Echo("b"))
        assert await router.registry() == {"a": ["x", "y"], "b": []}
        await router.register("a", Echo("a2"), ["z"])  # replaces the old entry and its roles
        assert await router.registry() == {"a": ["z"], "b": []}
        gone = await ask(router, ping("role:x"))
        assert gone.payload.code is ErrorCode.UNKNOWN_RECIPIENT
        assert await router.unregister("a") is True
        assert await router.unregister("a") is False
        assert await router.registry() == {"b": []}
        reply = await ask(router, ping("a"))
        assert reply.payload.code is ErrorCode.UNKNOWN_RECIPIENT

    run(main())


@pytest.mark.parametrize("name", ["role:x", "topic:x", "bad name"])
def test_register_takes_only_plain_names(name):
    async def main():
        with pytest.raises((InvalidInput, ValueError)):
            await MessageRouter().register(name, Echo("x"))

    run(main())


def test_direct_delivery_gets_the_recipients_reply():
    async def main():
        router = MessageRouter()
        echo = Echo("a")
        await router.register("a", echo)
        request = ping("a", hops=2, job_id="job-1")
        reply = await ask(router, request)
        assert isinstance(reply.payload, Event)
        assert reply.payload.data == {"by": "a", "hops": 3}  # routed once more
        assert reply.correlation_id == request.id
        assert reply.recipient == "driver"
        assert reply.job_id == "job-1"
        assert [m.id for m in echo.seen] == [request.id]

    run(main())


def test_by_role_delivery_balances_concurrent_work_over_holders():
    async def main():
        router = MessageRouter()
        gate, all_in = asyncio.Event(), asyncio.Event()
        arrivals = []

        def arrived():
            arrivals.append(1)
            if len(arrivals) == 6:
                all_in.set()

        a, b = Gated("a", gate, arrived), Gated("b", gate, arrived)
        await router.register("a", a, ["worker"])
        await router.register("b", b, ["worker"])
        await router.register("c", Echo("c"), ["other"])
        pending = [asyncio.create_task(ask(router, ping("role:worker"))) for _ in range(6)]
        await all_in.wait()
        stats = await router.stats()
        assert stats.in_flight == {"a": 3, "b": 3}
        gate.set()
        replies = await asyncio.gather(*pending)
        assert sorted(r.payload.data["by"] for r in replies) == ["a"] * 3 + ["b"] * 3
        assert (await router.stats()).in_flight == {}

    run(main())


def test_unknown_recipient_is_an_error_reply_and_a_dead_letter():
    async def main():
        router = MessageRouter()
        request = ping("nobody")
        reply = await ask(router, request)
        assert isinstance(reply.payload, ErrorPayload)
        assert reply.payload.code is ErrorCode.UNKNOWN_RECIPIENT
        assert reply.payload.retryable is False
        assert reply.correlation_id == request.id
        assert reply.sender == "router"
        [letter] = await router.dead_letters()
        assert letter.reason is ErrorCode.UNKNOWN_RECIPIENT
        assert letter.message_id == request.id
        assert letter.message == request
        assert "nobody" in letter.detail

    run(main())


def test_unknown_role_is_an_error_reply():
    async def main():
        router = MessageRouter()
        reply = await ask(router, ping("role:ghost"))
        assert reply.payload.code is ErrorCode.UNKNOWN_RECIPIENT
        assert "ghost" in reply.payload.message

    run(main())


def test_expired_deadline_is_dead_lettered_without_delivery():
    async def main():
        router = MessageRouter()
        echo = Echo("a")
        await router.register("a", echo)
        reply = await ask(router, ping("a", deadline=time.time() - 1))
        assert reply.payload.code is ErrorCode.DEADLINE_EXCEEDED
        assert reply.payload.retryable is True
        assert echo.seen == []
        [letter] = await router.dead_letters()
        assert letter.reason is ErrorCode.DEADLINE_EXCEEDED

    run(main())


def test_deadline_passing_while_waiting_for_the_reply():
    async def main():
        router = MessageRouter()
        never = asyncio.Event()
        slow = Gated("slow", never)
        await router.register("slow", slow)
        reply = await ask(router, ping("slow", deadline=time.time() + 0.2))
        assert slow.arrived.is_set()
        assert reply.payload.code is ErrorCode.DEADLINE_EXCEEDED
        [letter] = await router.dead_letters()
        assert letter.reason is ErrorCode.DEADLINE_EXCEEDED
        assert "waiting" in letter.detail
        assert (await router.stats()).in_flight == {}

    run(main())


def test_hop_limit_is_dead_lettered():
    async def main():
        router = MessageRouter(max_hops=3)
        echo = Echo("a")
        await router.register("a", echo)
        ok = await ask(router, ping("a", hops=2))
        assert ok.payload.data["hops"] == 3
        looped = ping("a", hops=3)
        reply = await ask(router, looped)
        assert reply.payload.code is ErrorCode.HOP_LIMIT
        assert len(echo.seen) == 1
        [letter] = await router.dead_letters()
        assert (letter.reason, letter.message_id) == (ErrorCode.HOP_LIMIT, looped.id)

    run(main())


def test_unavailable_recipient_is_a_retryable_error_and_a_dead_letter():
    async def main():
        router = MessageRouter()
        await router.register("dead", Raising(RecipientUnavailable("actor died")))
        request = ping("dead")
        reply = await ask(router, request)
        assert reply.payload.code is ErrorCode.RECIPIENT_UNAVAILABLE
        assert reply.payload.retryable is True
        [letter] = await router.dead_letters()
        assert (letter.reason, letter.message_id) == (ErrorCode.RECIPIENT_UNAVAILABLE, request.id)
        assert (await router.stats()).delivered == 0

    run(main())


def test_a_crashing_recipient_does_not_crash_the_router():
    async def main():
        router = MessageRouter()
        await router.register("boom", Raising(RuntimeError("kaput")))
        reply = await ask(router, ping("boom"))
        assert reply.payload.code is ErrorCode.DELIVERY
        assert reply.payload.retryable is False
        assert "kaput" in reply.payload.message
        assert (await router.dead_letters())[0].reason is ErrorCode.DELIVERY

    run(main())


def test_a_request_without_a_reply_gets_an_error_reply():
    async def main():
        router = MessageRouter()
        await router.register("mute", Echo("mute", reply=False))
        reply = await ask(router, ping("mute"))
        assert reply.payload.code is ErrorCode.DELIVERY
        assert "no reply" in reply.payload.message

    run(main())


@pytest.mark.parametrize("data", [b"\xc1 not msgpack", encode(ping("a"))[:-3]])
def test_malformed_bytes_raise_and_are_dead_lettered_with_the_raw_bytes(data):
    async def main():
        router = MessageRouter()
        with pytest.raises(MalformedEnvelope):
            await router.request(data)
        with pytest.raises(MalformedEnvelope):
            await router.send(data)
        letters = await router.dead_letters()
        assert [letter.reason for letter in letters] == [ErrorCode.MALFORMED_ENVELOPE] * 2
        assert all(letter.raw == data and letter.message is None for letter in letters)

    run(main())


def test_dead_letters_keep_the_newest_and_count_them_all():
    async def main():
        router = MessageRouter(dead_letter_limit=2)
        ids = [(await ask(router, ping(f"n{i}"))).correlation_id for i in range(3)]
        assert [d.message_id for d in await router.dead_letters()] == ids[1:]
        assert [d.message_id for d in await router.dead_letters(limit=1)] == ids[2:]
        assert await router.dead_letters(limit=0) == []
        assert (await router.stats()).dead_lettered == 3

    run(main())


def test_the_router_counters_of_its_shards_add_up():
    parts = [
        RouterStats(routed=3, delivered=2, dead_lettered=1, duplicates=0, batches=1,
                    registered={"a": ["r"]}, in_flight={"a": 1}),
        RouterStats(routed=5, delivered=5, dead_lettered=0, duplicates=2, batches=2,
                    registered={"a": ["r"]}, in_flight={"a": 2, "b": 1}),
    ]  # fmt: skip
    both = RouterStats.combined(parts)
    assert (both.routed, both.delivered, both.dead_lettered, both.duplicates) == (8, 7, 1, 2)
    assert both.batches == 3
    assert both.shards == 2
    assert both.registered == {"a": ["r"]}
    assert both.in_flight == {"a": 3, "b": 1}
