"""Running eval suites on the cluster: bounded concurrency, a budget cap, stored runs.

:class:`EvalDesk` (kept by the front desk) runs a suite's cases as ordinary jobs of the
skill (or team) under test, at most ``concurrency`` at once, each scored as it finishes
(:func:`raytroupe.actors.evals.scoring.score_answer`). With a ``budget``, no case starts once the
run has spent it (each job is also given what is left), and the run ends ``stopped``
with the cases it did not reach ``skipped``. Runs, with every case result, live in the
state store: a finished run is read back after any restart; a run whose desk
stopped mid-way is read back ``stopped`` with the cases it finished.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from raytroupe.actors.evals.scoring import Ask, score_answer
from raytroupe.actors.evals.stats import mean_ci, paired_test
from raytroupe.actors.state import Database, Migration, migrate, upsert
from raytroupe.protocols import Budget, ErrorCode, InvalidInput, JobNotFound, JobResult, TroupeError
from raytroupe.protocols.evals import CaseResult, EvalCase, EvalComparison, EvalRun, EvalSuite

__all__ = ["EvalDesk", "EvalStore", "Submit", "compare_runs", "summarize"]

log = structlog.get_logger("raytroupe.evals")

Submit = Callable[[EvalCase, Budget | None], Awaitable[str]]
"""Starts a case's job (given what budget is left); its id."""
Wait = Callable[[str], Awaitable[JobResult]]
"""Waits for a job's result."""

MAX_CONCURRENCY = 64
SIGNIFICANCE = 0.05

_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS eval_runs (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
        "run TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS eval_cases (run_id TEXT NOT NULL, case_id TEXT NOT NULL, "
        "result TEXT NOT NULL, PRIMARY KEY (run_id, case_id))",
    ),
)


class EvalStore:
    """Eval runs and their case results, in a state database (the journal's)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "evals", _MIGRATIONS)

    def put_run(self, run: EvalRun, tenant: str) -> None:
        """Record a run's header (its cases go in one by one, with :meth:`put_case`)."""
        header = run.model_copy(update={"cases": ()})
        self._db.execute(
            upsert("eval_runs", ("id", "tenant", "run"), key=("id",)),
            (run.id, tenant, header.model_dump_json()),
        )

    def put_case(self, run_id: str, result: CaseResult) -> None:
        """Record one case's result."""
        self._db.execute(
            upsert("eval_cases", ("run_id", "case_id", "result"), key=("run_id", "case_id")),
            (run_id, result.case_id, result.model_dump_json()),
        )

    def run(self, run_id: str) -> tuple[EvalRun, str] | None:
        """A run with its case results, and its tenant (None if unknown)."""
        rows = self._db.execute("SELECT tenant, run FROM eval_runs WHERE id = ?", (run_id,))
        if not rows:
            return None
        tenant, header = rows[0]
        cases = tuple(
            CaseResult.model_validate_json(r)
            for (r,) in self._db.execute(
                "SELECT result FROM eval_cases WHERE run_id = ? ORDER BY case_id", (run_id,)
            )
        )
        return EvalRun.model_validate_json(header).model_copy(update={"cases": cases}), tenant

    def runs(self, tenant: str | None) -> list[EvalRun]:
        """Run headers (of ``tenant``, or all), oldest first."""
        rows = self._db.execute("SELECT tenant, run FROM eval_runs")
        runs = [EvalRun.model_validate_json(r) for t, r in rows if tenant is None or t == tenant]
        return sorted(runs, key=lambda r: r.started_at)


def summarize(run: EvalRun, cases: list[CaseResult], *, finished: bool) -> EvalRun:
    """``run`` with ``cases`` and the aggregates over those that were scored."""
    scored = [c for c in cases if c.status != "skipped"]
    mean, low, high = mean_ci([c.score for c in scored])
    latencies = [c.latency_s for c in scored if c.job_id]
    return run.model_copy(
        update={
            "cases": tuple(sorted(cases, key=lambda c: c.case_id)),
            "score": round(mean, 6),
            "ci_low": round(low, 6),
            "ci_high": round(high, 6),
            "pass_rate": round(sum(c.status == "passed" for c in scored) / len(scored), 6)
            if scored else 0.0,
            "cost_usd": round(sum(c.cost_usd for c in cases), 8),
            "latency_p50_s": round(statistics.median(latencies), 4) if latencies else 0.0,
            "finished_at": time.time() if finished else None,
        }
    )  # fmt: skip


