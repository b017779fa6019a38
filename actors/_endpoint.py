"""What every actor shares: the mailbox and router-client interfaces, and the codec boundary."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import structlog

from protocols import AgentMessage, TroupeError, decode, encode

__all__ = [
    "BatchMailbox",
    "Handler",
    "Mailbox",
    "RouterClient",
    "serve_envelope",
    "serve_many",
]

log = structlog.get_logger("raytroupe")

Handler = Callable[[AgentMessage], Awaitable[AgentMessage | None]]


class Mailbox(Protocol):
    """Something the router can hand envelope bytes to; it may answer with a reply."""

    async def receive(self, data: bytes, /) -> bytes | None:
        """Handle one envelope; return the encoded reply, if any."""
        ...


@runtime_checkable
class BatchMailbox(Mailbox, Protocol):
    """A mailbox that also takes several envelopes in one call (one actor call per batch)."""

    async def receive_many(self, data: list[bytes], /) -> list[bytes | TroupeError | None]:
        """Handle each envelope as :meth:`receive` would; the answers in the same order.

        An envelope that cannot be decoded has its error in its place.
        """
        ...


class RouterClient(Protocol):
    """How actors talk to the router: typed messages in, typed replies out."""

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver ``message`` and wait for its reply (an error reply when undeliverable)."""
        ...

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver ``message`` without waiting for a reply; return the delivery status."""
        ...


async def serve_envelope(data: bytes, handler: Handler, *, me: str) -> bytes | None:
    """Decode ``data``, run ``handler``, encode its reply.

    A ``TroupeError`` or an unexpected exception in ``handler`` becomes an error reply, so a
    request always gets an answer. Malformed bytes raise ``MalformedEnvelope`` to the caller
    (the router dead-letters them).
    """
    message = decode(data)
    try:
        reply = await handler(message)
    except TroupeError as exc:
        log.info("handler_error", actor=me, msg_id=message.id, job_id=message.job_id, code=exc.code)
        reply = message.error_reply(exc, sender=me)
    except Exception as exc:
        log.exception("handler_crashed", actor=me, msg_id=message.id, job_id=message.job_id)
        reply = message.error_reply(exc, sender=me)
    return None if reply is None else encode(reply)


async def serve_many(
    data: list[bytes], receive: Callable[[bytes], Awaitable[bytes | None]]
) -> list[bytes | TroupeError | None]:
    """Run ``receive`` on each envelope of a batch, concurrently; answers in order.

    Each envelope is handled as if it had come alone: one that cannot be decoded has its
    ``TroupeError`` in its place, the others are unaffected.
    """

    async def one(item: bytes) -> bytes | TroupeError | None:
        try:
            return await receive(item)
        except TroupeError as exc:
            return exc

    return list(await asyncio.gather(*(one(item) for item in data)))
