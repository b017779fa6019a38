"""Budgets: reserved before a model call, settled after it.

A reservation holds the most a call can cost (its prompt estimate plus its ``max_tokens``)
against every budget it falls under (its job's and its tenant's). A call that would not fit
is refused with ``BudgetExceeded`` before anything is spent. Reservation and check happen
without an ``await`` in between, so concurrent calls in one event loop can never overbook.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocols import Budget, BudgetExceeded, Usage

__all__ = ["Ledger", "Reservation", "Spend"]


@dataclass
class Spend:
    """Tokens and dollars, spent or held."""

    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class Reservation:
    """What one call holds, and against which budgets."""

    id: int
    keys: tuple[str, ...]
    tokens: int
    usd: float


@dataclass
class _Account:
    limit: Budget
    spent: Spend = field(default_factory=Spend)
    held: Spend = field(default_factory=Spend)


class Ledger:
    """Accounts by key (``job:<id>``, ``tenant:<name>``), each with an optional limit."""

    def __init__(self, tenant_budgets: Mapping[str, Budget] | None = None) -> None:
        self._accounts: dict[str, _Account] = {
            f"tenant:{t}": _Account(b) for t, b in (tenant_budgets or {}).items()
        }
        self._ids = itertools.count(1)
        self._open: dict[int, Reservation] = {}

    def set_limit(self, key: str, budget: Budget) -> None:
        """Set (or replace) the limit of ``key``; what it spent so far stays."""
        account = self._accounts.get(key)
        if account is None:
            self._accounts[key] = _Account(budget)
        else:
            account.limit = budget

    def reserve(self, keys: tuple[str, ...], tokens: int, usd: float) -> Reservation:
        """Hold ``tokens`` and ``usd`` on every account in ``keys`` that exists.

        Raises:
            BudgetExceeded: one of them would go over its limit; nothing is held.
        """
        accounts = [(k, self._accounts[k]) for k in keys if k in self._accounts]
        for key, account in accounts:
            limit, spent, held = account.limit, account.spent, account.held
            if limit.tokens is not None and spent.tokens + held.tokens + tokens > limit.tokens:
                raise BudgetExceeded(
                    f"{key} token budget: {spent.tokens} spent + {held.tokens} held + "
                    f"{tokens} needed > {limit.tokens}",
                    account=key,
                    limit_tokens=limit.tokens,
                    spent_tokens=spent.tokens,
                )
            if limit.usd is not None and spent.usd + held.usd + usd > limit.usd + 1e-12:
                raise BudgetExceeded(
                    f"{key} budget: ${spent.usd:.6f} spent + ${held.usd:.6f} held + "
                    f"${usd:.6f} needed > ${limit.usd:.6f}",
                    account=key,
                    limit_usd=limit.usd,
                    spent_usd=spent.usd,
                )
        for _, account in accounts:
            account.held.tokens += tokens
            account.held.usd += usd
        reservation = Reservation(next(self._ids), tuple(k for k, _ in accounts), tokens, usd)
        self._open[reservation.id] = reservation
        return reservation

    def settle(self, reservation: Reservation, usage: Usage | None) -> None:
        """Release the hold and book what the call really cost (``None``: it cost nothing)."""
        if self._open.pop(reservation.id, None) is None:
            return
        for key in reservation.keys:
            account = self._accounts[key]
            account.held.tokens -= reservation.tokens
            account.held.usd -= reservation.usd
            if usage is not None:
                account.spent.tokens += usage.total_tokens
                account.spent.usd += usage.cost_usd

    def has_limit(self, key: str) -> bool:
        """True if ``key`` has an account (a budget)."""
        return key in self._accounts

    def spent(self, key: str) -> Spend:
        """What ``key`` has spent (zero for an account without a limit)."""
        account = self._accounts.get(key)
        return Spend(account.spent.tokens, account.spent.usd) if account else Spend()

    def held(self, key: str) -> Spend:
        """What ``key`` holds for calls in flight."""
        account = self._accounts.get(key)
        return Spend(account.held.tokens, account.held.usd) if account else Spend()
