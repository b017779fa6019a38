"""``troupe experiments start|list|show|stop``: A/B experiments from the shell."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import transport
from raytroupe.runtime.cli._show import OUT, plain_row

if TYPE_CHECKING:
    from raytroupe.protocols.experiments import ExperimentInfo

__all__ = ["experiments_app"]

experiments_app = typer.Typer(
    help="A/B experiments: split a skill's live traffic between versions.", no_args_is_help=True
)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _arms(info: ExperimentInfo) -> Table:
    table = Table("arm", "weight", "jobs", "finished", "success", "quality", "judge",
                  "feedback (n)", "cost/job $", "p50 s", "sample", info.spec.metric)  # fmt: skip
    for k, a in enumerate(info.arms):
        plain_row(table,
            a.version + (" (control)" if k == 0 else ""), f"{a.weight:g}", str(a.assigned),
            str(a.finished), f"{a.success_rate:.0%}", _figure(a.quality), _figure(a.judge),
            f"{_figure(a.feedback)} ({a.feedback_count})", f"{a.cost_usd:.6f}",
            f"{a.latency_p50_s:.2f}", f"{a.sample}/{info.samples_per_arm}", _figure(a.mean),
        )  # fmt: skip
    return table


def _summary(info: ExperimentInfo) -> str:
    spec = info.spec
    lines = [
        f"{spec.name} · skill {spec.skill} · {info.status} · metric {spec.metric} · "
        f"{info.samples_per_arm} jobs per arm, then a two-sided permutation test at "
        f"alpha {spec.alpha} / {len(spec.arms) - 1}"
    ]
    if info.decision is not None:
        lines.append(f"decision: {info.decision.reason}")
        if info.decision.guard:
            lines.append(f"not promoted: {info.decision.guard}")
        elif info.promoted:
            lines.append(f"promoted: {spec.skill}@{info.decision.winner} is current")
    if info.stopped_by:
        lines.append(f"stopped by {info.stopped_by}")
    return "\n".join(lines)


def _show(info: ExperimentInfo, *, as_json: bool) -> None:
    if as_json:
        typer.echo(info.model_dump_json(indent=2))
        return
    OUT.print(_arms(info))
    OUT.print(_summary(info), markup=False)


AsJson = Annotated[bool, typer.Option("--json", help="Print the experiment as JSON.")]


@experiments_app.command("start")
def start(
    name: Annotated[str, typer.Argument(help="The experiment's name (unique).")],
    *,
    skill: Annotated[str, typer.Option(help="The skill whose traffic is split.")],
    arm: Annotated[
        list[str],
        typer.Option(help="VERSION[:WEIGHT], twice or more; the first is the control."),
    ],
    metric: Annotated[str, typer.Option(help="success, quality or feedback.")] = "success",
    alpha: Annotated[float, typer.Option(help="False-positive rate.")] = 0.05,
    power: Annotated[float, typer.Option(help="Power at --min-effect.")] = 0.8,
    min_effect: Annotated[float, typer.Option(help="Difference of means worth finding.")] = 0.2,
    samples_per_arm: Annotated[
        int | None, typer.Option(help="Jobs per arm (default: from alpha, power, effect).")
    ] = None,
    tenant: Annotated[
        list[str] | None, typer.Option(help="Only this tenant's jobs (repeat; default: all).")
    ] = None,
    auto_promote: Annotated[bool, typer.Option(help="Make the winner current.")] = False,
    max_cost_increase: Annotated[
        float, typer.Option(help="Guard: no promotion past this extra cost per job (0.1: 10%).")
    ] = 0.1,
    as_json: AsJson = False,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Start splitting a skill's live traffic between versions."""
    from pydantic import ValidationError

    from raytroupe.protocols import ConfigError
    from raytroupe.protocols.experiments import ExperimentSpec

    arms = []
    for given in arm:
        version, _, weight = given.partition(":")
        arms.append({"version": version, "weight": weight or 1.0})
    try:
        spec = ExperimentSpec.model_validate({
            "name": name, "skill": skill, "arms": arms, "metric": metric, "alpha": alpha,
            "power": power, "min_effect": min_effect, "samples_per_arm": samples_per_arm,
            "tenants": tenant or None, "auto_promote": auto_promote,
            "max_cost_increase": max_cost_increase,
        })  # fmt: skip
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'experiment'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        ]
        raise ConfigError("; ".join(problems), problems=problems) from None
    with transport(address, state_dir) as api:
        _show(api.start_experiment(spec), as_json=as_json)


@experiments_app.command("list")
def list_experiments(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Every experiment, oldest first."""
    with transport(address, state_dir) as api:
        found = api.experiments()
    table = Table("experiment", "skill", "status", "arms", "jobs", "winner", "promoted")
    for e in found:
        winner = e.decision.winner if e.decision is not None else None
        plain_row(table, e.spec.name, e.spec.skill, e.status,
                      ", ".join(a.version for a in e.spec.arms),
                      str(sum(a.assigned for a in e.arms)), winner or "-",
                      "yes" if e.promoted else "no")  # fmt: skip
    OUT.print(table)


@experiments_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The experiment's name.")],
    *,
    as_json: AsJson = False,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """One experiment: each arm's figures, and the decision once made."""
    with transport(address, state_dir) as api:
        _show(api.experiment(name), as_json=as_json)


@experiments_app.command("stop")
def stop(
    name: Annotated[str, typer.Argument(help="The experiment's name.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """End a running experiment without a verdict (new jobs run the current version)."""
    with transport(address, state_dir) as api:
        _show(api.stop_experiment(name), as_json=False)
