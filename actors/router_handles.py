"""The router's shards over Ray: the client actors send envelopes through, and the control plane.

:class:`RayRouterClient` is the data plane (each envelope to its sender's shard, requests
batched); :class:`RouterShards` registers, unregisters and subscribes on every shard. An agent
process unpickles its router client from here, so this module imports nothing but Ray, the
protocols and :mod:`raytroupe.actors.ray_handles`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError

from raytroupe.actors.endpoint import BatchProgress
from raytroupe.actors.ray_handles import NAMESPACE, through_restarts, unwrap
from raytroupe.actors.telemetry.tracing import stamp
from raytroupe.protocols import (
    AgentMessage,
    DeliveryError,
    RecipientUnavailable,
    TroupeError,
    decode,
    encode,
    router_shard,
)

__all__ = [
    "RayRouterClient",
    "RouterShards",
    "router_shard_name",
    "router_shards",
]

T = TypeVar("T")


class RayRouterClient:
    """An actor-side :class:`~raytroupe.actors.RouterClient` over the router shards' Ray handles.

    Each envelope goes to the shard :func:`~raytroupe.protocols.router_shard` names for its sender
    (one shard for all an actor sends). Requests made in the same turn of the event loop (up
    to ``max_batch`` per shard) go to their shard as one batch (one Ray call,
    :meth:`MessageRouter.request_many`), batches pipelined. Each request keeps its own reply
    and the router's per-envelope semantics, and gets it as soon as it exists: the router
    returns the replies ready so far and a ticket, and the client asks for the rest at once
    (:meth:`MessageRouter.request_more`), so a quick reply never waits for a slow one of its
    batch. ``max_batch=1`` sends each request alone. Calls made while a shard restarts wait
    for it (see :func:`through_restarts`); a batch whose shard died before answering fails
    with ``RecipientUnavailable`` (retryable).
    """

    def __init__(self, routers: Any, *, max_batch: int = 256) -> None:
        self._routers: tuple[Any, ...] = (
            tuple(routers) if isinstance(routers, list | tuple) else (routers,)
        )
        self._max_batch = max_batch
        self._queues: list[list[tuple[bytes, asyncio.Future[bytes | TroupeError]]]] = [
            [] for _ in self._routers
        ]
        self._flush_scheduled = False
        self._in_flight: set[asyncio.Task[None]] = set()

    def __reduce__(self) -> tuple[Any, ...]:
        # the queues and their futures belong to one process's event loop: never pickled
        return (_client, (self._routers, self._max_batch))

    def _shard(self, message: AgentMessage) -> int:
        return router_shard(message.sender, len(self._routers))

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        """Deliver through the router and wait for the reply."""
        message = stamp(message)  # the current span's traceparent, when tracing is on
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes | TroupeError] = loop.create_future()
        shard = self._shard(message)
        queue = self._queues[shard]
        queue.append((encode(message), future))
        if len(queue) >= self._max_batch:
            self._flush_shard(shard)
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        answer = await future
        if isinstance(answer, TroupeError):
            raise answer
        return decode(answer)

    def _flush(self) -> None:
        self._flush_scheduled = False
        for shard in range(len(self._routers)):
            self._flush_shard(shard)

    def _flush_shard(self, shard: int) -> None:
        batch, self._queues[shard] = self._queues[shard], []
        if batch:
            task = asyncio.ensure_future(self._deliver(self._routers[shard], batch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _deliver(
        self, router: Any, batch: list[tuple[bytes, asyncio.Future[bytes | TroupeError]]]
    ) -> None:
        try:
            sent, (ready, ticket) = await through_restarts(
                functools.partial(_send_wanted, router, batch)
            )
            while True:
                for index, answer in ready:
                    future = batch[sent[index]][1]
                    if not future.done():  # its caller may have been cancelled
                        future.set_result(answer if answer is not None else _NO_REPLY)
                if ticket is None:
                    return
                ready, ticket = await router.request_more.remote(ticket)
        except RayActorError as exc:
            failure: BaseException = RecipientUnavailable(f"router is unavailable: {exc}")
        except RayTaskError as exc:
            failure = unwrap(exc)
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            failure = exc
        for _, future in batch:
            if not future.done():
                future.set_exception(failure)

    async def send(self, message: AgentMessage, /) -> str:
        """Deliver through the router without waiting for a reply."""
        data = encode(stamp(message))
        router = self._routers[self._shard(message)]
        try:
            status: str = await through_restarts(lambda: router.send.remote(data))
        except RayActorError as exc:
            raise RecipientUnavailable(f"router is unavailable: {exc}") from None
        except RayTaskError as exc:
            raise unwrap(exc) from None
        return status

    async def connect(self) -> None:
        """Call every shard once (see :meth:`RouterClient.connect`)."""
        await asyncio.gather(*(through_restarts(router.shard.remote) for router in self._routers))


async def _send_wanted(
    router: Any, batch: list[tuple[bytes, asyncio.Future[bytes | TroupeError]]]
) -> tuple[list[int], BatchProgress]:
    """Send the requests of ``batch`` someone still waits for; their indices, the answer.

    Called again when the router was restarting: requests given up meanwhile (a cancelled
    subtask's model call) are not sent again.
    """
    wanted = [i for i, (_, future) in enumerate(batch) if not future.done()]
    if not wanted:
        return wanted, ([], None)
    partial: BatchProgress = await router.request_many.remote([batch[i][0] for i in wanted])
    return wanted, partial


class RouterShards:
    """The router's shards, ``router/0`` .. ``router/<K-1>``: the control plane over them.

    Every shard holds the whole registry: a registration, a removal and a subscription go to
    each (through its restarts; a restarted shard also finds the live actors itself). The
    data plane is :meth:`client`, which sends each envelope to its one shard.
    """

    def __init__(self, handles: Sequence[Any]) -> None:
        if not handles:
            raise ValueError("a router has one shard at least")
        self.handles: tuple[Any, ...] = tuple(handles)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RouterShards, (self.handles,))

    def __len__(self) -> int:
        return len(self.handles)

    def client(self, *, max_batch: int = 256) -> RayRouterClient:
        """A data-plane client over the shards."""
        return RayRouterClient(self.handles, max_batch=max_batch)

    async def _each(self, call: Callable[[Any], Awaitable[T]]) -> list[T]:
        try:
            return await asyncio.gather(
                *(through_restarts(functools.partial(call, handle)) for handle in self.handles)
            )
        except RayTaskError as exc:
            raise unwrap(exc) from None

    async def register(self, name: str, mailbox: Any, roles: Sequence[str] = ()) -> None:
        """Register ``name`` on every shard (see :meth:`MessageRouter.register`)."""
        await self._each(lambda h: h.register.remote(name, mailbox, list(roles)))

    async def unregister(self, name: str) -> bool:
        """Forget ``name`` on every shard; True if a shard knew it."""
        return any(await self._each(lambda h: h.unregister.remote(name)))

    async def subscribe(self, name: str, topic: str) -> None:
        """Subscribe ``name`` to ``topic`` on every shard."""
        await self._each(lambda h: h.subscribe.remote(name, topic))

    async def stats(self) -> list[Any]:
        """Each shard's ``RouterStats``, in shard order."""
        return await self._each(lambda h: h.stats.remote())

    async def dead_letters(self, limit: int = 100) -> list[Any]:
        """The newest ``limit`` dead letters of all shards, oldest first."""
        each = await self._each(lambda h: h.dead_letters.remote(limit))
        letters = sorted((letter for part in each for letter in part), key=lambda d: d.at)
        return letters[-limit:] if limit > 0 else []


def router_shard_name(shard: int) -> str:
    """The Ray actor name of router shard ``shard``."""
    return f"router/{shard}"


def router_shards(count: int | None = None) -> RouterShards:
    """The running router's shards, looked up by name (all of them, or the first ``count``).

    Raises:
        ValueError: no router runs in the namespace.
    """
    first = ray.get_actor(router_shard_name(0), namespace=NAMESPACE)
    total = count if count is not None else int(ray.get(first.shard.remote())[1])
    rest = [ray.get_actor(router_shard_name(k), namespace=NAMESPACE) for k in range(1, total)]
    return RouterShards([first, *rest])


_NO_REPLY: Final = DeliveryError("the router answered a request with nothing")  # never, by design


def _client(router: Any, max_batch: int) -> RayRouterClient:
    return RayRouterClient(router, max_batch=max_batch)
