"""The agent's subtask limit, changed while subtasks run (no Ray)."""

from __future__ import annotations

import asyncio

import pytest

from raytroupe.actors.agent.slots import Slots


async def _hold(slots: Slots, started: list[int], i: int, release: asyncio.Event) -> None:
    async with slots:
        started.append(i)
        await release.wait()


async def _settle() -> None:
    for _ in range(20):  # bounded: lets every ready task take its turn
        await asyncio.sleep(0)


def test_a_lowered_limit_counts_the_subtasks_already_running():
    async def run() -> tuple[list[int], list[int], int]:
        slots, started, release = Slots(4), [], asyncio.Event()
        first = [asyncio.create_task(_hold(slots, started, i, release)) for i in range(4)]
        await _settle()
        await slots.resize(2)  # 4 running: none more may start until 2 have finished
        more = [asyncio.create_task(_hold(slots, started, i, release)) for i in range(4, 6)]
        await _settle()
        while_four_run = list(started)
        release.set()
        await asyncio.gather(*first, *more)
        return while_four_run, started, slots.busy

    while_four_run, started, busy = asyncio.run(run())
    assert while_four_run == [0, 1, 2, 3]  # a fresh semaphore would have let 4 and 5 in
    assert sorted(started) == [0, 1, 2, 3, 4, 5]
    assert busy == 0


def test_a_raised_limit_starts_waiters_at_once_in_order():
    async def run() -> tuple[list[int], list[int]]:
        slots, started, release = Slots(1), [], asyncio.Event()
        tasks = [asyncio.create_task(_hold(slots, started, i, release)) for i in range(4)]
        await _settle()
        before = list(started)
        await slots.resize(3)
        await _settle()
        after = list(started)
        release.set()
        await asyncio.gather(*tasks)
        return before, after

    before, after = asyncio.run(run())
    assert before == [0]
    assert after == [0, 1, 2]


async def _fail(slots: Slots) -> None:
    async with slots:
        raise ValueError("the subtask failed")


def test_a_holder_that_fails_gives_its_slot_back():
    async def run() -> int:
        slots = Slots(1)
        with pytest.raises(ValueError, match="failed"):
            await _fail(slots)
        async with slots:
            return slots.busy

    assert asyncio.run(run()) == 1


def test_a_waiter_cancelled_leaves_the_others_their_turn():
    async def run() -> list[int]:
        slots, started, release = Slots(1), [], asyncio.Event()
        holder = asyncio.create_task(_hold(slots, started, 0, release))
        await _settle()
        gone = asyncio.create_task(_hold(slots, started, 1, release))
        waiter = asyncio.create_task(_hold(slots, started, 2, release))
        await _settle()
        release.set()  # the holder leaves as the first waiter is cancelled
        gone.cancel()
        await asyncio.gather(holder, waiter, gone, return_exceptions=True)
        return started

    assert asyncio.run(run()) == [0, 2]
