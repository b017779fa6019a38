"""Schedules: a tenant's job submitted at the times a cron expression names.

A schedule is its tenant's (an admin key's too): another tenant's is ``ScheduleNotFound``, as
if there were none. Each firing submits its job as the tenant (its policy, budgets and rate
limits; never as an admin), once per firing however many desks run; see
:mod:`raytroupe.protocols.schedules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from raytroupe.protocols.schedules import ScheduleInfo, ScheduleName, ScheduleSpec
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = ["delete_schedule", "put_schedule", "schedule", "schedules"]

TAG: Final = "schedules"


@operation("PUT", "/v1/schedules/{name}", cli="schedules set", status=201)
async def put_schedule(
    at: At, name: ScheduleName, schedule: ScheduleSpec | Mapping[str, Any]
) -> ScheduleInfo:
    """Make or replace a schedule of the caller's tenant; it, with when it fires next.

    ``cron`` has five fields (minute hour day-of-month month day-of-week) or six with seconds
    first, read in ``timezone``; firings are at least 5 s apart. Each submits the job it
    names (``task``, ``team`` or ``skill``, ``input``, ``budget``) as the tenant's.

    Raises:
        QuotaExceeded: the tenant holds as many schedules as it may.
    """
    spec = given(ScheduleSpec, schedule)
    info, created = await at.system.put_schedule(at.tenant, name, spec)
    at.reply.created = created
    return info


@operation("GET", "/v1/schedules", cli="schedules list")
async def schedules(at: At) -> list[ScheduleInfo]:
    """The tenant's schedules, by name (without their firings)."""
    return await at.system.schedules(at.tenant)


@operation("GET", "/v1/schedules/{name}", cli="schedules show")
async def schedule(at: At, name: ScheduleName) -> ScheduleInfo:
    """The tenant's schedule, with its latest firings (the job each submitted, or why not).

    Raises:
        ScheduleNotFound: the tenant has no schedule of that name.
    """
    return await at.system.schedule(at.tenant, name)


@operation("DELETE", "/v1/schedules/{name}", cli="schedules delete")
async def delete_schedule(at: At, name: ScheduleName) -> ScheduleInfo:
    """Stop and drop the tenant's schedule (the jobs it submitted stay).

    Raises:
        ScheduleNotFound: the tenant has no schedule of that name.
    """
    return await at.system.delete_schedule(at.tenant, name)
