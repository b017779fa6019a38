"""Budgets: reserved before a model call, settled after it, and kept across restarts.

A reservation holds the most a call can cost (its prompt estimate plus its ``max_tokens``)
against every account it falls under (its job's and its tenant's). A call that would not fit
an account's limit is refused with ``BudgetExceeded`` before anything is spent.

Without a store (one pool, nothing kept), the check and the hold happen in memory without an
``await`` in between, so concurrent calls in one event loop can never overbook. With a
:class:`LedgerStore` the store checks and holds, atomically, so that every replica of the
pool shares one ledger: however many reserve at once, a limit holds. Every hold is written
before its call goes on, so a restarted replica starts from what was spent, not from zero:
holds still open when it died are booked as spent in full (the provider may have billed the
call), so such a restart can only make a budget stricter.

A kept call (one named by its place in a job's run, see :mod:`raytroupe.actors.llm.replay`)
is the exception: it will be asked again at the same place, and booking its hold in full
while the call made again holds as much once more would end a job over budget because its
pool moved. Its hold stays held, orphaned, until the call made again at its place takes it
over (in the transaction that takes that call's own hold); when that call settles, the
orphaned call is booked at what the new one cost (the same request), at most what its hold
kept back, and in full if the new call fails. An orphaned hold nobody takes over within
:data:`ORPHANS_WAIT_S` is booked in full. The one estimate: an orphaned call that cost more
than the call made in its place is booked at the lower cost.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from raytroupe.protocols import Budget, BudgetExceeded, LLMResponse, Spend, Usage

__all__ = [
    "ALERTS_KNOWN",
    "ORPHANS_WAIT_S",
    "TURNS_KEPT",
    "KeptCall",
    "Ledger",
    "LedgerStore",
    "Reservation",
    "Spend",
    "WindowAccount",
    "over_limit",
]

TURNS_KEPT: Final = 10_000
"""Answers a ledger without a store keeps for replay (the oldest go first)."""

ALERTS_KNOWN: Final = 10_000
"""Crossed alert thresholds a ledger remembers, so as not to ask its store again."""

ORPHANS_WAIT_S: Final = 600.0
"""How long the hold of a kept call whose replica died waits for the call to be made again
at its place before it is booked in full (its job failed, or went another way)."""


@dataclass(frozen=True)
class Reservation:
    """What one call holds, and against which accounts."""

    id: str
    keys: tuple[str, ...]
    tokens: int
    usd: float
    turn: str | None = None
    """The kept call's name (``replay.turn_key``), if it is one."""


@dataclass(frozen=True)
class WindowAccount:
    """A spend window's account a call falls under (:mod:`raytroupe.protocols.spend`).

    ``earlier``: the accounts counted with it against its limit (a rolling window's earlier
    hours); their spend only shrinks while this call is held (their holds settle at most
    at what they held), so a check that reads them before the hold is never too lenient.
    """

    key: str
    limit: Budget | None
    earlier: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeptCall:
    """A call's answer, kept with its cost so that the call is never billed twice.

    ``key`` names the call: its tenant, job, place in the run and request
    (:func:`raytroupe.actors.llm.replay.turn_key`).
    """

    key: str
    job_id: str
    answer: LLMResponse


