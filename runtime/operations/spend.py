"""Spend limits: where each window stands; and the limits an admin sets at run time.

Limits on spend per window are the operator's (``LLMConfig.spend_limits``) or set by an admin
while the cluster runs (:mod:`raytroupe.actors.llm.set_limits`); both bind the next model call
of every pool replica. See :mod:`raytroupe.protocols.spend`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.spend import SpendLimit, SpendLimitInfo, SpendWindowView
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = ["delete_spend_limit", "put_spend_limit", "spend_limits", "spend_windows"]

TAG: Final = "operations"


@operation("GET", "/v1/spend-windows", cli="spend windows")
async def spend_windows(at: At) -> list[SpendWindowView]:
    """The spend limits on the caller's tenant (an admin's: every tenant's), with their spend.

    Each is the limit's current window (today, this month, the last ``hours`` hours, ever)
    and what every pool replica booked in it so far; an each-user limit is listed once per
    end user who spent in the window.
    """
    return await at.system.spend_windows(at.scope)


@operation("GET", "/v1/spend-limits", cli="spend limits", admin=True)
async def spend_limits(at: At) -> list[SpendLimitInfo]:
    """Every spend limit in force: the operator's configured ones, then those set at run time."""
    return await at.system.spend_limits()


@operation("PUT", "/v1/spend-limits/{name}", cli="spend set", admin=True)
async def put_spend_limit(
    at: At, name: Name, limit: SpendLimit | Mapping[str, Any]
) -> SpendLimitInfo:
    """Set (or change) the spend limit ``name`` now: every pool replica's next call is under it.

    It is kept in the pool's state (a restart keeps it). What its window's calls spent
    before it was set under the same name counts; a new name starts at nothing.

    Raises:
        Conflict: ``name`` is a configured limit's (it changes in the configuration only).
        QuotaExceeded: 256 limits are set already.
    """
    return await at.system.put_spend_limit(name, given(SpendLimit, limit), by=at.name)


@operation("DELETE", "/v1/spend-limits/{name}", cli="spend delete", admin=True)
async def delete_spend_limit(at: At, name: Name) -> SpendLimitInfo:
    """Drop the spend limit ``name`` set at run time; what it was.

    Raises:
        Conflict: ``name`` is a configured limit's.
        SpendLimitNotFound: no limit of that name was set.
    """
    return await at.system.delete_spend_limit(name)
