"""Ray handles as mailboxes and router clients: the Ray glue every actor process needs.

Kept apart from :mod:`actors._ray` (which spawns the system) so that an agent process,
unpickling its router client, imports nothing but Ray and the protocols.
"""

from __future__ import annotations

from typing import Any

from ray.exceptions import RayActorError, RayTaskError

from protocols import AgentMessage, RecipientUnavailable, TroupeError, decode, encode

__all__ = ["RayMailbox", "RayRouterClient", "unwrap"]


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


class RayRouterClient:
    """An actor-side :class:`~actors.RouterClient` over the router's Ray handle."""

    def __init__(self, router: Any) -> None:
        self._router = router

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver through the router and wait for the reply."""
        try:
            return decode(await self._router.request.remote(encode(message)))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver through the router without waiting for a reply."""
        try:
            status: str = await self._router.send.remote(encode(message))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None
        return status