class LedgerStore(Protocol):
    """Where a :class:`Ledger` keeps what was spent and what is held (shared by replicas)."""

    def account(self, key: str) -> tuple[Spend, Spend]:
        """What ``key`` has spent, and what open holds keep back on it."""
        ...

    def hold(
        self,
        reservation: Reservation,
        limits: Mapping[str, Budget | None],
        earlier: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        """Hold ``reservation`` on each of its accounts if it fits that account's limit.

        ``earlier``: per account, the accounts whose spend and holds count with its own
        against its limit (a rolling window's earlier hours). A kept call takes over the
        holds left by replicas that died making it.

        Raises:
            BudgetExceeded: one of them would go over its limit; nothing is held.
        """
        ...

    def settle(
        self, reservation: Reservation, tokens: int, usd: float, turn: KeptCall | None = None
    ) -> None:
        """Close a hold and add what its call cost to each of its accounts, atomically.

        With ``turn``, keep the call's answer in the same transaction: a call is billed if
        and only if its answer is kept.
        """
        ...

    def turn(self, key: str) -> LLMResponse | None:
        """The answer kept for the call ``key``, if it was made."""
        ...

    def total(self, keys: Iterable[str]) -> Spend:
        """What ``keys`` have spent, added up (open holds not included)."""
        ...

    def spent_under(self, prefix: str) -> dict[str, Spend]:
        """What each account whose key starts with ``prefix`` has spent."""
        ...

    def first_alert(self, key: str, threshold: float) -> bool:
        """Record that ``key`` crossed ``threshold``: True the first time, by any replica."""
        ...

    def book_orphans(self) -> int:
        """Book in full the kept calls' holds nobody took over in time; how many."""
        ...

    def claim_turn(self, key: str, lease_s: float) -> str | None:
        """Take the making of the kept call ``key`` (None), or name who makes it now."""
        ...

    def release_turn(self, key: str) -> None:
        """Give up making the kept call ``key``."""
        ...


@dataclass
class _Account:
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
        self._limits: dict[str, Budget] = {}
        self._accounts: dict[str, _Account] = {}
        for tenant, budget in (tenant_budgets or {}).items():
            self.set_limit(f"tenant:{tenant}", budget)
        self._open: dict[str, Reservation] = {}
        self._turns: OrderedDict[str, LLMResponse] = OrderedDict()
        self._alerted: OrderedDict[tuple[str, float], None] = OrderedDict()
        self._orphans_booked = time.monotonic()

    def attach(self, store: LedgerStore) -> None:
        """Keep the ledger in ``store`` from now on (before any call is reserved)."""
        if self._open:
            raise RuntimeError("a ledger with calls in flight cannot move to a store")
        self._store, self._accounts = store, {}

    def set_limit(self, key: str, budget: Budget) -> None:
        """Set (or replace) the limit of ``key``; what it spent so far stays."""
        self._limits[key] = budget

    def reserve(
        self,
        keys: Iterable[str],
        tokens: int,
        usd: float,
        turn: str | None = None,
        windows: Iterable[WindowAccount] = (),
    ) -> Reservation:
        """Hold ``tokens`` and ``usd`` on every account in ``keys``, and on ``windows``.

        ``turn``: the kept call's name, if it is one (see the module's text). A window's
        account is held under its own limit, with its earlier accounts counted.

        Raises:
            BudgetExceeded: one of them would go over its limit; nothing is held.
        """
        windows = tuple(windows)
        unique = tuple(dict.fromkeys([*keys, *(w.key for w in windows)]))
        limits = {k: self._limits.get(k) for k in unique} | {w.key: w.limit for w in windows}
        earlier = {w.key: w.earlier for w in windows if w.earlier}
        reservation = Reservation(uuid.uuid4().hex, unique, tokens, usd, turn)
        if self._store is not None:  # before the call: a crash from here on counts it
            if time.monotonic() - self._orphans_booked > ORPHANS_WAIT_S / 10:
                self._orphans_booked = time.monotonic()
                self._store.book_orphans()
            self._store.hold(reservation, limits, earlier)
        else:
            accounts = [self._accounts.setdefault(k, _Account()) for k in unique]
            for key, account in zip(unique, accounts, strict=True):
                spent, held = account.spent, account.held
                for other in filter(None, map(self._accounts.get, earlier.get(key, ()))):
                    spent, held = _plus(spent, other.spent), _plus(held, other.held)
                error = over_limit(key, limits[key], spent, held, Spend(tokens, usd))
                if error is not None:
                    raise error
            for account in accounts:
                account.held.tokens += tokens
                account.held.usd += usd
        self._open[reservation.id] = reservation
        return reservation

    def settle(
        self, reservation: Reservation, usage: Usage | None, turn: KeptCall | None = None
    ) -> None:
        """Release the hold and book what the call really cost (``None``: it cost nothing).

        ``turn``: the call's answer, kept with its cost (see :meth:`turn`).
        """
        if self._open.pop(reservation.id, None) is None:
            return
        tokens = 0 if usage is None else usage.total_tokens
        usd = 0.0 if usage is None else usage.cost_usd
        if self._store is not None:
            self._store.settle(reservation, tokens, usd, turn)
            return
        if turn is not None:
            self._turns[turn.key] = turn.answer
            while len(self._turns) > TURNS_KEPT:
                self._turns.popitem(last=False)
        for key in reservation.keys:
            account = self._accounts[key]
            account.held.tokens -= reservation.tokens
            account.held.usd -= reservation.usd
            account.spent.tokens += tokens
            account.spent.usd += usd

    def turn(self, key: str) -> LLMResponse | None:
        """The answer the call ``key`` was given and billed for; None if never made, or failed.

        With a store, whichever replica made it.
        """
        if self._store is not None:
            return self._store.turn(key)
        return self._turns.get(key)

    def claim_turn(self, key: str, lease_s: float) -> str | None:
        """Take the making of the kept call ``key``: None, or the replica that makes it now.

        Without a store there is one replica, and its pool joins its own calls.
        """
        return None if self._store is None else self._store.claim_turn(key, lease_s)

    def release_turn(self, key: str) -> None:
        """Give up making the kept call ``key`` (it failed)."""
        if self._store is not None:
            self._store.release_turn(key)

    def total(self, keys: Iterable[str]) -> Spend:
        """What ``keys`` have spent, added up (a window with its earlier hours)."""
        if self._store is not None:
            return self._store.total(keys)
        total = Spend()
        for account in filter(None, map(self._accounts.get, keys)):
            total = _plus(total, account.spent)
        return total

    def spent_under(self, prefix: str) -> dict[str, Spend]:
        """What each account whose key starts with ``prefix`` has spent (every replica's)."""
        if self._store is not None:
            return self._store.spent_under(prefix)
        return {
            key: Spend(account.spent.tokens, account.spent.usd)
            for key, account in self._accounts.items()
            if key.startswith(prefix)
        }

    def first_alert(self, key: str, threshold: float) -> bool:
        """Record that ``key`` crossed ``threshold``: True the first time (on any replica).

        What this replica knows was recorded is not asked of the store again (the latest
        :data:`ALERTS_KNOWN`): every call after a crossing would write otherwise.
        """
        if (key, threshold) in self._alerted:
            return False
        first = True if self._store is None else self._store.first_alert(key, threshold)
        self._alerted[key, threshold] = None
        while len(self._alerted) > ALERTS_KNOWN:
            self._alerted.popitem(last=False)
        return first

    def has_limit(self, key: str) -> bool:
        """True if ``key`` has a limit (a budget)."""
        return key in self._limits

    def limits_usd(self, keys: Iterable[str]) -> bool:
        """True if one of ``keys`` has a limit in dollars."""
        limits = (self._limits.get(k) for k in keys)
        return any(limit is not None and limit.usd is not None for limit in limits)

    def spent(self, key: str) -> Spend:
        """What ``key`` has spent (by every replica, with a store)."""
        if self._store is not None:
            return self._store.account(key)[0]
        account = self._accounts.get(key)
        return Spend(account.spent.tokens, account.spent.usd) if account else Spend()

    def held(self, key: str) -> Spend:
        """What ``key`` holds for calls in flight (on every replica, with a store)."""
        if self._store is not None:
            return self._store.account(key)[1]
        account = self._accounts.get(key)
        return Spend(account.held.tokens, account.held.usd) if account else Spend()


def _plus(one: Spend, other: Spend) -> Spend:
    return Spend(one.tokens + other.tokens, one.usd + other.usd)


def over_limit(
    key: str, limit: Budget | None, spent: Spend, held: Spend, need: Spend
) -> BudgetExceeded | None:
    """The error if ``need`` does not fit ``limit`` beside ``spent`` and ``held``.

    None if it fits, or there is no limit.
    """
    if limit is None:
        return None
    tokens, usd = need.tokens, need.usd
    if limit.tokens is not None and spent.tokens + held.tokens + tokens > limit.tokens:
        return BudgetExceeded(
            f"{key} token budget: {spent.tokens} spent + {held.tokens} held + "
            f"{tokens} needed > {limit.tokens}",
            account=key,
            limit_tokens=limit.tokens,
            spent_tokens=spent.tokens,
        )
    if limit.usd is not None and spent.usd + held.usd + usd > limit.usd + 1e-12:
        return BudgetExceeded(
            f"{key} budget: ${spent.usd:.6f} spent + ${held.usd:.6f} held + "
            f"${usd:.6f} needed > ${limit.usd:.6f}",
            account=key,
            limit_usd=limit.usd,
            spent_usd=spent.usd,
        )
    return None
