"""The message router: registry of addresses and delivery of ``AgentMessage`` envelopes.

Guarantees, per envelope handed to :meth:`MessageRouter.send` or :meth:`MessageRouter.request`:

- it is delivered to exactly one recipient (direct or by role), to every subscriber (topic,
  ``send`` only), or it lands in the dead-letter queue with a typed reason: malformed bytes,
  unknown recipient, expired deadline, hop limit, dead recipient, or a recipient that crashed;
- an id seen before is not delivered twice: a repeated ``request`` gets the first one's reply;
- a ``request`` always gets a reply envelope; when delivery failed it carries an
  ``ErrorPayload`` (``retryable`` where trying again can help).

Handing envelopes to mailboxes is :mod:`.delivery`; the ids seen, dead letters and counters
are :mod:`.ledger`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from raytroupe.actors.endpoint import Batches, BatchProgress, Mailbox, Outcome
from raytroupe.actors.router.delivery import call, deliver_group, no_reply_error
from raytroupe.actors.router.ledger import Ledger
from raytroupe.actors.router.registry import Discover, Entry, Registry, rebuild
from raytroupe.actors.telemetry import metrics
from raytroupe.actors.telemetry.tracing import stamp
from raytroupe.protocols import (
    AddressKind,
    AgentMessage,
    DeadLetter,
    DeadlineExceeded,
    DeliveryError,
    ErrorCode,
    ErrorPayload,
    HopLimitExceeded,
    TroupeError,
    UnknownRecipient,
    decode,
    encode,
    parse_address,
)
from raytroupe.protocols.codec import Routed, decode_routed
from raytroupe.protocols.router import RouterStats

__all__ = ["LocalRouterClient", "MessageRouter", "RouterStats"]


def _identity(ref: Any) -> Mailbox:
    mailbox: Mailbox = ref
    return mailbox


class MessageRouter:
    """Registry and delivery. A plain class; Ray makes it the ``router`` actor.

    Args:
        mailbox_factory: turns what ``register`` receives (a Ray actor handle in production, a
            plain object in unit tests) into a :class:`Mailbox`.
        max_hops: envelopes routed this many times are dead-lettered (loop protection).
        dedupe_window: how many recent message ids are remembered for de-duplication.
        dead_letter_limit: how many dead letters are kept for inspection (the count is exact).
        discover: finds the live actors (name, mailbox, roles), for a router that starts among
            them: its registry is rebuilt from what this returns.
        restarted: whether this router is a restart (under Ray, Ray says so). Only a restart
            keeps looking, for a while, for actors that were restarting with it: a router
            that starts fresh has nothing to catch up with.
        shard: which shard of the router this is, of ``shards`` (the clients pick a shard
            per envelope: :func:`~raytroupe.protocols.router_shard`). Each holds the whole registry.
    """

    def __init__(
        self,
        *,
        mailbox_factory: Callable[[Any], Mailbox] = _identity,
        max_hops: int = 16,
        dedupe_window: int = 10_000,
        dead_letter_limit: int = 10_000,
        discover: Discover | None = None,
        restarted: Callable[[], bool] = lambda: True,
        shard: int = 0,
        shards: int = 1,
    ) -> None:
        if not 0 <= shard < shards:
            raise ValueError(f"shard {shard} of {shards}")
        self._shard, self._shards = shard, shards
        self._registry = Registry(mailbox_factory)
        self._max_hops = max_hops
        self._ledger = Ledger(dedupe_window, dead_letter_limit)
        self._background: set[asyncio.Task[None]] = set()
        self._batches = Batches()
        self._discover = discover
        self._restarted = restarted

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        return (
            f"Router(shard {self._shard} of {self._shards}, hop limit {self._max_hops}, "
            f"keeps {self._ledger.dead.maxlen} dead letters)"
        )

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """A router starting among running actors finds them (see ``registry.rebuild``)."""
        if self._discover is not None:
            await rebuild(
                self._registry,
                self._discover,
                restarted=self._restarted(),
                background=self._background,
            )

    async def on_stop(self) -> None:
        """Stop the deliveries and look-ups still running in the background."""
        for task in list(self._background):
            task.cancel()

    async def shard(self) -> tuple[int, int]:
        """Which shard this is, and of how many."""
        return self._shard, self._shards

    # -- registry -------------------------------------------------------------------------

    async def register(self, name: str, mailbox: Any, roles: Iterable[str] = ()) -> None:
        """Make ``name`` deliverable to ``mailbox``, holding ``roles``; replaces an old entry.

        Raises:
            InvalidInput: ``name`` is an address (``role:``, ``topic:``), not a plain name.
        """
        self._registry.register(name, mailbox, roles)

    async def unregister(self, name: str) -> bool:
        """Forget ``name``; True if it was registered."""
        return self._registry.unregister(name)

    async def subscribe(self, name: str, topic: str) -> None:
        """Deliver envelopes sent to ``topic:<topic>`` to the registered actor ``name``.

        Raises:
            UnknownRecipient: ``name`` is not registered.
        """
        self._registry.subscribe(name, topic)

    async def registry(self) -> dict[str, list[str]]:
        """Registered names and their roles."""
        return self._registry.names()

    # -- delivery -------------------------------------------------------------------------

    async def request(self, data: bytes) -> bytes:
        """Deliver one envelope and return its reply's bytes.

        Raises:
            MalformedEnvelope, UnsupportedSchemaVersion: ``data`` is not a readable envelope
                (it is dead-lettered too; without an id there is nobody to reply to).
        """
        routed = self._accept(data)
        message = routed.message
        pending = self._ledger.seen.get(message.id)
        if pending is not None:
            self._ledger.count.duplicates += 1
            return await asyncio.shield(pending)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._ledger.remember(message.id, future)
        try:
            reply = await self._deliver_one(routed)
        except BaseException as exc:  # cancelled callers must not leave waiters hanging
            future.set_exception(exc)
            future.exception()  # mark retrieved: duplicates re-raise, nobody else must log it
            raise
        future.set_result(reply)
        return reply

    async def request_many(self, batch: list[bytes]) -> BatchProgress:
        """Deliver a batch of envelopes; return their replies as they come.

        Returns the replies ready when the first one is, as ``(batch index, reply)`` pairs,
        and a ticket for the others, which :meth:`request_more` hands out as they arrive: a
        quick reply never waits for a slow one of its batch. (:func:`all_answers` collects
        them all.) Each envelope keeps the guarantees of :meth:`request` (dedupe, dead
        letters with a reason, an error reply when undeliverable); an unreadable one's answer
        is its ``MalformedEnvelope`` / ``UnsupportedSchemaVersion`` instead of a reply.
        Envelopes are accepted in order, and those for one recipient reach it in order, as
        one batch (one actor call) when the recipient takes batches and they carry no
        deadline.
        """
        self._ledger.count.batches += 1
        work: list[Awaitable[Outcome]] = []
        groups: dict[str, tuple[Entry, list[tuple[Routed, asyncio.Future[bytes]]]]] = {}
        for data in batch:
            try:
                routed = self._accept(data)
            except TroupeError as exc:
                work.append(_now(exc))
                continue
            message = routed.message
            pending = self._ledger.seen.get(message.id)
            if pending is not None:
                self._ledger.count.duplicates += 1
                work.append(asyncio.shield(pending))
                continue
            future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self._ledger.remember(message.id, future)
            try:
                name, entry = self._resolve(message)
            except TroupeError as exc:
                self._ledger.dead_letter(exc, message)
                future.set_result(encode(message.error_reply(exc, sender="router")))
                work.append(_now(future.result()))
                continue
            if message.deadline is None and entry.batches:
                entry.in_flight += 1  # counted now, so the next role lookup sees it
                groups.setdefault(name, (entry, []))[1].append((routed, future))
                work.append(asyncio.shield(future))
            else:
                work.append(self._settle(routed, future, name))
        for name, (entry, items) in groups.items():
            task = asyncio.create_task(deliver_group(name, entry, items, self._ledger))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return await self._batches.start(work)

    async def request_more(self, ticket: str) -> BatchProgress:
        """More replies of a :meth:`request_many` batch, as they arrive (waits for one).

        Raises:
            RecipientUnavailable: the ticket is unknown (the router restarted since).
        """
        return await self._batches.more(ticket)

    async def _settle(self, routed: Routed, future: asyncio.Future[bytes], target: str) -> bytes:
        try:
            reply = await self._deliver_one(routed, target)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        future.set_result(reply)
        return reply

    async def send(self, data: bytes) -> str:
        """Deliver one envelope without waiting for the recipient; return the status.

        The status is ``accepted``, ``duplicate`` or ``dead_lettered``. A recipient's reply is
        routed on to the envelope's ``reply_to`` when it names one, and dropped otherwise.
        """
        routed = self._accept(data)
        message = routed.message
        if message.id in self._ledger.seen:
            self._ledger.count.duplicates += 1
            return "duplicate"
        # a later request with this id is a duplicate too; it is told so instead of a reply
        seen: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        seen.set_result(encode(message.reply(_sent_one_way(message.id), sender="router")))
        self._ledger.remember(message.id, seen)
        kind, name = parse_address(message.recipient)
        try:
            if kind is AddressKind.TOPIC:
                targets = self._registry.subscribers(name)
                if not targets:
                    raise UnknownRecipient(f"no subscribers to {message.recipient}")
            else:
                targets = [self._resolve(message)[0]]
        except DeliveryError as exc:
            self._ledger.dead_letter(exc, message)
            return "dead_lettered"
        for target in targets:
            task = asyncio.create_task(self._send_in_background(routed, target))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return "accepted"

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The newest ``limit`` dead letters, oldest first."""
        return list(self._ledger.dead)[-limit:] if limit > 0 else []

    async def stats(self) -> RouterStats:
        """Counters and the registry, for inspection."""
        return self._ledger.stats(self._registry)

    # -- internals ------------------------------------------------------------------------

    def _accept(self, data: bytes) -> Routed:
        self._ledger.count.routed += 1
        try:
            routed = decode_routed(data)
        except TroupeError as exc:
            metrics.message_routed("malformed")
            raw = bytes(data) if isinstance(data, bytes | bytearray | memoryview) else None
            self._ledger.dead_letter(exc, None, raw=raw)
            raise
        metrics.message_routed(routed.message.kind)
        return routed

    def _resolve(self, message: AgentMessage, target: str | None = None) -> tuple[str, Entry]:
        if message.hops >= self._max_hops:
            raise HopLimitExceeded(f"hop limit {self._max_hops} reached", hops=message.hops)
        if message.expired():
            raise DeadlineExceeded("deadline passed before delivery", deadline=message.deadline)
        return self._registry.lookup(message.recipient, target)

    async def _deliver_one(self, routed: Routed, target: str | None = None) -> bytes:
        message = routed.message
        name = None
        try:
            name, entry = self._resolve(message, target)
            reply = await call(name, entry, routed)
        except TroupeError as exc:
            if name is not None:  # who failed it: the sender may want it again, restarted
                exc.detail.setdefault("recipient", name)
            self._ledger.dead_letter(exc, message)
            return encode(message.error_reply(exc, sender="router"))
        self._ledger.count.delivered += 1
        if reply is None:
            return encode(message.reply(no_reply_error(name), sender="router"))
        return reply

    async def _send_in_background(self, routed: Routed, target: str) -> None:
        message = routed.message
        reply = await self._deliver_one(routed, target)
        if message.reply_to is None:
            return
        reply_message = decode(reply)
        if reply_message.recipient == message.reply_to:
            await self.send(encode(reply_message))


async def _now(answer: Outcome) -> Outcome:
    return answer


def _sent_one_way(message_id: str) -> ErrorPayload:
    return ErrorPayload(
        code=ErrorCode.DELIVERY,
        message=f"duplicate: message {message_id} was already sent one-way; it has no reply",
    )


class LocalRouterClient:
    """A :class:`RouterClient` over an in-process router (unit tests, single-process use)."""

    def __init__(self, router: MessageRouter) -> None:
        self._router = router

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver and wait for the reply."""
        return decode(await self._router.request(encode(stamp(message))))

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver without waiting."""
        return await self._router.send(encode(stamp(message)))

    async def connect(self) -> None:
        """Nothing to reach: the router is in this process."""
