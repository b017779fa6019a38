"""How many subtasks an agent works on at once: a limit that can change while they run."""

from __future__ import annotations

import asyncio
from types import TracebackType


class Slots:
    """An async limiter whose limit can be changed while holders run.

    Unlike swapping an ``asyncio.Semaphore`` for a new one, a new limit counts the subtasks
    already running: lowered, no one more starts until enough have finished; raised, waiters
    start at once. A release wakes every waiter to look again (not one chosen one), so a waiter
    cancelled as it was woken cannot leave the others waiting.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._busy = 0
        self._free = asyncio.Condition()

    @property
    def limit(self) -> int:
        """How many may hold a slot at once."""
        return self._limit

    @property
    def busy(self) -> int:
        """How many hold a slot now."""
        return self._busy

    async def resize(self, limit: int) -> None:
        """Let ``limit`` hold a slot at once from now on (those running keep theirs)."""
        async with self._free:
            self._limit = limit
            self._free.notify_all()

    async def __aenter__(self) -> None:
        async with self._free:
            await self._free.wait_for(lambda: self._busy < self._limit)
            self._busy += 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        async with self._free:
            self._busy -= 1
            self._free.notify_all()
