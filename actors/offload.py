"""Control-plane work on tenants' input, off the event loop and in fair shares per tenant.

The HTTP replica and the orchestrator serve every tenant on one event loop each. Checking a
tenant's documents (schemas, patterns, graphs, admission) and evaluating what tenants wrote
against what models said (a graph's ``when`` edges, gates, eval expectations) is CPU work
whose cost the tenant chooses. :class:`Offload` runs each such unit in a small thread pool
under its deadline (:func:`raytroupe.protocols.bounded.bounded`: past it, ``WorkLimitExceeded``),
and lets each tenant have at most ``per_tenant`` units running and ``waiting`` more queued: one more
is refused with :class:`~raytroupe.protocols.errors.Busy` (HTTP 429, ``Retry-After``). A tenant that
floods waits for itself; the loop, and other tenants' turns in the pool, stay free.

The HTTP replica makes its own (its shares are ``APIConfig.shares``); an actor uses the one
of its event loop (:func:`on_loop`, made on first use with the default :class:`Shares`), as
a loop has one default executor, so that the orchestrator's parts (admission, dispatch, the
graph engine, the eval desk) share one pool and one set of shares without carrying it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, ParamSpec, TypeVar

import structlog

from raytroupe.protocols import Busy
from raytroupe.protocols.bounded import bounded
from raytroupe.protocols.config.shares import Shares

__all__ = ["Offload", "Shares", "offloaded", "on_loop"]

P = ParamSpec("P")
T = TypeVar("T")

log = structlog.get_logger("raytroupe.offload")

RETRY_AFTER_S: Final = 1
"""What a refused tenant is told to wait (units of work last well under a second)."""


@dataclass
class _Tenant:
    running: asyncio.Semaphore
    waiting: int = 0
    holders: int = 0


class Offload:
    """Units of CPU work run off the event loop, each tenant within its share.

    Made in an actor's (or replica's) constructor; the pool's threads start on first use.
    """

    def __init__(self, shares: Shares | None = None, *, name: str = "offload") -> None:
        self._shares = shares or Shares()
        self._name = name
        self._tenants: dict[str, _Tenant] = {}
        self._pool: ThreadPoolExecutor | None = None

    @contextlib.asynccontextmanager
    async def share(self, tenant: str, *, refuse: bool = True) -> AsyncIterator[None]:
        """Hold one of ``tenant``'s turns for the block (waiting for it if need be).

        ``refuse=False`` waits however long the queue is: for work a running job needs
        (its parallelism bounds it), where a refusal would fail the job.

        Raises:
            Busy: (``refuse``) ``tenant`` already has its share running and its queue full.
        """
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant(asyncio.Semaphore(self._shares.per_tenant))
        if refuse and state.running.locked() and state.waiting >= self._shares.waiting:
            log.info("tenant_busy", tenant=tenant, where=self._name)
            raise Busy(
                f"tenant {tenant!r} has {self._shares.per_tenant} requests being checked and "
                f"{state.waiting} waiting, as many as it may: retry after {RETRY_AFTER_S} s",
                limit="shares.waiting",
                retry_after_s=RETRY_AFTER_S,
            )
        state.holders += 1
        try:
            state.waiting += 1
            try:
                await state.running.acquire()
            finally:
                state.waiting -= 1
            try:
                yield
            finally:
                state.running.release()
        finally:
            state.holders -= 1
            if state.holders == 0:  # nothing of the tenant's in hand: forget it
                self._tenants.pop(tenant, None)

    async def run(
        self,
        tenant: str,
        seconds: float,
        limit: str,
        fn: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(*args, **kwargs)`` on the pool, within ``seconds`` (``limit`` names it).

        Raises:
            Busy: ``tenant``'s share is taken and its queue full.
            WorkLimitExceeded: the work's patterns ran past ``seconds``.
            Whatever ``fn`` raises.
        """
        async with self.share(tenant):
            return await self._run(seconds, limit, fn, *args, **kwargs)

    async def runs(
        self,
        tenant: str,
        seconds: float,
        limit: str,
        fn: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """As :meth:`run`, for work a running job needs: it waits its turn, never refused.

        Raises:
            WorkLimitExceeded: the work's patterns ran past ``seconds``.
            Whatever ``fn`` raises.
        """
        async with self.share(tenant, refuse=False):
            return await self._run(seconds, limit, fn, *args, **kwargs)

    async def _run(
        self, seconds: float, limit: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        loop = asyncio.get_running_loop()
        call = functools.partial(_within, seconds, limit, fn, *args, **kwargs)
        return await loop.run_in_executor(self._executor(), call)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self._shares.threads,
                thread_name_prefix=self._name,
                initializer=_yielding,
            )
        return self._pool

    def close(self) -> None:
        """Stop the pool's threads (after the work in hand)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


NICE: Final = 10
"""The pool's threads' niceness, above the event loop's: the CPU goes to serving first."""


def _yielding() -> None:
    """Lower this pool thread's CPU priority (Linux: a thread has a niceness of its own).

    Matching releases the GIL, so a tenant's patterns take a core; at a lower priority they
    take it only when the event loops (this process's, and the other actors' on the node)
    have nothing to run. Best effort: elsewhere the thread keeps the process's priority.
    """
    with contextlib.suppress(OSError, AttributeError):
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, max(NICE, os.getpriority(os.PRIO_PROCESS, me)))


def _within(seconds: float, limit: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with bounded(seconds, limit):
        return fn(*args, **kwargs)


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Offload] = weakref.WeakKeyDictionary()


def on_loop() -> Offload:
    """The running event loop's :class:`Offload` (made on first use, default shares)."""
    loop = asyncio.get_running_loop()
    found = _LOOPS.get(loop)
    if found is None:
        found = _LOOPS[loop] = Offload(name="actor-checks")
    return found


async def offloaded(
    tenant: str,
    seconds: float,
    limit: str,
    fn: Callable[P, T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """:meth:`Offload.runs` on the running loop's :class:`Offload` (see :func:`on_loop`).

    For work a running job needs: it waits its tenant's turn, and is never refused.
    """
    return await on_loop().runs(tenant, seconds, limit, fn, *args, **kwargs)
