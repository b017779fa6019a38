"""Ray handles as mailboxes, restart helpers and LLM pool peers: Ray glue every actor needs.

Kept apart from :mod:`raytroupe.actors.spawn` (which spawns the system) so that an agent process
imports nothing but Ray and the protocols. The router's shards and the client actors send
through are in :mod:`raytroupe.actors.router_handles`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

import ray
import structlog
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
from ray.experimental import internal_kv

from raytroupe.actors.endpoint import BatchProgress
from raytroupe.protocols import (
    AgentMessage,
    RecipientUnavailable,
    TroupeError,
    decode,
    encode,
)

__all__ = [
    "NAMESPACE",
    "GcsRestartStore",
    "RayBatchMailbox",
    "RayMailbox",
    "RayPoolPeers",
    "discover_troupe",
    "ray_mailbox",
    "restarted_actor",
    "through_restarts",
    "unwrap",
]

NAMESPACE: Final = "troupe"

log = structlog.get_logger("raytroupe.ray")

T = TypeVar("T")


class GcsRestartStore:
    """Configuration an actor keeps across its restarts, in Ray's cluster-wide KV store.

    Ray restarts a dead actor by running ``__init__`` again with its creation arguments, so
    whatever was configured since (a pool's team models, an agent's hot-updated spec and
    router roles) would be lost. The actor saves it here after each change and loads it at
    start. The store is the GCS's internal KV (what Ray's own libraries keep state in): it
    outlives actors and nodes, not the cluster. Values are pickled; they hold no secrets
    (API keys are read from the environment inside the pool).
    """

    def __init__(self, key: str) -> None:
        self.key = key

    def __reduce__(self) -> tuple[Any, ...]:
        return (GcsRestartStore, (self.key,))

    def save(self, value: Any) -> None:
        """Keep ``value`` (replacing what was kept)."""
        internal_kv._internal_kv_put(
            self._name, ray.cloudpickle.dumps(value), overwrite=True, namespace=NAMESPACE
        )

    def load(self) -> Any | None:
        """What was kept, or None."""
        data = internal_kv._internal_kv_get(self._name, namespace=NAMESPACE)
        return None if data is None else ray.cloudpickle.loads(data)

    def forget(self) -> None:
        """Drop what was kept."""
        internal_kv._internal_kv_del(self._name, namespace=NAMESPACE)

    @property
    def _name(self) -> bytes:
        return f"kept/{self.key}".encode()


def unwrap(exc: BaseException) -> BaseException:
    """The ``TroupeError`` inside a ``RayTaskError``, else ``exc`` itself."""
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, TroupeError):
        return exc.cause
    return exc


class RayMailbox:
    """A router-side :class:`~raytroupe.actors.Mailbox` over a Ray actor handle.

    Use :func:`ray_mailbox`, which gives a :class:`RayBatchMailbox` for actors that take
    batches.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def receive(self, data: bytes, /) -> bytes | None:
        """Call the actor's ``receive``; a dead or restarting actor is ``RecipientUnavailable``."""
        reply: bytes | None = await _call(self._handle.receive, data)
        return reply


class RayBatchMailbox(RayMailbox):
    """A :class:`~raytroupe.actors.BatchMailbox` over the handle of an actor that takes batches."""

    async def receive_many(self, data: list[bytes], /) -> BatchProgress:
        """Hand a batch to the actor in one call; the first answers and a ticket."""
        partial: BatchProgress = await _call(self._handle.receive_many, data)
        return partial

    async def receive_more(self, ticket: str, /) -> BatchProgress:
        """The next answers of the actor's batch ``ticket``."""
        partial: BatchProgress = await _call(self._handle.receive_more, ticket)
        return partial


def ray_mailbox(handle: Any) -> RayMailbox:
    """The router's mailbox for an actor handle (batching if the actor takes batches)."""
    try:
        handle.receive_many  # noqa: B018 - Ray handles raise AttributeError for unknown methods
    except AttributeError:
        return RayMailbox(handle)
    return RayBatchMailbox(handle)


async def _call(method: Any, argument: Any) -> Any:
    try:
        return await method.remote(argument)
    except ActorUnavailableError as exc:  # Ray is restarting it: back in a second or so
        raise RecipientUnavailable(
            f"recipient actor is restarting: {exc}", restarting=True
        ) from None
    except RayActorError as exc:
        raise RecipientUnavailable(f"recipient actor is unavailable: {exc}") from None
    except RayTaskError as exc:
        raise unwrap(exc) from None


async def through_restarts(call: Callable[[], Awaitable[T]], *, within_s: float = 20.0) -> T:
    """Await ``call()``, calling again while its actor is restarting (for ``within_s`` at most).

    Ray answers a call to an actor it knows to be restarting with ``ActorUnavailableError``
    at once; a restart takes about a second. Other failures propagate.
    """
    for pause in _restart_pauses(within_s):
        try:
            return await call()
        except ActorUnavailableError:
            await asyncio.sleep(pause)
    return await call()  # the last try: its error propagates


def through_restarts_blocking(call: Callable[[], T], *, within_s: float = 20.0) -> T:
    """:func:`through_restarts` for code outside an event loop (a driver's ``ray.get``)."""
    for pause in _restart_pauses(within_s):
        try:
            return call()
        except ActorUnavailableError:
            time.sleep(pause)
    return call()


def _restart_pauses(within_s: float) -> Iterator[float]:
    """The waits between tries: from 50 ms, doubling up to 1 s, until ``within_s`` from now."""
    deadline = time.monotonic() + within_s
    pause = 0.05
    while time.monotonic() + pause <= deadline:
        yield pause
        pause = min(pause * 2, 1.0)


