"""``troupe schedules set|list|show|delete``: jobs your tenant submits at cron times."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import tenant_transport
from raytroupe.runtime.cli._show import OUT, plain_row

__all__ = ["schedules_app"]

schedules_app = typer.Typer(
    help="Schedules: a job submitted at the times a cron expression names.",
    no_args_is_help=True,
)
Tenant = Annotated[str, typer.Option(help="Whose schedules (a local driver's choice).")]
Name = Annotated[str, typer.Argument(help="The schedule's name.")]


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


@schedules_app.command("set")
def set_schedule(
    name: Name,
    cron: Annotated[str, typer.Argument(help="5 cron fields, or 6 with seconds first.")],
    task: Annotated[str, typer.Argument(help="What each firing's job is asked.")] = "",
    *,
    team: Annotated[str | None, typer.Option(help="A registered team to run it.")] = None,
    skill: Annotated[str | None, typer.Option(help="A skill to run: name[@version].")] = None,
    input_file: Annotated[
        Path | None, typer.Option("--input", help="A skill's input, as a JSON file.", exists=True)
    ] = None,
    timezone: Annotated[str, typer.Option(help="The IANA time zone of the fields.")] = "UTC",
    disabled: Annotated[bool, typer.Option("--disabled", help="Keep it, but do not fire.")] = False,
    description: Annotated[str, typer.Option(help="What it is for.")] = "",
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Make or replace a schedule; prints when it fires next."""
    import json

    spec: dict[str, object] = {
        "cron": cron, "timezone": timezone, "task": task, "team": team, "skill": skill,
        "enabled": not disabled, "description": description,
    }  # fmt: skip
    if input_file is not None:
        spec["input"] = json.loads(input_file.read_text(encoding="utf-8"))
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        info = api.put_schedule(name, spec)
    OUT.print(f"schedule {info.name}: {info.spec.cron} ({info.spec.timezone}); "
              f"next {_when(info.next_at)}", markup=False)  # fmt: skip


@schedules_app.command("list")
def list_schedules(
    *, tenant: Tenant = "default", address: Address = None, state_dir: StateDir = None
) -> None:
    """The tenant's schedules."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        found = api.schedules()
    table = Table("schedule", "cron", "zone", "runs", "fired", "next")
    for info in found:
        runs = info.spec.team or info.spec.skill or "(routed)"
        plain_row(table, info.name, info.spec.cron, info.spec.timezone, runs,
                  str(info.fired), _when(info.next_at))  # fmt: skip
    OUT.print(table)


@schedules_app.command("show")
def show(
    name: Name,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A schedule and its latest firings: the job each submitted, or why not."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        info = api.schedule(name)
    OUT.print(f"schedule {info.name}: {info.spec.cron} ({info.spec.timezone}), fired "
              f"{info.fired} time(s); next {_when(info.next_at)}", markup=False)  # fmt: skip
    table = Table("due", "job", "error")
    for run in info.runs:
        plain_row(table, _when(run.fire_at), run.job_id or "", run.error or "")
    OUT.print(table)


@schedules_app.command("delete")
def delete(
    name: Name,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Stop and drop a schedule (the jobs it submitted stay)."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        api.delete_schedule(name)
    OUT.print(f"deleted schedule {name}", markup=False)
