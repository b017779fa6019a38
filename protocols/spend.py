"""Spend windows: limits on what a tenant (or one of its agents) spends per day, month or hours.

A job's budget and a tenant's ``tenant_budgets`` are lifetime accounts. An operator running a
shared service limits spend per period too: ``LLMConfig.spend_limits`` names limits, each on
a tenant (or, of a tenant, one agent, API key or team, or each end user) over a window. A
window is an account of the budget ledger whose key names the period
(``spend:<limit>@d2026-12-07``; an each-user limit's names the user too:
``spend:<limit>/<user>@d2026-12-07``): held before each call
and settled after it in the same transaction as the call's other accounts, so it is durable
across restarts and shared by every pool replica, as the ledger is. A rolling window of
``hours`` is the sum of hourly accounts, checked in one transaction.

Past a ``hard`` limit, a call is refused (``BudgetExceeded`` naming the window's account)
before the provider is called. Each ``alert_at`` fraction of the limit, once crossed, fires
one alert per window and threshold, whichever replica books it: a ``spend_alert`` event of
the job whose call crossed it (webhooks hear it), a log line and the
``troupe_spend_alerts`` metric.
"""

from __future__ import annotations

import time
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.addresses import Name

__all__ = [
    "MAX_RATE_LIMITS",
    "MAX_SPEND_LIMITS",
    "AgentRateLimit",
    "SpendAlert",
    "SpendLimit",
    "SpendLimitInfo",
    "SpendWindow",
    "SpendWindowView",
    "window_id",
]

SpendWindow = Literal["lifetime", "day", "month", "rolling"]
"""A limit's period: ever, the UTC calendar day or month, or the last ``hours`` hours."""

MAX_SPEND_LIMITS: Final = 256
"""Spend limits a configuration may name."""
MAX_RATE_LIMITS: Final = 256
"""Agent rate limits a configuration may name."""

_HOUR_S: Final = 3600


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


Fraction = Annotated[float, Field(gt=0.0, le=1.0)]


