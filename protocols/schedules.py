"""Schedules: a tenant's job submitted again and again, at the times a cron expression names.

A schedule belongs to one tenant; each firing submits its job as that tenant (under its
policy, budgets and rate limits, as a tenant's key would: never as an admin). Firings are
claimed in the state store, once each, so two desks (or a restarted one) never fire one
twice; a desk that was down fires a missed time once when it is back, not once per miss.
"""

from __future__ import annotations

import datetime
import itertools
from typing import Annotated, Any, Final, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from raytroupe.protocols.llm import Budget

__all__ = [
    "MIN_INTERVAL_S",
    "SCHEDULE_NAME",
    "ScheduleInfo",
    "ScheduleName",
    "ScheduleRun",
    "ScheduleSpec",
    "next_firing",
]

SCHEDULE_NAME: Final = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
MIN_INTERVAL_S: Final = 5
"""The least time between two firings of a schedule (cron's seconds field could say 1)."""
_CHECKED_FIRINGS: Final = 64

ScheduleName = Annotated[str, StringConstraints(pattern=SCHEDULE_NAME)]


def _zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        said = f"{name!r} is not a time zone (an IANA name: 'Europe/Paris', 'UTC')"
        raise ValueError(said) from None
    return name


def next_firing(cron: str, zone: str, after: float) -> float:
    """The first time ``cron`` names in ``zone`` strictly after ``after`` (UNIX seconds)."""
    start = datetime.datetime.fromtimestamp(after, tz=ZoneInfo(zone))
    return next(CronSim(cron, start)).timestamp()


def _cron(expression: str) -> str:
    expression = " ".join(expression.split())
    if len(expression.split()) not in (5, 6):
        raise ValueError("a cron expression has 5 fields (minute hour day month weekday), or 6 "
                         "with seconds first")  # fmt: skip
    try:
        firings = CronSim(expression, datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
        times = [next(firings) for _ in range(_CHECKED_FIRINGS)]
    except (CronSimError, StopIteration) as exc:
        raise ValueError(f"not a cron expression: {exc or 'it never fires'}") from None
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    if gaps and min(gaps) < MIN_INTERVAL_S:
        raise ValueError(f"a schedule fires at most every {MIN_INTERVAL_S} s")
    return expression


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("no NUL characters (U+0000)")
    return text


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ScheduleSpec(_Data):
    """When to fire, and the job each firing submits."""

    cron: Annotated[str, StringConstraints(max_length=200), AfterValidator(_cron)] = Field(
        description="Five cron fields (minute hour day-of-month month day-of-week), or six "
        "with seconds first; at least 5 s apart.",
    )
    timezone: Annotated[str, AfterValidator(_zone)] = Field(
        default="UTC", description="The IANA time zone the fields are read in."
    )
    task: Annotated[str, StringConstraints(max_length=200_000), AfterValidator(_no_nul)] = ""
    team: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None, description="A registered team's name (neither: routed, as a job is)."
    )
    skill: Annotated[str, StringConstraints(min_length=1, max_length=81)] | None = Field(
        default=None, description="A skill to run: 'name[@version]'."
    )
    input: Any = Field(default=None, description="A skill's structured input.")
    budget: Budget | None = None
    enabled: bool = Field(default=True, description="A disabled schedule does not fire.")
    description: Annotated[str, StringConstraints(max_length=200)] = ""

    @model_validator(mode="after")
    def _asks(self) -> Self:
        """A job needs a task, or an input."""
        if not self.task.strip() and self.input is None:
            raise ValueError("a schedule's job needs a task (or, for a skill, an input)")
        return self


class ScheduleRun(_Data):
    """One firing: when it was due, and the job it submitted or why it could not."""

    fire_at: float = Field(description="The time the expression named (UNIX seconds).")
    job_id: str | None = None
    error: str | None = Field(default=None, description="Why no job was submitted.")


class ScheduleInfo(_Data):
    """A schedule as kept, with when it fires next and its latest firings."""

    name: str
    tenant: str
    spec: ScheduleSpec
    next_at: float | None = Field(description="When it fires next (None: disabled).")
    created_at: float
    updated_at: float
    fired: int = Field(default=0, description="How many times it has fired.")
    runs: tuple[ScheduleRun, ...] = Field(
        default=(), description="Its latest firings, newest first (empty in listings)."
    )
