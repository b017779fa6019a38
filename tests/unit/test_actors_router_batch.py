"""MessageRouter.request_many: a batch keeps every per-envelope guarantee of request."""

import time

from wiring import Echo, ping, run

from actors import MessageRouter
from actors._endpoint import serve_many
from protocols import (
    ErrorCode,
    Event,
    MalformedEnvelope,
    RecipientUnavailable,
    decode,
    encode,
)


class BatchEcho(Echo):
    """An Echo that takes batches, recording each batch it was handed."""

    def __init__(self, name, **kwargs):
        super().__init__(name, **kwargs)
        self.batches = []

    async def receive_many(self, data):
        self.batches.append([decode(d).id for d in data])
        return await serve_many(data, self.receive)


class BrokenBatch(BatchEcho):
    async def receive_many(self, _data):
        raise RecipientUnavailable("actor died mid-batch")


def _replies(answers):
    return [decode(a) for a in answers]


def test_a_batch_for_one_recipient_is_one_call_in_order_with_a_reply_each():
    async def main():
        router = MessageRouter()
        echo = BatchEcho("a")
        await router.register("a", echo)
        sent = [ping("a", job_id=f"job-{n}") for n in range(20)]
        replies = _replies(await router.request_many([encode(m) for m in sent]))
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
        replies = _replies(await router.request_many([encode(m) for m in sent]))
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
        answers = await router.request_many(
            [encode(good), b"\x00not an envelope", encode(nobody), encode(expired)]
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
        replies = _replies(await router.request_many([encode(first), encode(first)]))
        again = _replies(await router.request_many([encode(first)]))
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
        replies = _replies(await router.request_many([encode(m) for m in sent]))
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
        replies = _replies(await router.request_many([encode(m) for m in sent]))
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
        replies = _replies(await router.request_many([encode(m) for m in sent]))
        assert [r.payload.data["by"] for r in replies] == ["a", "a", "b"]
        assert batching.batches == [[sent[1].id]]  # the one with a deadline went alone
        assert {m.id for m in batching.seen} == {timed.id, sent[1].id}
        assert [m.id for m in plain.seen] == [sent[2].id]
        assert isinstance(replies[0].payload, Event)

    run(main())
