"""Blocking calls into the async client: its coroutines run on one loop in a background thread.

The driver API is synchronous, and may be used where an event loop already runs (a notebook,
an async web server): each call is handed to the portal's own loop and waited for, so one
async client serves both worlds and owns every mapping of Ray failures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Portal"]

T = TypeVar("T")


class Portal:
    """An event loop in a daemon thread, and a way to run a coroutine on it and wait."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="troupe-client", daemon=True
        )
        self._thread.start()
        self._closed = False

    def run(self, call: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``call`` on the portal's loop and return its result (or raise its error).

        Raises:
            TimeoutError: ``timeout`` seconds passed first (the call is cancelled).
            RuntimeError: the portal is closed (nothing would run it).
        """
        if self._closed:
            call.close()
            raise RuntimeError("the runtime has shut down: its calls cannot run")
        future = asyncio.run_coroutine_threadsafe(call, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    async def arun(self, call: Coroutine[Any, Any, T]) -> T:
        """Await ``call`` from any event loop: it runs on the portal's loop, like :meth:`run`.

        The client's state lives on the portal's loop; a caller's loop only waits for it.
        """
        if asyncio.get_running_loop() is self._loop:
            return await call
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    def close(self) -> None:
        """Stop the loop and its thread."""
        self._closed = True
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
