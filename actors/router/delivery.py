"""Handing envelopes to mailboxes: one at a time, or a recipient's group in one batch call.

The router (:class:`~raytroupe.actors.router.actor.MessageRouter`) resolves an envelope to
its recipient; :func:`call` hands it over within its deadline, :func:`deliver_group` hands
a batching recipient its envelopes in one call and settles each as its answer comes. A
recipient's failure is a typed ``DeliveryError``, never the router's crash.
"""

from __future__ import annotations

import asyncio
import time

from raytroupe.actors.endpoint import BatchMailbox, Outcome
from raytroupe.actors.router.ledger import Ledger
from raytroupe.actors.router.registry import Entry
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import (
    AgentMessage,
    DeadlineExceeded,
    DeliveryError,
    ErrorCode,
    ErrorPayload,
    TroupeError,
    encode,
)
from raytroupe.protocols.codec import Routed

__all__ = ["call", "deliver_group", "no_reply_error", "settle_answer"]


async def call(name: str, entry: Entry, routed: Routed) -> bytes | None:
    """Hand ``routed`` to ``name``'s mailbox; its reply (None: it gave none).

    Raises:
        DeadlineExceeded: the envelope's deadline passed while waiting for the reply.
        DeliveryError: the recipient failed.
    """
    deadline = routed.message.deadline
    timeout = None if deadline is None else max(0.0, deadline - time.time())
    entry.in_flight += 1
    metrics.queue_depth("router", name, entry.in_flight)
    try:
        return await asyncio.wait_for(entry.mailbox.receive(routed.with_hop()), timeout)
    except TimeoutError:
        raise DeadlineExceeded(
            "deadline passed while waiting for the reply", recipient=name
        ) from None
    except TroupeError:
        raise
    except Exception as err:  # a failing recipient must not crash the router
        raise DeliveryError(f"delivery to {name!r} failed: {err!r}", recipient=name) from err
    finally:
        entry.in_flight -= 1
        metrics.queue_depth("router", name, entry.in_flight)


async def deliver_group(
    name: str, entry: Entry, items: list[tuple[Routed, asyncio.Future[bytes]]], ledger: Ledger
) -> None:
    """Hand ``items`` to ``name`` in one batch call; settle each as its answer comes.

    ``entry`` is the one the envelopes were resolved to (``name`` may be unregistered or
    registered anew by the time this runs).
    """
    mailbox = entry.mailbox
    assert isinstance(mailbox, BatchMailbox)  # noqa: S101 - grouped only if it batches
    metrics.queue_depth("router", name, entry.in_flight)
    waiting = dict(enumerate(items))
    failure: TroupeError | None = None
    try:
        ready, ticket = await mailbox.receive_many([r.with_hop() for r, _ in items])
        while True:
            for index, answer in ready:
                routed, future = waiting.pop(index)
                settle_answer(name, routed.message, future, answer, ledger)
            entry.in_flight -= len(ready)
            metrics.queue_depth("router", name, entry.in_flight)
            if ticket is None:
                break
            ready, ticket = await mailbox.receive_more(ticket)
    except TroupeError as exc:
        failure = exc
    except Exception as err:  # noqa: BLE001 - a failing recipient must not crash the router
        failure = DeliveryError(f"delivery to {name!r} failed: {err!r}", recipient=name)
    finally:
        if waiting:
            entry.in_flight -= len(waiting)
            metrics.queue_depth("router", name, entry.in_flight)
            lost = failure or DeliveryError(f"delivery to {name!r} was cut short")
            for routed, future in waiting.values():
                settle_answer(name, routed.message, future, lost, ledger)


def settle_answer(
    name: str,
    message: AgentMessage,
    future: asyncio.Future[bytes],
    answer: Outcome,
    ledger: Ledger,
) -> None:
    """Settle ``future`` with the reply to ``message``: ``answer``, or why it has none.

    An error names ``name``, who failed it: the sender may want it again, restarted.
    """
    if isinstance(answer, TroupeError):
        answer.detail.setdefault("recipient", name)
        ledger.dead_letter(answer, message)
        reply = encode(message.error_reply(answer, sender="router"))
    elif answer is None:
        ledger.count.delivered += 1
        reply = encode(message.reply(no_reply_error(name), sender="router"))
    else:
        ledger.count.delivered += 1
        reply = answer
    if not future.done():
        future.set_result(reply)


def no_reply_error(name: str) -> ErrorPayload:
    """The reply to a request whose recipient gave none."""
    return ErrorPayload(
        code=ErrorCode.DELIVERY, message=f"{name!r} gave no reply to a request", retryable=False
    )
