"""Batches: a batch's answers handed out as they finish, under a ticket."""

import asyncio

import pytest
from wiring import run

from raytroupe.actors.endpoint import Batches, all_answers
from raytroupe.protocols import DeliveryError, InvalidInput, RecipientUnavailable


async def _after(gate: asyncio.Event, answer: bytes) -> bytes:
    await gate.wait()
    return answer


def test_answers_come_as_they_finish_and_the_ticket_ends_with_the_last():
    async def main():
        batches = Batches()
        first, second = asyncio.Event(), asyncio.Event()
        ready, ticket = await batches.start(
            [_after(first, b"a"), asyncio.sleep(0, b"now"), _after(second, b"c")]
        )
        assert ready == [(1, b"now")]
        assert ticket is not None
        second.set()
        assert await batches.more(ticket) == ([(2, b"c")], ticket)
        first.set()
        assert await batches.more(ticket) == ([(0, b"a")], None)
        assert len(batches) == 0

    run(main())


def test_answers_finishing_together_travel_together():
    async def main():
        batches = Batches()
        assert await batches.start([asyncio.sleep(0, n) for n in range(50)]) == (
            [(n, n) for n in range(50)],
            None,
        )
        assert await batches.start([]) == ([], None)

    run(main())


def test_a_failing_envelope_answers_with_its_typed_error_and_the_others_go_on():
    async def bad() -> bytes:
        raise InvalidInput("no good")

    async def crash() -> bytes:
        raise RuntimeError("boom")

    async def main():
        batches = Batches()
        answers = await all_answers(
            batches.start([bad(), asyncio.sleep(0, b"ok"), crash()]), batches.more, 3
        )
        assert isinstance(answers[0], InvalidInput)
        assert answers[1] == b"ok"
        assert isinstance(answers[2], DeliveryError)  # an unexpected crash, typed
        assert "boom" in str(answers[2])

    run(main())


def test_an_abandoned_ticket_is_dropped_after_keep_s_but_not_while_someone_waits():
    async def main():
        batches = Batches(keep_s=0.05)
        held, gate = asyncio.Event(), asyncio.Event()
        _, abandoned = await batches.start([asyncio.sleep(0, b"x"), _after(held, b"y")])
        _, watched = await batches.start([asyncio.sleep(0, b"x"), _after(gate, b"y")])
        waiting = asyncio.create_task(batches.more(watched))
        await asyncio.sleep(0.1)
        await batches.start([asyncio.sleep(0, b"z")])  # a new batch sweeps old tickets
        assert len(batches) == 1  # the abandoned one went; the one being asked about stayed
        gate.set()
        assert await waiting == ([(1, b"y")], None)
        with pytest.raises(RecipientUnavailable) as unknown:
            await batches.more(abandoned)
        assert unknown.value.retryable

    run(main())
