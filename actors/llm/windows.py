"""The spend windows a model call falls under, and the alerts its cost fires.

:class:`SpendWindows` turns ``LLMConfig.spend_limits`` (:mod:`raytroupe.protocols.spend`)
into the ledger's window accounts for one call (its tenant's limits, and its agent's), at
the time it is made; after the call is settled, :meth:`SpendWindows.crossed` reads each
window's spend and names the alert thresholds it has crossed for the first time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

from raytroupe.actors.llm.budget import Ledger, WindowAccount
from raytroupe.protocols import Budget, Spend
from raytroupe.protocols.policy import unscoped
from raytroupe.protocols.spend import SpendAlert, SpendLimit, SpendWindowView, window_id

__all__ = ["SpendWindows", "Windowed"]

_HOUR_S: Final = 3600

Windowed = tuple[str, SpendLimit, WindowAccount]
"""A limit's name, the limit, and its window's account for one call."""


class SpendWindows:
    """The configured spend limits, as window accounts of the ledger (see the module)."""

    def __init__(
        self, limits: Mapping[str, SpendLimit], wall: Callable[[], float] = time.time
    ) -> None:
        self._by_tenant: dict[str, list[tuple[str, SpendLimit]]] = {}
        self._wall = wall
        self.replace(limits)

    def replace(self, limits: Mapping[str, SpendLimit]) -> None:
        """Hold ``limits`` from now on (the next call's windows are theirs)."""
        by_tenant: dict[str, list[tuple[str, SpendLimit]]] = {}
        for name, limit in limits.items():
            by_tenant.setdefault(limit.tenant, []).append((name, limit))
        self._by_tenant = by_tenant

    def accounts(
        self,
        tenant: str,
        agent: str,
        user: str | None = None,
        *,
        key: str | None = None,
        team: str | None = None,
    ) -> list[Windowed]:
        """The windows a call of ``tenant``'s ``agent`` (for ``user``) falls under, now.

        An agent limit names the agent as the tenant wrote it: a registered agent's name, or
        an inline team's (whose actor name carries the tenant's scope); a key limit, the API
        key that submitted the call's job; a team limit, the job's team. An each-user limit
        has an account per user (a call without a user is not under it).
        """
        now = self._wall()
        found: list[Windowed] = []
        written = unscoped(agent, tenant)
        for name, limit in self._by_tenant.get(tenant, ()):
            if limit.agent is not None and limit.agent != written:
                continue
            if (limit.key is not None and limit.key != key) or (
                limit.team is not None and limit.team != team
            ):
                continue
            if limit.each_user and user is None:
                continue
            # the window's suffix is last and has no '@': keys are distinct for any user
            owner = f"spend:{name}/{user}" if limit.each_user else f"spend:{name}"
            # rolling: this hour's account, and the ones before it
            *before, current = (f"{owner}@{period}" for period in _periods(limit, now))
            budget = Budget(tokens=limit.tokens, usd=limit.usd) if limit.hard else None
            found.append((name, limit, WindowAccount(current, budget, tuple(before))))
        return found

    def report(self, ledger: Ledger, tenant: str | None = None) -> list[SpendWindowView]:
        """Each limit of ``tenant`` (None: every tenant's) with what its window spent so far.

        An each-user limit is listed once per end user with spend in the current window.
        """
        now = self._wall()
        views: list[SpendWindowView] = []
        for owner_tenant, named in sorted(self._by_tenant.items()):
            if tenant is not None and owner_tenant != tenant:
                continue
            for name, limit in sorted(named, key=lambda pair: pair[0]):
                periods = _periods(limit, now)
                owner = f"spend:{name}"
                if not limit.each_user:
                    spent = ledger.total(f"{owner}@{period}" for period in periods)
                    views.append(_view(name, limit, periods[-1], None, spent))
                    continue
                by_user: dict[str, Spend] = {}
                for key, spent in ledger.spent_under(owner + "/").items():
                    user, _, period = key[len(owner) + 1 :].rpartition("@")
                    if period in periods:
                        was = by_user.get(user, Spend())
                        by_user[user] = Spend(was.tokens + spent.tokens, was.usd + spent.usd)
                views.extend(
                    _view(name, limit, periods[-1], user, spent)
                    for user, spent in sorted(by_user.items())
                )
        return views

    @staticmethod
    def crossed(ledger: Ledger, windows: list[Windowed]) -> list[SpendAlert]:
        """The thresholds the windows' spend has crossed, each named once (by any replica)."""
        alerts: list[SpendAlert] = []
        for name, limit, account in windows:
            if not limit.alert_at:
                continue
            spent = ledger.total((account.key, *account.earlier))
            for measure, allowed, used in (
                ("tokens", limit.tokens, float(spent.tokens)),
                ("usd", limit.usd, spent.usd),
            ):
                if allowed is None or allowed <= 0:
                    continue
                for threshold in sorted(limit.alert_at):
                    if used < threshold * allowed - 1e-12:
                        break
                    if not ledger.first_alert(f"{account.key}:{measure}", threshold):
                        continue
                    alerts.append(
                        SpendAlert(
                            limit=name,
                            tenant=limit.tenant,
                            agent=limit.agent,
                            key=limit.key,
                            team=limit.team,
                            user=_user_of(account.key) if limit.each_user else None,
                            window=account.key.rsplit("@", 1)[1],
                            threshold=threshold,
                            measure="tokens" if measure == "tokens" else "usd",
                            spent=used,
                            allowed=float(allowed),
                            hard=limit.hard,
                        )
                    )
        return alerts


def _user_of(key: str) -> str:
    """The user of an each-user window's account key (``spend:<limit>/<user>@<window>``)."""
    return key.rsplit("@", 1)[0].split("/", 1)[1]


def _periods(limit: SpendLimit, now: float) -> tuple[str, ...]:
    """The account suffixes of ``limit``'s window at ``now``, the current one last."""
    if limit.hours is None:
        return (window_id(limit, now),)
    hour = int(now // _HOUR_S)
    return tuple(f"h{h}" for h in range(hour - limit.hours + 1, hour + 1))


def _view(
    name: str, limit: SpendLimit, period: str, user: str | None, spent: Spend
) -> SpendWindowView:
    return SpendWindowView(
        limit=name, tenant=limit.tenant, agent=limit.agent, key=limit.key, team=limit.team,
        user=user, window=limit.window,
        hours=limit.hours, period=period, tokens=spent.tokens, usd=spent.usd,
        tokens_limit=limit.tokens, usd_limit=limit.usd, alert_at=limit.alert_at, hard=limit.hard,
    )  # fmt: skip
