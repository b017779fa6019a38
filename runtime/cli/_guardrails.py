"""``troupe guardrails set|list|show|delete|decisions``: policies on jobs' input, tools, output."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import transport
from raytroupe.runtime.cli._show import OUT, plain_row, show_yaml

__all__ = ["guardrails_app"]

guardrails_app = typer.Typer(
    help="Guardrails: rules that block or redact jobs' input, tool calls and output.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(help="The guardrail's name.")]


@guardrails_app.command("set")
def set_guardrail(
    name: Name,
    file: Annotated[Path, typer.Argument(help="The guardrail, as YAML or JSON.", exists=True)],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Set a guardrail from a file (its next version): new jobs are bound by it."""
    from raytroupe.protocols.config.files import read_yaml, validated
    from raytroupe.protocols.guardrails import GuardrailSpec

    spec = validated(GuardrailSpec, read_yaml(file, what="guardrail"), source=str(file),
                     what="guardrail")  # fmt: skip
    with transport(address, state_dir) as api:
        info = api.put_guardrail(name, spec)
    OUT.print(f"guardrail {info.name}: version {info.version}", markup=False)


@guardrails_app.command("list")
def list_guardrails(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Every guardrail set: version, stages, action, rules, whom it binds."""
    with transport(address, state_dir) as api:
        found = api.guardrails()
    table = Table("guardrail", "version", "stages", "action", "rules", "tenants", "teams")
    for info in found:
        spec = info.spec
        plain_row(table, info.name, str(info.version), ",".join(spec.stages), spec.action,
                  ",".join(r.kind for r in spec.rules), ",".join(spec.applies_to.tenants),
                  ",".join(spec.applies_to.teams) or "*")  # fmt: skip
    OUT.print(table)


@guardrails_app.command("show")
def show(
    name: Name,
    *,
    version: Annotated[int | None, typer.Option(help="An earlier version.")] = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A guardrail as YAML (`guardrails set` takes it back)."""
    with transport(address, state_dir) as api:
        info = api.guardrail(name, version=version)
    OUT.print(f"# {info.name} version {info.version}", markup=False)
    show_yaml(info.spec)


@guardrails_app.command("delete")
def delete(name: Name, *, address: Address = None, state_dir: StateDir = None) -> None:
    """Unset a guardrail: new jobs are not bound by it (its versions stay readable)."""
    with transport(address, state_dir) as api:
        api.delete_guardrail(name)
    OUT.print(f"guardrail {name}: unset", markup=False)


@guardrails_app.command("decisions")
def decisions(
    *,
    job: Annotated[str | None, typer.Option(help="Only this job's.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 50,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """What guardrails blocked or redacted in your jobs (an admin's: everyone's)."""
    with transport(address, state_dir) as api:
        found = api.guardrail_decisions(job_id=job, limit=limit)
    table = Table("at", "tenant", "job", "guardrail", "rule", "stage", "action", "reason")
    for record in found:
        d = record.decision
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.at))
        stage = f"{d.stage}({d.tool})" if d.tool else d.stage
        plain_row(table, at, record.tenant, record.job_id or "-", f"{d.guardrail} v{d.version}",
                  d.rule, stage, d.action, d.reason)  # fmt: skip
    OUT.print(table)
