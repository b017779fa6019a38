"""MessageRouter.request_many: a batch keeps every per-envelope guarantee of request,
and each reply comes back as soon as it exists (no head-of-line blocking)."""

import asyncio
import time

import pytest
from wiring import Echo, ping, run

from raytroupe.actors import MessageRouter
from raytroupe.actors.endpoint import TakesBatches, all_answers
from raytroupe.protocols import (
    ErrorCode,
    Event,
    MalformedEnvelope,
    RecipientUnavailable,
    decode,
    encode,
)


class BatchEcho(TakesBatches, Echo):
    """An Echo that takes batches, recording each batch it was handed."""

    def __init__(self, name, **kwargs):
        super().__init__(name, **kwargs)
        self.batches = []

    async def receive_many(self, data, /):
        self.batches.append([decode(d).id for d in data])
        return await super().receive_many(data)


class BrokenBatch(BatchEcho):
    async def receive_many(self, _data, /):
        raise RecipientUnavailable("actor died mid-batch")


class SlowForSome(BatchEcho):
    """Answers envelopes of job ``slow`` only once ``gate`` opens; the others at once."""

    def __init__(self, name, gate):
        super().__init__(name)
        self.gate = gate

    async def _handle(self, message, _payload):
        if message.job_id == "slow":
            await self.gate.wait()
        return await super()._handle(message, _payload)


class DiesAfterFirst(SlowForSome):
    """Gives the first answers, then dies before handing out the rest."""

    async def receive_more(self, _ticket, /):
        raise RecipientUnavailable("actor died mid-batch")


async def _all(router, batch):
    """Every answer of a ``request_many`` batch, in order."""
    return await all_answers(router.request_many(batch), router.request_more, len(batch))


async def _replies_of(router, batch):
    return [decode(a) for a in await _all(router, batch)]


def test_a_batch_for_one_recipient_is_one_call_in_order_with_a_reply_each():
    async def main():
        router = MessageRouter()
        echo = BatchEcho("a")
        await router.register("a", echo)
        sent = [ping("a", job_id=f"job-{n}") for n in range(20)]
        replies = await _replies_of(router, [encode(m) for m in sent])
        assert [r.correlation_id for r in replies] == [m.id for m in sent]
        assert all(r.payload.data["by"] == "a" for r in replies)
        assert echo.batches == [[m.id for m in sent]]  # one call, in the sender's order
        stats = await router.stats()
        assert (stats.routed, stats.delivered, stats.dead_lettered) == (20, 20, 0)
        assert stats.batches == 1
        assert stats.in_flight == {}

    run(main())


def test_a_batch_is_split_by_recipient_and_each_gets_its_own():
    async def main():
        router = MessageRouter()
        a, b = BatchEcho("a"), BatchEcho("b")
        await router.register("a", a)
        await router.register("b", b)
        sent = [ping("a"), ping("b"), ping("a"), ping("b")]
        replies = await _replies_of(router, [encode(m) for m in sent])
        assert [r.payload.data["by"] for r in replies] == ["a", "b", "a", "b"]
        assert a.batches == [[sent[0].id, sent[2].id]]
        assert b.batches == [[sent[1].id, sent[3].id]]

    run(main())


def test_undeliverable_and_unreadable_envelopes_fail_alone():
    async def main():
        router = MessageRouter()
        echo = BatchEcho("a")
        await router.register("a", echo)
        good, nobody = ping("a"), ping("nobody")
        expired = ping("a", deadline=time.time() - 1)
        answers = await _all(
            router, [encode(good), b"\x00not an envelope", encode(nobody), encode(expired)]
        )
        assert decode(answers[0]).payload.data["by"] == "a"
        assert isinstance(answers[1], MalformedEnvelope)
        assert decode(answers[2]).payload.code is ErrorCode.UNKNOWN_RECIPIENT
        assert decode(answers[3]).payload.code is ErrorCode.DEADLINE_EXCEEDED
        reasons = [letter.reason for letter in await router.dead_letters()]
        assert reasons == [
            ErrorCode.MALFORMED_ENVELOPE,
            ErrorCode.UNKNOWN_RECIPIENT,
            ErrorCode.DEADLINE_EXCEEDED,
        ]
        assert echo.batches == [[good.id]]

    run(main())


def test_duplicates_in_and_across_batches_are_delivered_once():
    async def main():
        router = MessageRouter()
        echo = BatchEcho("a")
        await router.register("a", echo)
        first = ping("a")
        replies = await _replies_of(router, [encode(first), encode(first)])
        again = await _replies_of(router, [encode(first)])
        assert [r.id for r in replies] == [replies[0].id, replies[0].id]
        assert again[0].id == replies[0].id
        assert [m.id for m in echo.seen] == [first.id]
        assert (await router.stats()).duplicates == 2

    run(main())


