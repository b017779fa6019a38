"""Ray handles as mailboxes and router clients: the Ray glue every actor process needs.

Kept apart from :mod:`actors._ray` (which spawns the system) so that an agent process,
unpickling its router client, imports nothing but Ray and the protocols.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import ray
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

from protocols import AgentMessage, RecipientUnavailable, TroupeError, decode, encode

__all__ = [
    "NAMESPACE",
    "RayMailbox",
    "RayRouterClient",
    "discover_troupe",
    "through_restarts",
    "unwrap",
]

NAMESPACE: Final = "troupe"

T = TypeVar("T")


def unwrap(exc: BaseException) -> BaseException:
    """The ``TroupeError`` inside a ``RayTaskError``, else ``exc`` itself."""
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, TroupeError):
        return exc.cause
    return exc


class RayMailbox:
    """A router-side :class:`~actors.Mailbox` over a Ray actor handle."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def receive(self, data: bytes, /) -> bytes | None:
        """Call the actor's ``receive``; a dead or restarting actor is ``RecipientUnavailable``."""
        try:
            reply: bytes | None = await self._handle.receive.remote(data)
        except RayActorError as exc:
            raise RecipientUnavailable(f"recipient actor is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None
        return reply


async def through_restarts(call: Callable[[], Awaitable[T]], *, within_s: float = 20.0) -> T:
    """Await ``call()``, calling again while its actor is restarting (for ``within_s`` at most).

    Ray answers a call to an actor it knows to be restarting with ``ActorUnavailableError``
    at once; a restart takes about a second. Other failures propagate.
    """
    deadline = time.monotonic() + within_s
    pause = 0.05
    while True:
        try:
            return await call()
        except ActorUnavailableError:
            if time.monotonic() + pause > deadline:
                raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


class RayRouterClient:
    """An actor-side :class:`~actors.RouterClient` over the router's Ray handle.

    Calls made while the router restarts wait for it (see :func:`through_restarts`).
    """

    def __init__(self, router: Any) -> None:
        self._router = router

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver through the router and wait for the reply."""
        data = encode(message)
        try:
            return decode(await through_restarts(lambda: self._router.request.remote(data)))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver through the router without waiting for a reply."""
        data = encode(message)
        try:
            status: str = await through_restarts(lambda: self._router.send.remote(data))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None
        return status


_SYSTEM: Final = frozenset({"llm", "orchestrator", "memory"})


async def discover_troupe() -> list[tuple[str, Any, list[str]]]:
    """Every live actor of the namespace, as router registrations ``(name, handle, roles)``.

    A restarted router calls this to rebuild its registry: system actors by name, tool
    sandboxes ``tools/<n>`` as ``tools-<n>`` with role ``tools``, agents ``agent/<name>``
    with the roles they were given (asked of each agent, a second at most).
    """
    found: list[tuple[str, Any, list[str]]] = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        name = entry["name"]
        if entry["namespace"] != NAMESPACE:
            continue
        handle = ray.get_actor(name, namespace=NAMESPACE)
        if name in _SYSTEM:
            found.append((name, handle, []))
        elif name.startswith("tools/"):
            found.append((f"tools-{name.removeprefix('tools/')}", handle, ["tools"]))
        elif name.startswith("agent/"):
            try:
                roles = await asyncio.wait_for(handle.registration.remote(), 1.0)
            except (TimeoutError, RayActorError, RayTaskError):
                continue  # a dead or hung agent is registered again by its next provisioning
            found.append((name.removeprefix("agent/"), handle, list(roles)))
    return found