def compare_runs(base: EvalRun, other: EvalRun) -> EvalComparison:
    """Case by case: what changed from ``base`` to ``other``, and whether it is significant.

    Raises:
        InvalidInput: the runs are of different suites.
    """
    if base.suite != other.suite:
        raise InvalidInput(f"runs of different suites: {base.suite!r} and {other.suite!r}")
    before = {c.case_id: c.score for c in base.cases if c.status != "skipped"}
    after = {c.case_id: c.score for c in other.cases if c.status != "skipped"}
    both = sorted(set(before) & set(after))
    diffs = [after[c] - before[c] for c in both]
    p_value = paired_test(diffs)
    return EvalComparison(
        base=base.id,
        other=other.id,
        cases=len(both),
        mean_diff=round(sum(diffs) / len(diffs), 6) if diffs else 0.0,
        better=sum(d > 0 for d in diffs),
        worse=sum(d < 0 for d in diffs),
        same=sum(d == 0 for d in diffs),
        p_value=round(p_value, 6),
        significant=p_value < SIGNIFICANCE,
        diffs=tuple((c, before[c], after[c]) for c in both if before[c] != after[c]),
    )


@dataclass
class _Progress:
    run: EvalRun
    tenant: str
    cases: list[CaseResult] = field(default_factory=list)
    spent: Budget = field(default_factory=Budget)
    stop: str | None = None
    task: asyncio.Task[None] | None = None


