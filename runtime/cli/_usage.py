"""``troupe usage`` and ``troupe spend ...``: what model calls cost; spend limits and windows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._jobs import Tenant, User
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import tenant_transport, transport
from raytroupe.runtime.cli._show import OUT, plain_row, show_yaml, usage

if TYPE_CHECKING:
    from raytroupe.protocols import UsageRow
    from raytroupe.protocols.http import DailyUsage
    from raytroupe.protocols.spend import SpendWindowView

__all__ = ["spend_app", "spend_table", "usage_command"]


def usage_command(
    job_id: Annotated[str | None, typer.Option("--job", help="One job's usage.")] = None,
    *,
    daily: Annotated[
        bool, typer.Option("--daily", help="Totals by tenant, day (UTC) and model.")
    ] = False,
    tenant: Tenant = None,
    user: User = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Model usage (calls, tokens, cost): by job, agent and model, or by day."""
    if daily and (job_id is not None or user is not None):
        raise usage("--daily totals every job: drop --job and --user")
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        if daily:
            OUT.print(daily_table(api.daily_usage()))
        else:
            OUT.print(usage_table(api.usage(job_id, user=user)))


def usage_table(rows: Iterable[UsageRow]) -> Table:
    """Usage by job, agent and model, with a total line."""
    table = Table("job", "agent", "model", "deployment", title_justify="left")
    for column in ("calls", "prompt", "completion", "$"):
        table.add_column(column, justify="right")
    calls = prompt = completion = 0
    cost = 0.0
    for row in rows:
        figures = (row.calls, row.prompt_tokens, row.completion_tokens)
        plain_row(table, row.job_id or "", row.agent, row.model, row.deployment,
                      *map(str, figures), f"{row.cost_usd:.4f}")  # fmt: skip
        calls, prompt = calls + row.calls, prompt + row.prompt_tokens
        completion, cost = completion + row.completion_tokens, cost + row.cost_usd
    table.add_section()
    plain_row(table, "total", "", "", "", str(calls), str(prompt), str(completion), f"{cost:.4f}")
    return table


def daily_table(rows: Iterable[DailyUsage]) -> Table:
    """Usage by tenant, day and model."""
    table = Table("day", "tenant", "model", title_justify="left")
    for column in ("calls", "prompt", "completion", "$"):
        table.add_column(column, justify="right")
    for row in rows:
        plain_row(table, row.day, row.tenant, row.model, str(row.calls), str(row.prompt_tokens),
                      str(row.completion_tokens), f"{row.cost_usd:.4f}")  # fmt: skip
    return table


spend_app = typer.Typer(
    help="Spend limits: where each window stands; limits admins set at run time.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(help="The limit's name.")]


@spend_app.command("windows")
def spend_windows(
    *,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """The spend limits on the tenant and what their windows spent so far (admins: all)."""
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        OUT.print(spend_table(api.spend_windows()))


@spend_app.command("limits")
def spend_limits(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Every spend limit in force: configured ones, then those set at run time (admins)."""
    with transport(address, state_dir) as api:
        found = api.spend_limits()
    for info in found:
        by = f", set by {info.set_by}" if info.set_by else ""
        OUT.print(f"# {info.name} ({info.source}{by})", markup=False)
        show_yaml(info.limit)
    OUT.print(f"{len(found)} spend limit(s)", markup=False)


@spend_app.command("set")
def set_spend_limit(
    name: Name,
    file: Annotated[Path, typer.Argument(help="The limit, as YAML or JSON.", exists=True)],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Set (or change) a spend limit from a file: every replica's next call is under it."""
    from raytroupe.protocols.config.files import read_yaml, validated
    from raytroupe.protocols.spend import SpendLimit

    limit = validated(SpendLimit, read_yaml(file, what="spend limit"), source=str(file),
                      what="spend limit")  # fmt: skip
    with transport(address, state_dir) as api:
        api.put_spend_limit(name, limit)
    OUT.print(f"spend limit {name}: set", markup=False)


@spend_app.command("delete")
def delete_spend_limit(name: Name, *, address: Address = None, state_dir: StateDir = None) -> None:
    """Drop a spend limit set at run time (a configured one changes in its file only)."""
    with transport(address, state_dir) as api:
        api.delete_spend_limit(name)
    OUT.print(f"spend limit {name}: dropped", markup=False)


def spend_table(views: Iterable[SpendWindowView]) -> Table:
    """Each limit's window: whom it limits, the period, spent against the limit."""
    table = Table("limit", "tenant", "agent", "user", "window", "period", title_justify="left")
    for column in ("tokens", "of", "$", "of $"):
        table.add_column(column, justify="right")
    table.add_column("hard")
    count = 0
    for view in views:
        count += 1
        window = f"rolling {view.hours}h" if view.hours is not None else view.window
        plain_row(
            table, view.limit, view.tenant, view.agent or "", view.user or "", window,
            view.period, str(view.tokens), _or_dash(view.tokens_limit), f"{view.usd:.4f}",
            "-" if view.usd_limit is None else f"{view.usd_limit:.4f}",
            "yes" if view.hard else "no",
        )  # fmt: skip
    table.title = f"{count} spend window(s)"
    return table


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
