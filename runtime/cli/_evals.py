"""``troupe eval SUITE`` and ``troupe evals list|show|compare``: evaluation from the shell."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.table import Table

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import transport
from raytroupe.runtime.cli._show import OUT, error, plain_row

if TYPE_CHECKING:
    from raytroupe.protocols import Budget
    from raytroupe.protocols.evals import EvalComparison, EvalRun
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.http_client import Client

__all__ = ["evals_app", "evaluate"]

evals_app = typer.Typer(help="Eval runs: list, show, compare.", no_args_is_help=True)
_POLL_S: Final = 2.0
"""How long one read of a run waits for it to finish (the server caps it at 60 s)."""


def _summary(run: EvalRun) -> str:
    return (
        f"{run.id} · suite {run.suite} · {run.target} · {run.status}\n"
        f"score {run.score:.3f} (95% CI {run.ci_low:.3f}-{run.ci_high:.3f}) · "
        f"passed {run.pass_rate:.0%} of {len([c for c in run.cases if c.status != 'skipped'])}"
        f" · cost ${run.cost_usd:.4f} · p50 latency {run.latency_p50_s:.2f} s"
        + (f" · stopped: {run.stopped_because}" if run.stopped_because else "")
    )


def _cases(run: EvalRun) -> Table:
    table = Table("case", "status", "score", "latency s", "why")
    for c in run.cases:
        why = c.error or "; ".join(e.detail for e in c.expectations if not e.passed)
        plain_row(table, c.case_id, c.status, f"{c.score:.2f}", f"{c.latency_s:.2f}", why[:80])
    return table


def evaluate(
    suite: Annotated[Path, typer.Argument(help="A suite file (.jsonl, .yaml).", exists=True)],
    *,
    skill: Annotated[
        str | None, typer.Option(help="NAME[@VERSION] (default: the suite's).")
    ] = None,
    team: Annotated[str | None, typer.Option(help="A registered team instead.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Cases at once.")] = 4,
    budget_tokens: Annotated[int | None, typer.Option(help="Stop starting cases past it.")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Stop starting cases past it.")] = None,
    min_score: Annotated[
        float | None, typer.Option(help="Exit 1 when the run's score is below it (for CI).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the EvalRun as JSON.")] = False,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Run an eval suite on the cluster, with a progress bar; its score and each case."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from raytroupe.protocols import Budget

    budget = Budget(tokens=budget_tokens, usd=budget_usd) if budget_tokens or budget_usd else None
    with (
        Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                 console=OUT, transient=True, disable=as_json) as bar,
        transport(address, state_dir, start_local=True) as api,
    ):  # fmt: skip
        task = bar.add_task(f"eval {suite.name}", total=None)

        def progress(run: EvalRun) -> None:
            bar.update(task, total=run.total, completed=len(run.cases))

        run = _run_suite(api, suite, skill=skill, team=team, concurrency=concurrency,
                         budget=budget, progress=progress)  # fmt: skip
    if as_json:
        typer.echo(run.model_dump_json(indent=2))
    else:
        OUT.print(_cases(run))
        OUT.print(_summary(run), markup=False)
    if min_score is not None and run.score < min_score:
        error(f"score {run.score:.3f} is below --min-score {min_score}")
        raise typer.Exit(1)


def _run_suite(
    api: Client | Runtime,
    suite: Path,
    *,
    skill: str | None,
    team: str | None,
    concurrency: int,
    budget: Budget | None,
    progress: Callable[[EvalRun], None],
) -> EvalRun:
    """Run the suite file; the run once it has ended."""
    from raytroupe.protocols.eval_suites import read_suite

    spec = read_suite(suite)
    started = api.start_eval(spec, skill=skill, team=team, concurrency=concurrency,
                             budget=budget)  # fmt: skip
    while True:  # the run ends by itself: every case is a job with its own timeout
        run = api.eval_run(started.id, wait=_POLL_S)
        progress(run)
        if run.status != "running":
            return run
        time.sleep(0.1)


@evals_app.command("list")
def list_runs(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Eval runs, oldest first."""
    with transport(address, state_dir) as api:
        runs = api.evals()
    table = Table("suite", "target", "status", "score", "cases")
    table.add_column("run", no_wrap=True, min_width=21)  # an id to copy: never cut
    for r in runs:
        plain_row(table, r.suite, r.target, r.status, f"{r.score:.3f}", str(r.total), r.id)
    OUT.print(table)


@evals_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """One run: each case and the summary."""
    with transport(address, state_dir) as api:
        run = api.eval_run(run_id)
    OUT.print(_cases(run))
    OUT.print(_summary(run), markup=False)


def _comparison(c: EvalComparison) -> str:
    verdict = "significant" if c.significant else "not significant"
    return (
        f"{c.other} vs {c.base}: mean difference {c.mean_diff:+.3f} over {c.cases} cases "
        f"({c.better} better, {c.worse} worse, {c.same} the same); paired sign-flip test "
        f"p = {c.p_value:.4f}: {verdict} at 0.05"
    )


@evals_app.command("compare")
def compare_runs(
    base: Annotated[str, typer.Argument(help="The run to compare against.")],
    other: Annotated[str, typer.Argument(help="The run compared.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Two runs of one suite side by side, case by case."""
    with transport(address, state_dir) as api:
        c = api.compare_evals(base, other)
    table = Table("case", "base", "other")
    for case_id, before, after in c.diffs:
        plain_row(table, case_id, f"{before:.2f}", f"{after:.2f}")
    OUT.print(table)
    OUT.print(_comparison(c), markup=False)
