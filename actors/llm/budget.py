"""Budgets: reserved before a model call, settled after it, and kept across restarts.

A reservation holds the most a call can cost (its prompt estimate plus its ``max_tokens``)
against every account it falls under (its job's and its tenant's). A call that would not fit
an account's limit is refused with ``BudgetExceeded`` before anything is spent. Reservation
and check happen without an ``await`` in between, so concurrent calls in one event loop can
never overbook.

With a :class:`LedgerStore` every hold and every settlement is written before the call goes
on, so a restarted pool starts from what was spent, not from zero: holds still open when the
pool died are booked as spent in full (the provider may have billed the call), so a restart
can only make a budget stricter, never let it be overspent.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from protocols import Budget, BudgetExceeded, Usage

__all__ = ["Ledger", "LedgerStore", "Reservation", "Spend"]


@dataclass
class Spend:
    """Tokens and dollars, spent or held."""

    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class Reservation:
    """What one call holds, and against which accounts."""

    id: str
    keys: tuple[str, ...]
    tokens: int
    usd: float


class LedgerStore(Protocol):
    """Where a :class:`Ledger` keeps what was spent and what is held."""

    def spent(self) -> dict[str, Spend]:
        """What every account has spent, open holds booked as spent (and then closed)."""
        ...

    def hold(self, reservation: Reservation) -> None:
        """Record a hold before its call is made."""
        ...

    def settle(self, reservation: Reservation, tokens: int, usd: float) -> None:
        """Close a hold and add what its call cost to each of its accounts, atomically."""
        ...


@dataclass
class _Account:
    limit: Budget | None = None
    spent: Spend = field(default_factory=Spend)
    held: Spend = field(default_factory=Spend)


class Ledger:
    """Accounts by key (``job:<id>``, ``tenant:<name>``), each with an optional limit.

    Every account a call falls under records its spend, limited or not, so that a limit set
    later (a job's budget arriving with its first call) counts what was spent before.
    """

    def __init__(
        self, tenant_budgets: Mapping[str, Budget] | None = None, store: LedgerStore | None = None
    ) -> None:
        self._store = store
        self._accounts: dict[str, _Account] = {
            key: _Account(spent=spend) for key, spend in (store.spent() if store else {}).items()
        }
        for tenant, budget in (tenant_budgets or {}).items():
            self.set_limit(f"tenant:{tenant}", budget)
        self._open: dict[str, Reservation] = {}

    def attach(self, store: LedgerStore) -> None:
        """Keep the ledger in ``store`` from now on, adding what it holds as spent."""
        for key, spend in store.spent().items():
            account = self._accounts.setdefault(key, _Account())
            account.spent.tokens += spend.tokens
            account.spent.usd += spend.usd
        self._store = store

    def set_limit(self, key: str, budget: Budget) -> None:
        """Set (or replace) the limit of ``key``; what it spent so far stays."""
        self._accounts.setdefault(key, _Account()).limit = budget

    def reserve(self, keys: Iterable[str], tokens: int, usd: float) -> Reservation:
        """Hold ``tokens`` and ``usd`` on every account in ``keys``.

        Raises:
            BudgetExceeded: one of them would go over its limit; nothing is held.
        """
        accounts = [(k, self._accounts.setdefault(k, _Account())) for k in dict.fromkeys(keys)]
        for key, account in accounts:
            _check(key, account, tokens, usd)
        reservation = Reservation(uuid.uuid4().hex, tuple(k for k, _ in accounts), tokens, usd)
        if self._store is not None:
            self._store.hold(reservation)  # before the call: a crash from here on counts it
        for _, account in accounts:
            account.held.tokens += tokens
            account.held.usd += usd
        self._open[reservation.id] = reservation
        return reservation

    def settle(self, reservation: Reservation, usage: Usage | None) -> None:
        """Release the hold and book what the call really cost (``None``: it cost nothing)."""
        if self._open.pop(reservation.id, None) is None:
            return
        tokens = 0 if usage is None else usage.total_tokens
        usd = 0.0 if usage is None else usage.cost_usd
        if self._store is not None:
            self._store.settle(reservation, tokens, usd)
        for key in reservation.keys:
            account = self._accounts[key]
            account.held.tokens -= reservation.tokens
            account.held.usd -= reservation.usd
            account.spent.tokens += tokens
            account.spent.usd += usd

    def has_limit(self, key: str) -> bool:
        """True if ``key`` has a limit (a budget)."""
        account = self._accounts.get(key)
        return account is not None and account.limit is not None

    def limits_usd(self, keys: Iterable[str]) -> bool:
        """True if one of ``keys`` has a limit in dollars."""
        return any(
            (account := self._accounts.get(k)) is not None
            and account.limit is not None
            and account.limit.usd is not None
            for k in keys
        )

    def spent(self, key: str) -> Spend:
        """What ``key`` has spent."""
        account = self._accounts.get(key)
        return Spend(account.spent.tokens, account.spent.usd) if account else Spend()

    def held(self, key: str) -> Spend:
        """What ``key`` holds for calls in flight."""
        account = self._accounts.get(key)
        return Spend(account.held.tokens, account.held.usd) if account else Spend()


def _check(key: str, account: _Account, tokens: int, usd: float) -> None:
    limit, spent, held = account.limit, account.spent, account.held
    if limit is None:
        return
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
