"""Awaiting a system actor's remote call: where a Ray failure becomes a raytroupe error."""

from __future__ import annotations

from typing import Any

from ray.exceptions import RayActorError, RayTaskError

from raytroupe.actors.spawn import unwrap
from raytroupe.protocols import RecipientUnavailable

__all__ = ["call"]


async def call(ref: Any) -> Any:
    """Await a remote call of a system actor (each caller says what it returns).

    Raises:
        TroupeError: what the actor raised.
        RecipientUnavailable: the actor died or is restarting (the caller may retry).
    """
    try:
        return await ref
    except RayTaskError as exc:
        raise unwrap(exc) from None
    except RayActorError as exc:
        raise RecipientUnavailable(f"a system actor is unavailable: {exc}") from None
