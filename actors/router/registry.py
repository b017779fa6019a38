"""The router's registry: who is deliverable under which name, role and topic.

Also how a router that starts among running actors rebuilds it (:func:`rebuild`): once at
start, and, for a router Ray restarted, again every second for a while, because actors
restarting at the same time answer late.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from raytroupe.actors.endpoint import BatchMailbox, Mailbox
from raytroupe.protocols import AddressKind, InvalidInput, UnknownRecipient, parse_address

__all__ = ["Discover", "Entry", "Registry", "rebuild"]

log = structlog.get_logger("raytroupe.router")

REDISCOVER_ROUNDS = 30
REDISCOVER_EVERY_S = 1.0
"""After rebuilding its registry, a restarted router looks again this often, this many times."""

Discover = Callable[[], Awaitable[list[tuple[str, Any, list[str]]]]]
"""Finds the live actors, as registrations ``(name, mailbox, roles)``."""


@dataclass
class Entry:
    """A registered name: its mailbox, its roles and how many envelopes it holds now."""

    mailbox: Mailbox
    roles: frozenset[str]
    in_flight: int = 0
    batches: bool = False
    """The mailbox takes batches (:class:`BatchMailbox`)."""


class Registry:
    """Names, roles and topics; picks the holder of a role that has the least in flight.

    Args:
        wrap: turns what :meth:`register` receives (a Ray actor handle in production, a plain
            object in unit tests) into a :class:`Mailbox`.
    """

    def __init__(self, wrap: Callable[[Any], Mailbox]) -> None:
        self._wrap = wrap
        self.entries: dict[str, Entry] = {}
        self._roles: dict[str, list[str]] = {}
        self._topics: dict[str, set[str]] = {}
        self._unregistered: set[str] = set()
        """Names unregistered on purpose: a rebuild does not bring them back."""
        self._turns = itertools.count()

    def register(self, name: str, mailbox: Any, roles: Iterable[str] = ()) -> None:
        """Make ``name`` deliverable to ``mailbox``, holding ``roles``; replaces an old entry.

        Raises:
            InvalidInput: ``name`` is an address (``role:``, ``topic:``), not a plain name.
        """
        kind, bare = parse_address(name)
        if kind is not AddressKind.DIRECT:
            raise InvalidInput(f"register takes a plain name, not {name!r}", name=name)
        self.unregister(bare)
        self._unregistered.discard(bare)
        role_set = frozenset(parse_address(f"role:{r}").name for r in roles)
        wrapped = self._wrap(mailbox)
        self.entries[bare] = Entry(wrapped, role_set, batches=isinstance(wrapped, BatchMailbox))
        for role in role_set:
            self._roles.setdefault(role, []).append(bare)
        log.info("registered", name=bare, roles=sorted(role_set))

    def unregister(self, name: str) -> bool:
        """Forget ``name``; True if it was registered."""
        entry = self.entries.pop(name, None)
        if entry is None:
            return False
        self._unregistered.add(name)
        for role in entry.roles:
            holders = self._roles.get(role, [])
            if name in holders:
                holders.remove(name)
            if not holders:
                self._roles.pop(role, None)
        for subscribers in self._topics.values():
            subscribers.discard(name)
        return True

    def subscribe(self, name: str, topic: str) -> None:
        """Deliver envelopes sent to ``topic:<topic>`` to the registered actor ``name``.

        Raises:
            UnknownRecipient: ``name`` is not registered.
        """
        if name not in self.entries:
            raise UnknownRecipient(f"cannot subscribe unregistered {name!r}", name=name)
        self._topics.setdefault(parse_address(f"topic:{topic}").name, set()).add(name)

    def subscribers(self, topic: str) -> list[str]:
        """Who subscribed to ``topic``, sorted."""
        return sorted(self._topics.get(topic, ()))

    def names(self) -> dict[str, list[str]]:
        """Registered names and their roles."""
        return {name: sorted(e.roles) for name, e in self.entries.items()}

    def lookup(self, recipient: str, target: str | None = None) -> tuple[str, Entry]:
        """The name and entry an envelope for ``recipient`` goes to (``target`` if given).

        Raises:
            UnknownRecipient: nobody is registered under that name or holds that role.
            InvalidInput: ``recipient`` is a topic (topics take ``send`` only).
        """
        kind, name = parse_address(recipient)
        if target is not None:
            name = target
        elif kind is AddressKind.ROLE:
            holders = self._roles.get(name)
            if not holders:
                raise UnknownRecipient(f"no agent holds role {name!r}", recipient=recipient)
            turn = next(self._turns)
            # least in flight first; ties broken round-robin so equal agents share the work
            name = min(
                (holders[(turn + i) % len(holders)] for i in range(len(holders))),
                key=lambda n: self.entries[n].in_flight,
            )
        elif kind is AddressKind.TOPIC:
            raise InvalidInput("a request cannot go to a topic; use send", recipient=name)
        entry = self.entries.get(name)
        if entry is None:
            raise UnknownRecipient(f"no actor registered as {name!r}", recipient=recipient)
        return name, entry

    def adopt(self, found: Iterable[tuple[str, Any, list[str]]], *, late: bool = False) -> None:
        """Register what a discovery found, except names already here or unregistered."""
        for name, mailbox, roles in found:
            if name not in self.entries and name not in self._unregistered:
                self.register(name, mailbox, roles)
                if late:
                    log.info("registered_late", name=name)


async def rebuild(
    registry: Registry,
    discover: Discover,
    *,
    restarted: bool,
    background: set[asyncio.Task[None]],
) -> None:
    """Register the live actors ``discover`` finds; a ``restarted`` router keeps looking.

    The further rounds run in a task kept in ``background``: an actor restarting together
    with the router answers too late for the first round.
    """
    try:
        found = await discover()
    except Exception:
        log.exception("registry_rebuild_failed")
        return
    registry.adopt(found)
    log.info("registry_rebuilt", actors=len(found))
    if restarted:
        task = asyncio.create_task(_catch_up(registry, discover))
        background.add(task)
        task.add_done_callback(background.discard)


async def _catch_up(registry: Registry, discover: Discover) -> None:
    for _ in range(REDISCOVER_ROUNDS):
        await asyncio.sleep(REDISCOVER_EVERY_S)
        try:
            found = await discover()
        except Exception:  # logged; the next round tries again
            log.warning("registry_catch_up_failed", exc_info=True)
            continue
        registry.adopt(found, late=True)