class SpendLimit(_Frozen):
    """What one tenant (or one agent of it) may spend over a window, and when to say so."""

    tenant: str = Field(min_length=1, max_length=100, description="The tenant it limits.")
    agent: Name | None = Field(
        default=None,
        description="Only this agent's calls (its name, as `troupe agents` lists it); "
        "default: every call of the tenant.",
    )
    key: str | None = Field(
        default=None,
        max_length=128,
        description="Only the calls of jobs this API key submitted (its name in the API "
        "config's `keys`); default: every key's.",
    )
    team: str | None = Field(
        default=None,
        max_length=256,
        description="Only the calls of this team's jobs (its name, as the tenant wrote it); "
        "default: every team's.",
    )
    each_user: bool = Field(
        default=False,
        description="Each end user of the tenant on its own account (the job's `user`); a "
        "call of a job without a user is not under it.",
    )
    window: SpendWindow = Field(default="day", description="The period it counts over (UTC).")
    hours: int | None = Field(
        default=None, ge=1, le=24 * 31, description="A rolling window's length (rolling only)."
    )
    tokens: int | None = Field(default=None, ge=0, description="Tokens in the window.")
    usd: float | None = Field(default=None, ge=0.0, description="US dollars in the window.")
    alert_at: tuple[Fraction, ...] = Field(
        default=(0.8,),
        max_length=8,
        description="Fractions of the limit whose crossing fires an alert, once per window.",
    )
    hard: bool = Field(
        default=True,
        description="Refuse a call that would go past the limit (false: alerts only).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SpendLimit:
        if self.tokens is None and self.usd is None:
            raise ValueError("a spend limit needs tokens, usd or both")
        if (self.window == "rolling") != (self.hours is not None):
            raise ValueError("hours is set for a rolling window, and only for one")
        return self


def window_id(limit: SpendLimit, now: float) -> str:
    """The period of ``limit`` that ``now`` (epoch seconds) falls in, as an account suffix.

    ``life``, ``d2026-12-07``, ``m2026-12``, or the hour's number since the epoch for a
    rolling window (``h493231``: its accounts are hourly).
    """
    match limit.window:
        case "lifetime":
            return "life"
        case "day":
            return "d" + time.strftime("%Y-%m-%d", time.gmtime(now))
        case "month":
            return "m" + time.strftime("%Y-%m", time.gmtime(now))
        case "rolling":
            return f"h{int(now // _HOUR_S)}"


class AgentRateLimit(_Frozen):
    """How many model calls a minute a tenant's agents may make, each on its own.

    Calls over the rate wait their turn (paced evenly, as a deployment's ``rpm``), they are
    not refused: the job's cancel stops a waiting call, its deadline bounds how long its agent
    waits. Each pool replica paces its share of the rate, so that together the replicas stay
    within it.
    """

    tenant: str = Field(min_length=1, max_length=100, description="The tenant it limits.")
    agent: Name | None = Field(
        default=None,
        description="Only this agent (its name as the tenant wrote it); default: each agent "
        "of the tenant, each at this rate.",
    )
    rpm: int = Field(ge=1, le=100_000, description="Model calls a minute.")


class SpendAlert(_Frozen):
    """A window's spend crossed one of its limit's ``alert_at`` fractions (fired once)."""

    kind: Literal["spend_alert"] = "spend_alert"
    limit: Name = Field(description="The spend limit's name (its key in `spend_limits`).")
    tenant: str
    agent: str | None = None
    key: str | None = Field(default=None, description="The API key it limits, if one.")
    team: str | None = Field(default=None, description="The team it limits, if one.")
    user: str | None = Field(default=None, description="The end user, for an each-user limit.")
    window: str = Field(description="The period: `life`, `d<date>`, `m<month>`, `h<hour>`.")
    threshold: float = Field(description="The fraction of the limit crossed.")
    measure: Literal["tokens", "usd"]
    spent: float = Field(description="What the window had spent when it was crossed.")
    allowed: float = Field(description="The limit, in the same measure.")
    hard: bool = Field(description="Whether the limit refuses calls past it.")


class SpendWindowView(_Frozen):
    """A spend limit's current window and what it has spent so far (``GET /v1/spend-windows``).

    An each-user limit has one view per end user who spent in the window.
    """

    limit: Name = Field(description="The spend limit's name (its key in `spend_limits`).")
    tenant: str
    agent: str | None = Field(default=None, description="The one agent it limits, if any.")
    key: str | None = Field(default=None, description="The one API key it limits, if any.")
    team: str | None = Field(default=None, description="The one team it limits, if any.")
    user: str | None = Field(default=None, description="The end user, for an each-user limit.")
    window: SpendWindow
    hours: int | None = Field(default=None, description="A rolling window's length.")
    period: str = Field(
        description="The current period: `life`, `d<date>`, `m<month>`, or (rolling) this "
        "hour's `h<hour>`."
    )
    tokens: int = Field(description="Tokens spent in the window (every replica's).")
    usd: float = Field(description="US dollars spent in the window.")
    tokens_limit: int | None = Field(description="The limit in tokens; null: not limited.")
    usd_limit: float | None = Field(description="The limit in US dollars; null: not limited.")
    alert_at: tuple[float, ...]
    hard: bool = Field(description="Whether the limit refuses calls past it.")


class SpendLimitInfo(_Frozen):
    """A spend limit in force: the operator's configuration's, or one an admin set at run time."""

    name: Name = Field(description="Its name (a configured one's key in `spend_limits`).")
    limit: SpendLimit
    source: Literal["config", "set"] = Field(
        description="`config`: the operator's `spend_limits` (changed there only); `set`: "
        "put at run time (`PUT /v1/spend-limits/{name}`), kept in the pool's state."
    )
    set_by: str | None = Field(default=None, description="Who set it (a key's name, `driver`).")
    set_at: float | None = Field(default=None, description="When it was set (UNIX time).")