class EvalDesk:
    """Eval runs (see the module docstring).

    Args:
        store: where runs are kept (None: in memory only).
        asker: ``asker(run id, tenant)`` reaches the model of ``judge`` expectations for a
            run (its calls are the tenant's spend).
    """

    def __init__(self, store: EvalStore | None, asker: Callable[[str, str], Ask]) -> None:
        self._store = store
        self._asker = asker
        self._live: dict[str, _Progress] = {}

    def start(
        self,
        suite: EvalSuite,
        target: str,
        submit: Submit,
        wait: Wait,
        *,
        tenant: str,
        concurrency: int = 4,
        budget: Budget | None = None,
    ) -> str:
        """Start running ``suite`` against ``target``; the run's id (it runs in the background).

        Raises:
            InvalidInput: ``concurrency`` out of 1-64.
        """
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise InvalidInput(f"concurrency must be 1-{MAX_CONCURRENCY}", field="concurrency")
        run = EvalRun(id=f"eval-{uuid.uuid4().hex[:16]}", suite=suite.name, target=target,
                      status="running", started_at=time.time(), total=len(suite.cases))  # fmt: skip
        progress = _Progress(run=run, tenant=tenant)
        self._live[run.id] = progress
        if self._store is not None:
            self._store.put_run(run, tenant)
        task = asyncio.get_running_loop().create_task(
            self._run(progress, suite, submit, wait, concurrency, budget)
        )
        progress.task = task
        log.info("eval_started", run=run.id, suite=suite.name, target=target, cases=run.total)
        return run.id

    def run(self, run_id: str, tenant: str | None = None) -> EvalRun:
        """A run as it stands (live, or from the store).

        Raises:
            JobNotFound: no such run (of ``tenant``, when given).
        """
        live = self._live.get(run_id)
        if live is not None and (tenant is None or live.tenant == tenant):
            if live.run.status != "running":  # summarized once, with its end, when it ended
                return live.run
            return summarize(live.run, list(live.cases), finished=False)
        known = self._store is not None and "\x00" not in run_id  # PostgreSQL keeps no NUL
        stored = self._store.run(run_id) if known and self._store is not None else None
        if stored is None or (tenant is not None and stored[1] != tenant):
            raise JobNotFound(f"no eval run {run_id!r}", run=run_id)
        run = stored[0]
        if run.status == "running":  # its orchestrator stopped before it finished
            run = summarize(run, list(run.cases), finished=True).model_copy(
                update={"status": "stopped", "stopped_because": "the orchestrator restarted"}
            )
        return run

    def runs(self, tenant: str | None = None) -> list[EvalRun]:
        """Run headers (of ``tenant``, or all), oldest first."""
        if self._store is not None:
            return self._store.runs(tenant)
        return [p.run for p in self._live.values() if tenant is None or p.tenant == tenant]

    async def wait(self, run_id: str, timeout: float | None) -> EvalRun:
        """The run once it has finished (or as it stands after ``timeout`` seconds)."""
        live = self._live.get(run_id)
        if live is not None and live.task is not None:
            await asyncio.wait({live.task}, timeout=timeout)
        return self.run(run_id)

    async def _run(  # noqa: PLR0917 - the run's parts
        self,
        progress: _Progress,
        suite: EvalSuite,
        submit: Submit,
        wait: Wait,
        concurrency: int,
        budget: Budget | None,
    ) -> None:
        slots = asyncio.Semaphore(concurrency)

        async def one(case: EvalCase) -> None:
            async with slots:
                if progress.stop is None:
                    left = _left(budget, progress.spent)
                    ask = self._asker(progress.run.id, progress.tenant)
                    result = await self._case(case, submit, wait, left, ask, tenant=progress.tenant)
                    _spend(progress, result, budget)
                else:
                    result = CaseResult(case_id=case.id, status="skipped", score=0.0,
                                        error=progress.stop)  # fmt: skip
                progress.cases.append(result)
                if self._store is not None:
                    self._store.put_case(progress.run.id, result)

        await asyncio.gather(*(one(case) for case in suite.cases))
        status = "stopped" if progress.stop else "finished"
        final = summarize(progress.run, progress.cases, finished=True).model_copy(
            update={"status": status, "stopped_because": progress.stop}
        )
        progress.run = final
        if self._store is not None:
            self._store.put_run(final, progress.tenant)
        log.info("eval_finished", run=final.id, score=final.score, status=status)

    async def _case(
        self,
        case: EvalCase,
        submit: Submit,
        wait: Wait,
        left: Budget | None,
        ask: Ask,
        *,
        tenant: str,
    ) -> CaseResult:
        started = time.monotonic()
        try:
            job_id = await submit(case, left)
            result = await wait(job_id)
        except TroupeError as exc:
            return CaseResult(case_id=case.id, status="error", score=0.0, error=exc.message,
                              code=exc.code.value)  # fmt: skip
        latency = time.monotonic() - started
        trace_id = next((s.trace_id for s in result.trace if s.trace_id), None)
        usage = result.usage
        common: dict[str, Any] = {"case_id": case.id, "job_id": result.job_id,
                                  "trace_id": trace_id, "cost_usd": usage.cost_usd,
                                  "tokens": usage.total_tokens, "latency_s": round(latency, 4),
                                  "answer": result.answer[:20_000]}  # fmt: skip
        if result.status != "succeeded":
            error = result.error
            return CaseResult(status="error", score=0.0, error=error.message if error else
                              result.status, code=error.code.value if error else None,
                              **common)  # fmt: skip
        try:
            score, passed, scores = await score_answer(
                case, result.answer, ask, tenant=tenant, budget=left
            )
        except TroupeError as exc:
            return CaseResult(status="error", score=0.0, error=f"scoring: {exc.message}", **common)
        return CaseResult(status="passed" if passed else "failed", score=score,
                          expectations=scores, **common)  # fmt: skip


def _left(budget: Budget | None, spent: Budget) -> Budget | None:
    if budget is None:
        return None
    return Budget(
        tokens=None if budget.tokens is None else max(0, budget.tokens - (spent.tokens or 0)),
        usd=None if budget.usd is None else max(0.0, budget.usd - (spent.usd or 0.0)),
    )


def _spend(progress: _Progress, result: CaseResult, budget: Budget | None) -> None:
    spent = progress.spent
    progress.spent = Budget(tokens=(spent.tokens or 0) + result.tokens,
                            usd=(spent.usd or 0.0) + result.cost_usd)  # fmt: skip
    if budget is None:
        return
    if result.code == ErrorCode.BUDGET_EXCEEDED.value:  # what is left cannot pay for a case
        progress.stop = "the run's budget is spent"
        return
    over_tokens = budget.tokens is not None and (progress.spent.tokens or 0) >= budget.tokens
    over_usd = budget.usd is not None and (progress.spent.usd or 0.0) >= budget.usd
    if over_tokens or over_usd:
        progress.stop = "the run's budget is spent"
