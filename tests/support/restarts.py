"""Calling an actor that was just killed and is coming back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from actors._ray_client import through_restarts


def after_restart(make_call: Callable[[], Any], within_s: float = 60.0) -> Any:
    """The result of ``make_call()`` (a Ray call), made again while its actor restarts."""

    async def call() -> Any:
        return await make_call()

    return asyncio.run(through_restarts(call, within_s=within_s))
