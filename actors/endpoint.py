"""What every actor shares: the mailbox and router-client interfaces, and the codec boundary."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar, cast, overload, runtime_checkable

import structlog

from raytroupe.actors.telemetry.tracing import received
from raytroupe.protocols import (
    AgentMessage,
    DeliveryError,
    ErrorCode,
    ErrorPayload,
    InvalidInput,
    RecipientUnavailable,
    TroupeError,
    decode,
    encode,
)

__all__ = [
    "BatchMailbox",
    "BatchProgress",
    "Batches",
    "Handler",
    "Mailbox",
    "RestartStore",
    "RouterClient",
    "TakesBatches",
    "all_answers",
    "answering",
    "expected",
    "request_through_restarts",
    "serve_envelope",
    "undelivered",
]

log = structlog.get_logger("raytroupe")

RETRY_FIRST_S = 0.2
RETRY_MAX_S = 2.0
RETRY_S = 30.0
"""A request whose recipient is restarting (the LLM pool, a sandbox) is sent again after 0.2,
0.4, 0.8, 1.6 s, then every 2 s, for up to 30 s of pauses in all and within the envelope's
deadline. A restarted actor is back ~1 s after Ray notices its death; when its node died, Ray
first has to notice that (~17 s with Ray's default health checks)."""

P = TypeVar("P")
A = TypeVar("A")
B = TypeVar("B")

Handler = Callable[[AgentMessage, P], Awaitable[AgentMessage | None]]
"""An actor's handler: the envelope, and its payload narrowed to what the actor accepts."""


class Mailbox(Protocol):
    """Something the router can hand envelope bytes to; it may answer with a reply."""

    async def receive(self, data: bytes, /) -> bytes | None:
        """Handle one envelope; return the encoded reply, if any."""
        ...


Outcome: TypeAlias = bytes | TroupeError | None
"""What one envelope of a batch comes to: a reply, no reply, or why it could not be handled."""

BatchProgress: TypeAlias = tuple[list[tuple[int, Outcome]], str | None]
"""Part of a batch's answers: ``(batch index, answer)`` pairs ready so far, and the ticket to
ask for the rest with (``None`` once every answer has been given)."""


@runtime_checkable
class BatchMailbox(Mailbox, Protocol):
    """A mailbox that also takes several envelopes in one call (one actor call per batch).

    Answers come back as they are ready, not all at once, so a quick reply never waits for a
    slow one of its batch: ``receive_many`` returns those ready when the first is, with a ticket
    for the rest, which ``receive_more`` hands out as they come (see :class:`Batches`).
    """

    async def receive_many(self, data: list[bytes], /) -> BatchProgress:
        """Start handling each envelope as :meth:`receive` would; return the first answers.

        An envelope that cannot be decoded has its ``TroupeError`` as its answer.
        """
        ...

    async def receive_more(self, ticket: str, /) -> BatchProgress:
        """The answers of the ticket's batch that became ready since it was last asked."""
        ...


class RestartStore(Protocol):
    """Where an actor keeps its configuration across its restarts.

    Under Ray: :class:`raytroupe.actors.ray_handles.GcsRestartStore`, in the GCS's key-value store.
    """

    def save(self, value: Any) -> None:
        """Keep ``value``."""
        ...

    def load(self) -> Any | None:
        """What was kept, or None."""
        ...


class RouterClient(Protocol):
    """How actors talk to the router: typed messages in, typed replies out."""

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver ``message`` and wait for its reply (an error reply when undeliverable)."""
        ...

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver ``message`` without waiting for a reply; return the delivery status."""
        ...

    async def connect(self) -> None:
        """Reach the router once, so that no later call has to look it up.

        Under Ray, a process learns where an actor of a handle it was given lives at its
        first call, from the GCS: an actor that calls the router for the first time while
        the GCS is down waits for it to come back. Actors connect as they start.
        """
        ...


async def serve_envelope(
    data: bytes, handler: Handler[P], *, me: str, accepts: tuple[type[Any], ...]
) -> bytes | None:
    """Decode ``data``, run ``handler`` on it, encode its reply.

    ``accepts`` lists the payload types the actor handles (the union ``P`` its handler takes,
    so that its ``match`` can end in ``assert_never``); any other payload is answered with
    ``InvalidInput``. A ``TroupeError`` or an unexpected exception in ``handler`` becomes an
    error reply, so a request always gets an answer. Malformed bytes raise
    ``MalformedEnvelope`` to the caller (the router dead-letters them). With tracing on, the
    sender's span (the envelope's ``traceparent``) is current while ``handler`` runs.
    """
    message = decode(data)
    if not isinstance(message.payload, accepts):
        refused = InvalidInput(f"{me} cannot handle {message.kind!r}", kind=message.kind)
        log.info("handler_error", actor=me, msg_id=message.id, code=refused.code)
        return encode(message.error_reply(refused, sender=me))
    try:
        with received(message.traceparent):
            reply = await handler(message, cast("P", message.payload))
    except TroupeError as exc:
        log.info("handler_error", actor=me, msg_id=message.id, job_id=message.job_id, code=exc.code)
        reply = message.error_reply(exc, sender=me)
    except Exception as exc:
        log.exception("handler_crashed", actor=me, msg_id=message.id, job_id=message.job_id)
        reply = message.error_reply(exc, sender=me)
    return None if reply is None else encode(reply)


@overload
def expected(
    reply: AgentMessage, a: type[A], /, *, unexpected: Callable[[str], TroupeError]
) -> A | ErrorPayload: ...
@overload
def expected(
    reply: AgentMessage, a: type[A], b: type[B], /, *, unexpected: Callable[[str], TroupeError]
) -> A | B | ErrorPayload: ...
def expected(
    reply: AgentMessage, *kinds: type[Any], unexpected: Callable[[str], TroupeError]
) -> Any:
    """The payload of ``reply`` if it is one of ``kinds`` or an ``ErrorPayload``.

    Narrowed so that a ``match`` over it can end in ``assert_never``.

    Raises:
        TroupeError: ``unexpected(message)`` for any other payload.
    """
    if isinstance(reply.payload, (*kinds, ErrorPayload)):
        return reply.payload
    names = ", ".join(k.__name__ for k in kinds)
    raise unexpected(f"{reply.sender} answered with {reply.kind!r}, expected {names}")


def answering(
    data: list[bytes], receive: Callable[[bytes], Awaitable[bytes | None]]
) -> list[Awaitable[Outcome]]:
    """``receive`` of each envelope of a batch, as work for :meth:`Batches.start`.

    Each envelope is handled as if it had come alone: one that cannot be decoded has its
    ``TroupeError`` as its answer, the others are unaffected.
    """

    async def one(item: bytes) -> Outcome:
        try:
            return await receive(item)
        except TroupeError as exc:
            return exc

    return [one(item) for item in data]


async def _outcome(work: Awaitable[Outcome]) -> Outcome:
    """``work``'s answer; a failure as the error :class:`_Open` would give for it."""
    try:
        return await work
    except TroupeError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - the batch's answer, not the caller's failure
        return DeliveryError(f"handling failed: {exc!r}")


class _Open:
    """One batch whose answers are not all given yet."""

    def __init__(self, work: Sequence[Awaitable[Outcome]]) -> None:
        self.ready: list[tuple[int, Outcome]] = []
        self.waiting = len(work)
        self.event = asyncio.Event()
        self.asking = 0
        self.touched = time.monotonic()
        self.tasks = [asyncio.ensure_future(item) for item in work]
        for index, task in enumerate(self.tasks):
            task.add_done_callback(functools.partial(self._done, index))

    def _done(self, index: int, task: asyncio.Future[Outcome]) -> None:
        answer: Outcome
        if task.cancelled():
            answer = DeliveryError("handling was cancelled")
        elif isinstance(exc := task.exception(), TroupeError):
            answer = exc
        elif exc is not None:
            answer = DeliveryError(f"handling failed: {exc!r}")
        else:
            answer = task.result()
        self.ready.append((index, answer))
        self.waiting -= 1
        self.event.set()

    def take(self) -> list[tuple[int, Outcome]]:
        taken, self.ready = self.ready, []
        self.event.clear()
        self.touched = time.monotonic()
        return taken


class Batches:
    """Batches being handled in one actor, each answered as its envelopes finish.

    :meth:`start` runs a batch's work concurrently and returns once an answer is ready: those
    ready by then, and a ticket if some are still running; :meth:`more` returns the next ones.
    The caller asks again at once, so an answer leaves the actor as soon as it exists; replies
    that finish together still travel together (one actor call), which is what makes batches
    cheap. A ticket nobody asks about for ``keep_s`` is dropped with its answers (its caller
    is gone); asking about an unknown ticket (the actor restarted since) is
    ``RecipientUnavailable``, which callers may retry.
    """

    def __init__(self, *, keep_s: float = 600.0) -> None:
        self._open: dict[str, _Open] = {}
        self._keep_s = keep_s

    def __len__(self) -> int:
        return len(self._open)

    async def start(self, work: Sequence[Awaitable[Outcome]]) -> BatchProgress:
        """Run ``work`` (one awaitable per envelope); the first answers and a ticket."""
        self._sweep()
        if not work:
            return [], None
        if len(work) == 1:  # nothing to batch: answered here, with no task, event or ticket
            return [(0, await _outcome(work[0]))], None
        batch = _Open(work)
        return await self._answer(batch, None)

    async def more(self, ticket: str) -> BatchProgress:
        """The answers of ``ticket``'s batch ready since it was last asked (waits for one)."""
        batch = self._open.get(ticket)
        if batch is None:
            raise RecipientUnavailable(
                f"batch {ticket!r} is unknown here (the actor restarted, or it was abandoned)",
                ticket=ticket,
            )
        return await self._answer(batch, ticket)

    async def _answer(self, batch: _Open, ticket: str | None) -> BatchProgress:
        batch.asking += 1
        try:
            await batch.event.wait()
            await asyncio.sleep(0)  # answers finishing in the same turn go in the same reply
        finally:
            batch.asking -= 1
        ready = batch.take()
        if batch.waiting == 0 and not batch.ready:
            if ticket is not None:
                self._open.pop(ticket, None)
            return ready, None
        if ticket is None:
            ticket = uuid.uuid4().hex
            self._open[ticket] = batch
        return ready, ticket

    def _sweep(self) -> None:
        now = time.monotonic()
        for ticket, batch in list(self._open.items()):
            if not batch.asking and now - batch.touched > self._keep_s:
                del self._open[ticket]


async def all_answers(
    first: Awaitable[BatchProgress], more: Callable[[str], Awaitable[BatchProgress]], size: int
) -> list[Outcome]:
    """Every answer of a batch of ``size``, in order: ``first``, then ``more`` until done."""
    answers: list[Outcome] = [None] * size
    ready, ticket = await first
    while True:
        for index, answer in ready:
            answers[index] = answer
        if ticket is None:
            return answers
        ready, ticket = await more(ticket)


class TakesBatches:
    """Mixin for an actor with ``receive``: the router's batch entry points over it.

    ``receive_many`` starts every envelope of a batch at once, each in a task of its own (so
    cancelling one job's work leaves the others running), and returns the answers ready when
    the first is, with a ticket for the rest (:class:`Batches`). One actor call per batch
    instead of one per envelope.
    """

    receive: Callable[[bytes], Awaitable[bytes | None]]
    """Handle one envelope (the class using the mixin provides it)."""

    def _open_batches(self) -> Batches:
        batches: Batches | None = self.__dict__.get("_troupe_batches")
        if batches is None:
            batches = self.__dict__["_troupe_batches"] = Batches()
        return batches

    async def receive_many(self, data: list[bytes], /) -> BatchProgress:
        """Batch entry point (the router's): each envelope as :meth:`receive`, concurrently."""
        return await self._open_batches().start(answering(data, self.receive))

    async def receive_more(self, ticket: str, /) -> BatchProgress:
        """More answers of the batch ``ticket``, as they finish (waits for one)."""
        return await self._open_batches().more(ticket)


_UNDELIVERED = frozenset({ErrorCode.RECIPIENT_UNAVAILABLE, ErrorCode.DELIVERY})


def undelivered(error: ErrorPayload) -> bool:
    """Whether the request never reached a live recipient (it may be restarting).

    Not: the recipient answered with an error (the LLM pool retries its providers itself).
    """
    return error.retryable and error.code in _UNDELIVERED


async def request_through_restarts(
    router: RouterClient,
    envelope: Callable[[], AgentMessage],
    *,
    again: Callable[[ErrorPayload], bool] = undelivered,
    repeats_answered: bool = False,
) -> AgentMessage:
    """The reply to a fresh ``envelope()``, requested again while its error may pass.

    ``again`` decides which errors may; the pauses stay within :data:`RETRY_S` and the
    envelope's deadline. Each try is a new envelope (a new id): the router would take a
    resent one for a duplicate.

    ``repeats_answered``: the recipient answers a request it had already taken from its record
    (a model call named by its place, a tool call by its idempotency key), so one the router
    lost may be asked again too: its shard died holding it (``RecipientUnavailable``, raised by
    the client), and whether it reached the recipient is unknown. Otherwise that error is raised.
    """
    pause, paused = RETRY_FIRST_S, 0.0
    while True:
        message = envelope()
        lost: TroupeError | None = None
        try:
            reply = await router.request(message)
        except RecipientUnavailable as exc:
            if not repeats_answered:
                raise
            lost, reply = exc, message.reply(ErrorPayload.from_exception(exc))
        error = reply.payload
        deadline = message.deadline
        if (
            not isinstance(error, ErrorPayload)
            or not again(error)
            or paused + pause > RETRY_S
            or (deadline is not None and time.time() + pause >= deadline)
        ):
            if lost is not None:
                raise lost
            return reply
        log.info("request_retry", sender=message.sender, recipient=message.recipient,
                 code=error.code.value, pause_s=pause)  # fmt: skip
        await asyncio.sleep(pause)
        paused += pause
        pause = min(pause * 2, RETRY_MAX_S)
