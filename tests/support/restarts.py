"""Calling an actor that was just killed and is coming back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ray.exceptions import RayActorError


def after_restart(make_call: Callable[[], Any], within_s: float = 60.0) -> Any:
    """The result of ``make_call()`` (a Ray call), made again until its actor is back.

    Right after a kill, a call may find the actor dead (before Ray notices the restart) or
    restarting; both are retried, with a growing pause, for ``within_s`` at most.
    """

    async def call() -> Any:
        deadline, pause = time.monotonic() + within_s, 0.05
        while True:
            try:
                return await make_call()
            except RayActorError:
                if time.monotonic() + pause > deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    return asyncio.run(call())