def test_a_recipient_dying_mid_batch_dead_letters_each_envelope_with_the_reason():
    async def main():
        router = MessageRouter()
        await router.register("a", BrokenBatch("a"))
        sent = [ping("a") for _ in range(3)]
        replies = await _replies_of(router, [encode(m) for m in sent])
        assert all(r.payload.code is ErrorCode.RECIPIENT_UNAVAILABLE for r in replies)
        assert all(r.payload.retryable for r in replies)
        letters = await router.dead_letters()
        assert [letter.message_id for letter in letters] == [m.id for m in sent]
        assert (await router.stats()).in_flight == {}

    run(main())


def test_a_role_batch_is_shared_between_its_agents():
    async def main():
        router = MessageRouter()
        agents = [BatchEcho(f"w{n}") for n in range(2)]
        for agent in agents:
            await router.register(agent.name, agent, ["worker"])
        sent = [ping("role:worker") for _ in range(10)]
        replies = await _replies_of(router, [encode(m) for m in sent])
        by = [r.payload.data["by"] for r in replies]
        assert by.count("w0") == by.count("w1") == 5  # least in flight, counted as grouped
        assert [len(b) for a in agents for b in a.batches] == [5, 5]

    run(main())


def test_envelopes_with_a_deadline_and_plain_mailboxes_go_one_by_one():
    async def main():
        router = MessageRouter()
        batching, plain = BatchEcho("a"), Echo("b")
        await router.register("a", batching)
        await router.register("b", plain)
        timed = ping("a", deadline=time.time() + 30)
        sent = [timed, ping("a"), ping("b")]
        replies = await _replies_of(router, [encode(m) for m in sent])
        assert [r.payload.data["by"] for r in replies] == ["a", "a", "b"]
        assert batching.batches == [[sent[1].id]]  # the one with a deadline went alone
        assert {m.id for m in batching.seen} == {timed.id, sent[1].id}
        assert [m.id for m in plain.seen] == [sent[2].id]
        assert isinstance(replies[0].payload, Event)

    run(main())


def test_a_quick_reply_does_not_wait_for_a_slow_one_of_its_batch():
    async def main():
        router = MessageRouter()
        gate = asyncio.Event()
        echo = SlowForSome("a", gate)
        await router.register("a", echo)
        sent = [ping("a", job_id="slow"), ping("a", job_id="quick"), ping("a", job_id="quick")]
        ready, ticket = await router.request_many([encode(m) for m in sent])
        # the quick ones are back while the slow one is still held at the recipient
        assert sorted(index for index, _ in ready) == [1, 2]
        assert ticket is not None
        assert (await router.stats()).in_flight == {"a": 1}
        assert echo.batches == [[m.id for m in sent]]  # still one call to the recipient
        later = asyncio.create_task(router.request_more(ticket))
        await asyncio.sleep(0.01)
        assert not later.done()  # waits for the next answer instead of answering empty
        gate.set()
        rest, done = await later
        assert [index for index, _ in rest] == [0]
        assert done is None
        assert decode(rest[0][1]).correlation_id == sent[0].id
        assert (await router.stats()).in_flight == {}
        with pytest.raises(RecipientUnavailable):  # a finished batch's ticket is gone
            await router.request_more(ticket)

    run(main())


def test_a_recipient_dying_after_first_answers_dead_letters_only_the_rest():
    async def main():
        router = MessageRouter()
        await router.register("a", DiesAfterFirst("a", asyncio.Event()))
        sent = [ping("a", job_id="quick"), ping("a", job_id="slow")]
        replies = await _replies_of(router, [encode(m) for m in sent])
        assert replies[0].payload.data["by"] == "a"
        assert replies[1].payload.code is ErrorCode.RECIPIENT_UNAVAILABLE
        assert [letter.message_id for letter in await router.dead_letters()] == [sent[1].id]
        stats = await router.stats()
        assert (stats.delivered, stats.dead_lettered, stats.in_flight) == (1, 1, {})

    run(main())


def test_a_ticket_the_router_does_not_know_is_a_retryable_unavailable():
    async def main():
        with pytest.raises(RecipientUnavailable) as unknown:
            await MessageRouter().request_more("no-such-ticket")
        return unknown.value

    assert run(main()).retryable


def test_a_recipient_unregistered_while_its_batch_is_on_the_way_still_gets_it():
    async def main():
        router = MessageRouter()
        echo = BatchEcho("a")
        await router.register("a", echo)
        sent = [ping("a"), ping("a")]
        answers, removed = await asyncio.gather(
            _all(router, [encode(m) for m in sent]), router.unregister("a")
        )
        return [decode(a) for a in answers], removed, await router.stats()

    replies, removed, stats = run(main())
    assert removed
    assert [r.payload.data["by"] for r in replies] == ["a", "a"]  # resolved before, delivered
    assert (stats.delivered, stats.in_flight) == (2, {})
