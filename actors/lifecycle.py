"""Actor lifecycle: ``on_start`` before the first call is served, ``on_stop`` at the end.

An actor class keeps its constructor to cheap, in-memory set-up; whatever needs I/O or the
event loop (restoring kept configuration, resuming the journal, rediscovering the registry,
opening SQLite or Chroma, starting MCP servers) goes in ``on_start``, and its clean-up in
``on_stop``. The classes stay plain: :func:`with_lifecycle` is applied by the Ray glue when an
actor is spawned. The unit-test wiring awaits ``on_start`` itself.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from raytroupe.actors.telemetry.logs import configure_worker_logging
from raytroupe.actors.telemetry.tracing import configure_worker_tracing

__all__ = ["Lifecycle", "with_lifecycle"]

T = TypeVar("T")

_HOOKS = frozenset({"on_start", "on_stop", "started"})


class Lifecycle(Protocol):
    """What every actor class has: its start-up and its clean-up."""

    async def on_start(self) -> None:
        """Start what the actor needs beyond its constructor; called once, before any call."""
        ...

    async def on_stop(self) -> None:
        """Release what ``on_start`` started (it may not be called: a process can die)."""
        ...


def with_lifecycle(cls: type[T]) -> type[T]:
    """``cls`` as the Ray glue runs it: ``on_start`` begins when an instance is made.

    That is also when Ray makes it again after a crash, so a restarted actor starts the same
    way. Every public coroutine method waits for ``on_start`` to end first (and raises its
    error if it failed); ``started()`` does only that, for the spawner to wait on, and says
    which Ray node the actor runs on (where it landed, to check its placement).
    """

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        configure_worker_logging()  # before the class logs anything (a no-op in a driver)
        configure_worker_tracing(cls.__name__)  # from the OTEL_* variables, if they ask
        cls.__init__(self, *args, **kwargs)
        self._lifecycle_start = asyncio.get_running_loop().create_task(self.on_start())

    async def started(self: Any) -> str:
        await asyncio.shield(self._lifecycle_start)
        import ray  # noqa: PLC0415 - only ever called through Ray

        return str(ray.get_runtime_context().get_node_id())

    namespace: dict[str, Any] = {"__init__": init, "started": started, "__doc__": cls.__doc__}
    for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction):
        if not name.startswith("_") and name not in _HOOKS:
            namespace[name] = _after_start(member)
    return type(cls.__name__, (cls,), namespace)


async def _wait_started(actor: Any) -> None:
    start: asyncio.Task[None] = actor._lifecycle_start
    await asyncio.shield(start)


def _after_start(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def after_start(self: Any, *args: Any, **kwargs: Any) -> Any:
        start: asyncio.Task[None] = self._lifecycle_start
        if not start.done() or start.exception() is not None:
            await asyncio.shield(start)  # raises on_start's error, if it failed
        return await method(self, *args, **kwargs)

    return after_start
