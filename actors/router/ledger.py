"""What the router keeps of the envelopes it routes: the ids seen, the dead letters, counts.

:class:`Ledger` is a part of :class:`~raytroupe.actors.router.actor.MessageRouter`: the recent
message ids and their replies (an id seen before is not delivered twice), the dead letters
with their typed reasons (the newest ``dead_letter_limit`` kept, the count exact), and the
counters its ``stats`` show.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

import structlog

from raytroupe.actors.router.registry import Registry
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import AgentMessage, DeadLetter, TroupeError
from raytroupe.protocols.router import RouterStats

__all__ = ["Counters", "Ledger"]

log = structlog.get_logger("raytroupe.router")


@dataclass
class Counters:
    """What the router has done so far, counted."""

    routed: int = 0
    delivered: int = 0
    dead_lettered: int = 0
    duplicates: int = 0
    batches: int = 0


class Ledger:
    """The router's memory of envelopes (the router's).

    Args:
        dedupe_window: how many recent message ids are remembered for de-duplication.
        dead_letter_limit: how many dead letters are kept for inspection.
    """

    def __init__(self, dedupe_window: int, dead_letter_limit: int) -> None:
        self._dedupe_window = dedupe_window
        self.seen: OrderedDict[str, asyncio.Future[bytes]] = OrderedDict()
        """The recent message ids, each with its reply (to come)."""
        self.dead: deque[DeadLetter] = deque(maxlen=dead_letter_limit)
        """The newest dead letters, oldest first."""
        self.count = Counters()

    def remember(self, message_id: str, future: asyncio.Future[bytes]) -> None:
        """Keep ``message_id`` (its reply to come, in ``future``) within the dedupe window."""
        self.seen[message_id] = future
        while len(self.seen) > self._dedupe_window:
            self.seen.popitem(last=False)

    def dead_letter(
        self, exc: TroupeError, message: AgentMessage | None, *, raw: bytes | None = None
    ) -> None:
        """Keep a dead letter: why ``message`` (or the ``raw`` bytes) could not be delivered."""
        self.count.dead_lettered += 1
        metrics.dead_lettered(exc.code)
        letter = DeadLetter(
            at=time.time(),
            reason=exc.code,
            detail=exc.message,
            message_id=None if message is None else message.id,
            message=message,
            raw=None if raw is None else raw[:65_536],
        )
        self.dead.append(letter)
        log.warning(
            "dead_letter",
            reason=exc.code.value,
            detail=exc.message,
            msg_id=letter.message_id,
            job_id=None if message is None else message.job_id,
        )

    def stats(self, registry: Registry) -> RouterStats:
        """The counters, and ``registry`` (the router's), for inspection."""
        return RouterStats(
            routed=self.count.routed,
            delivered=self.count.delivered,
            dead_lettered=self.count.dead_lettered,
            duplicates=self.count.duplicates,
            batches=self.count.batches,
            registered=registry.names(),
            in_flight={n: e.in_flight for n, e in registry.entries.items() if e.in_flight},
        )