class RayPoolPeers:
    """The other replicas of the LLM pool (actors ``llm/<n>``), reached by name.

    See :class:`raytroupe.actors.llm.pool.PoolPeers`. A configuration is passed on through a peer's
    restart (it also reads the configuration back from the shared restart store when it
    starts); a cancel or a cooldown a dead peer misses does not matter: its calls died with
    it.
    """

    def __init__(self, me: int, replicas: int) -> None:
        self._me, self._replicas = me, replicas
        self._background: set[asyncio.Future[Any]] = set()
        self._handles: dict[str, Any] = {}
        """Looked up once: a handle stays valid through its actor's restarts."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayPoolPeers, (self._me, self._replicas))

    async def _handle(self, name: str) -> Any:
        if name not in self._handles:  # asks the GCS: off the event loop
            found = await asyncio.to_thread(ray.get_actor, name, namespace=NAMESPACE)
            self._handles[name] = found
        return self._handles[name]

    def _names(self) -> list[str]:
        return [f"llm/{n}" for n in range(self._replicas) if n != self._me]

    async def _each(self, call: Callable[[Any], Any], *, within_s: float = 20.0) -> list[Any]:
        async def one(name: str) -> Any:
            async def attempt() -> Any:
                return await call(await self._handle(name))

            try:
                return await through_restarts(attempt, within_s=within_s)
            except (ValueError, RayActorError) as exc:  # not started yet, or gone for good
                log.warning("pool_peer_unreachable", peer=name, error=repr(exc))
                return None
            except RayTaskError as exc:
                raise unwrap(exc) from None

        return await asyncio.gather(*(one(name) for name in self._names()))

    async def configure(self, models: Mapping[str, Any], *, replace: bool, operator: bool) -> None:
        """Serve ``models`` on every other replica (each checks as this one did)."""
        options = {"replace": replace, "operator": operator, "local": True}
        await self._each(lambda h: h.configure.remote(dict(models), **options))

    async def remove(self, alias: str) -> None:
        """Stop serving ``alias`` on every other replica."""
        await self._each(lambda h: h.remove.remote(alias, local=True))

    async def spend_limits(self, infos: list[Any]) -> None:
        """Have every other replica hold ``infos`` as the spend limits set at run time."""
        await self._each(lambda h: h.adopt_spend_limits.remote(list(infos)))

    async def cancel(self, job_id: str) -> int:
        """Stop the job's calls on every other replica; how many were stopped."""
        stopped = await self._each(lambda h: h.cancel_job.remote(job_id), within_s=2.0)
        return sum(n for n in stopped if isinstance(n, int))

    async def first(self, message: AgentMessage) -> AgentMessage:
        """``llm/0``'s reply to ``message`` (a scripted model only it plays)."""

        async def attempt() -> AgentMessage:
            handle = await self._handle("llm/0")
            data: bytes = await _call(handle.receive, encode(message))
            return decode(data)

        return await through_restarts(attempt)

    async def complete_first(self, request: Any, context: Any) -> Any:
        """``llm/0``'s answer to ``request`` (a scripted model only it plays)."""

        async def attempt() -> Any:
            handle = await self._handle("llm/0")
            try:
                return await handle.complete.remote(request, context)
            except RayTaskError as exc:
                raise unwrap(exc) from None

        return await through_restarts(attempt)

    def cooled(self, deployment: str, wait_s: float) -> None:
        """Tell every other replica, without waiting, that ``deployment`` rests ``wait_s``."""
        task = asyncio.ensure_future(
            self._each(lambda h: h.cooled.remote(deployment, wait_s), within_s=wait_s)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)


_SYSTEM: Final = frozenset({"memory"})


def restarted_actor() -> bool:
    """Whether the calling actor is a restart: Ray reconstructed it after it died."""
    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


async def discover_troupe() -> list[tuple[str, Any, list[str]]]:
    """Every live actor of the namespace, as router registrations ``(name, handle, roles)``.

    A restarted router shard calls this to rebuild its registry: system actors by name (the
    orchestrator's shards ``orchestrator/<k>`` as ``orchestrator`` for shard 0 and
    ``orchestrator-<k>`` for the others, the pool's replicas ``llm/<n>`` as ``llm-<n>`` with
    role ``llm``, the tool sandboxes
    ``tools/<n>`` as ``tools-<n>`` with role ``tools``), agents ``agent/<name>`` with the
    roles they were given (asked of each agent, a second at most).
    """
    found: list[tuple[str, Any, list[str]]] = []
    # both ask the GCS and block: in a thread, so the router's loop goes on delivering
    named = await asyncio.to_thread(ray.util.list_named_actors, all_namespaces=True)
    for entry in named:
        name = entry["name"]
        if entry["namespace"] != NAMESPACE:
            continue
        try:
            handle = await asyncio.to_thread(ray.get_actor, name, namespace=NAMESPACE)
        except ValueError:  # gone since it was listed
            continue
        if name in _SYSTEM:
            found.append((name, handle, []))
        elif name.startswith("orchestrator/"):  # shard 0 is "orchestrator", k "orchestrator-k"
            shard = name.removeprefix("orchestrator/")
            found.append(("orchestrator" if shard == "0" else f"orchestrator-{shard}", handle, []))
        elif name.startswith("llm/"):
            found.append((name.replace("/", "-"), handle, ["llm"]))
        elif name.startswith("tools/"):
            found.append((name.replace("/", "-"), handle, ["tools"]))
        elif name.startswith("agent/"):
            try:
                roles = await asyncio.wait_for(handle.registration.remote(), 1.0)
            except (TimeoutError, RayActorError, RayTaskError):
                continue  # a dead or hung agent is registered again by its next provisioning
            found.append((name.removeprefix("agent/"), handle, list(roles)))
    return found
