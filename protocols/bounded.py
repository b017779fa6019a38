"""Bounded work on what tenants write: one deadline for every pattern a unit of work runs.

Counts and sizes come first: the models cap every collection a tenant sends (agents, graph
nodes and edges, expectations, rules), so what a document costs to check grows with its
size, linearly. What is left is evaluating what tenants wrote: regular expressions (a JSON
Schema ``pattern``, a graph edge's ``when``, a quality gate's or an eval's regex) run on text
a tenant or a model wrote, where one backtracking pattern can take seconds.

:func:`search` matches with two limits: :data:`PATTERN_TIMEOUT_S` per pattern and text (a
pattern out of time fails closed: the text does not match, or the value is refused), and the
budget of the unit of work it runs in (:func:`bounded`: one request's documents, one
answer's gate, one eval case, one graph step), past which :class:`WorkLimitExceeded` names
the unit's limit. Both count CPU time, not the clock on the wall: the ``regex`` module's
timeout counts the process's CPU time, and a unit's budget its thread's
(``time.thread_time``). The pool's threads run at a lower priority than the event loops, so
on a loaded node a unit may wait seconds for a core; waiting is not work, and an innocent
pattern is never refused for it.

Matching releases the GIL, and the actors and the HTTP replica run these units off their
event loop, in fair shares per tenant (:mod:`raytroupe.actors.offload`): a slow pattern
costs its own tenant time, not every tenant's latency.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from raytroupe.protocols.errors import WorkLimitExceeded

__all__ = [
    "ADMISSION_WORK_S",
    "ANSWER_WORK_S",
    "EDGES_WORK_S",
    "EVAL_CASE_WORK_S",
    "PATTERN_TIMEOUT_S",
    "WorkBudget",
    "bounded",
    "search",
    "spend",
]

PATTERN_TIMEOUT_S: Final = 0.2
"""Longest one pattern may take on one text."""

# Each unit of work's limit (the HTTP request's is ``APIConfig.request_work_s``).
ADMISSION_WORK_S: Final = 0.5
"""A tenant's job's admission: its inline teams checked again, scoped to the tenant."""
ANSWER_WORK_S: Final = 0.5
"""One answer's gate: its schema (and required fields), or a graph update's state schema."""
EDGES_WORK_S: Final = 0.25
"""The ``when`` edges tried on one graph node's text."""
EVAL_CASE_WORK_S: Final = 0.5
"""One eval case's expectations but its judges (patterns, schemas, numbers)."""


@dataclass(frozen=True)
class WorkBudget:
    """A unit of work's budget in its thread's CPU time (``time.thread_time``), and its limit.

    Read on the thread that made it (:func:`bounded`'s block), as the CPU clock is the
    thread's own.
    """

    limit: str
    seconds: float
    deadline: float

    def left(self) -> float:
        """CPU seconds left before the deadline (negative once past it)."""
        return self.deadline - time.thread_time()

    def exceeded(self) -> WorkLimitExceeded:
        """The error that says this budget ran out."""
        return WorkLimitExceeded(
            f"checking this input took over {self.seconds} s ({self.limit}): its patterns "
            "backtrack too much on the text; simplify them",
            limit=self.limit,
            seconds=self.seconds,
        )


_BUDGET: ContextVar[WorkBudget | None] = ContextVar("raytroupe_work_budget", default=None)


@contextmanager
def bounded(seconds: float, limit: str) -> Iterator[WorkBudget]:
    """Run the block as one unit of work of at most ``seconds`` of this thread's CPU time.

    ``limit`` names it. Nested units keep the outer deadline when it is sooner. The budget
    is a context variable: it follows the block into the functions it calls, on this thread.
    """
    budget = WorkBudget(limit, seconds, time.thread_time() + seconds)
    outer = _BUDGET.get()
    if outer is not None and outer.deadline <= budget.deadline:
        budget = outer
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def spend() -> None:
    """Raise if the current unit of work is past its deadline (for loops between patterns).

    Raises:
        WorkLimitExceeded: the unit's budget is spent.
    """
    budget = _BUDGET.get()
    if budget is not None and budget.left() <= 0:
        raise budget.exceeded()


def search(
    pattern: str, text: str, *, flags: int = 0, timeout: float = PATTERN_TIMEOUT_S
) -> bool | None:
    """Whether ``pattern`` is found in ``text``; None if it took over ``timeout`` of CPU time.

    Raises:
        WorkLimitExceeded: the current unit of work (:func:`bounded`) ran out of time,
            before or during this search.
    """
    import regex  # noqa: PLC0415 - 1.2 MB that only processes matching patterns need

    budget = _BUDGET.get()
    allowed = timeout
    if budget is not None:
        left = budget.left()
        if left <= 0:
            raise budget.exceeded()
        allowed = min(timeout, left)
    try:
        # concurrent: the GIL is released while it matches, so other threads (an event
        # loop serving other tenants) run meanwhile
        found = regex.search(pattern, text, flags, concurrent=True, timeout=allowed)
    except TimeoutError:
        if budget is not None and allowed < timeout:
            raise budget.exceeded() from None
        return None
    return found is not None
