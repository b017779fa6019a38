"""``troupe skills ...`` and ``troupe ask``: skills from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from raytroupe.protocols import ConfigError, Conflict
from raytroupe.runtime.cli._connect import close, connect_from
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._show import OUT, error, follow, result_json, show_result

__all__ = ["ask", "skills_app"]

skills_app = typer.Typer(help="Skills: list, show, apply files, roll back.", no_args_is_help=True)


@skills_app.command("list")
def list_skills(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Registered skills: current version, versions, mode, where they came from."""
    rt = connect_from(address, state_dir)
    try:
        table = Table("skill", "version", "versions", "mode", "source", "description")
        for info in rt.skills():
            table.add_row(info.name, info.version, ", ".join(info.versions),
                          info.execution_mode, info.source, info.description)  # fmt: skip
        OUT.print(table)
    finally:
        close(rt)


@skills_app.command("show")
def show_skill(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    version: Annotated[str | None, typer.Option(help="A version (default: current).")] = None,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A skill version as JSON."""
    rt = connect_from(address, state_dir)
    try:
        typer.echo(rt.skill(name, version).model_dump_json(indent=2))
    finally:
        close(rt)


@skills_app.command("apply")
def apply_skills(
    files: Annotated[list[Path], typer.Argument(help="Skill files (.yaml, .yml, .md).")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Register the skills of these files (each version once; exit 1 if any fails)."""
    rt = connect_from(address, state_dir)
    failed = False
    try:
        for path in files:
            try:
                created = rt.put_skill(path)
            except (ConfigError, Conflict) as exc:
                failed = True
                for problem in exc.detail.get("problems") or [exc.message]:
                    said = str(problem)
                    error(said if said.startswith(str(path)) else f"{path}: {said}")
                continue
            spec = rt.skill(_name_of(path))
            said = "registered" if created else "current again"
            OUT.print(f"{spec.name} {spec.version}: {said}", markup=False)
    finally:
        close(rt)
    if failed:
        raise typer.Exit(1)


def _name_of(path: Path) -> str:
    from raytroupe.actors.skills.files import read_skill  # noqa: PLC0415

    return read_skill(path).name


@skills_app.command("rollback")
def rollback_skill(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    version: Annotated[str | None, typer.Option(help="Version (default: the one before).")] = None,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Make an earlier version current: new jobs get it, running jobs keep theirs."""
    rt = connect_from(address, state_dir)
    try:
        spec = rt.rollback_skill(name, version)
        OUT.print(f"{spec.name}: version {spec.version} is current", markup=False)
    finally:
        close(rt)


@skills_app.command("optimise")
def optimise_skill(
    name: Annotated[str, typer.Argument(help="The skill to improve.")],
    suite: Annotated[Path, typer.Argument(help="The suite that proves it.", exists=True)],
    *,
    variants: Annotated[int, typer.Option(min=1, max=5, help="Prompts to propose.")] = 3,
    model: Annotated[str, typer.Option(help="The optimiser's model alias.")] = "default",
    promote: Annotated[bool, typer.Option(help="Make the best that beats it current.")] = False,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Propose better prompts, run each on the suite, and say which beat the current one."""
    rt = connect_from(address, state_dir)
    try:
        report = rt.optimise_skill(name, suite, variants=variants, model=model, promote=promote)
    finally:
        close(rt)
    table = Table("version", "score", "vs current", "p", "beats", "instructions")
    for c in report.candidates:
        table.add_row(c.version, f"{c.score:.3f}", f"{c.mean_diff:+.3f}", f"{c.p_value:.4f}",
                      "yes" if c.beats else "no", c.instructions[:60])  # fmt: skip
    OUT.print(table)
    said = f"{name}@{report.version} scored {report.baseline_score:.3f} on {report.suite}; "
    if report.best is None:
        said += "no proposal beats it"
    else:
        how = "now current" if report.promoted else f"promote: troupe skills promote {name} "
        said += f"best: {report.best} ({how}{'' if report.promoted else report.best})"
    OUT.print(said, markup=False)


@skills_app.command("promote")
def promote_skill(
    name: Annotated[str, typer.Argument(help="The skill.")],
    version: Annotated[str, typer.Argument(help="The version to make current.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Make a version (an optimiser's proposal) current: new jobs get it."""
    rt = connect_from(address, state_dir)
    try:
        spec = rt.promote_skill(name, version)
        OUT.print(f"{spec.name}: version {spec.version} is current", markup=False)
    finally:
        close(rt)


@skills_app.command("history")
def skill_history(
    name: Annotated[str | None, typer.Argument(help="One skill (default: all).")] = None,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """What happened to skills: versions applied, rolled back to, files rejected."""
    rt = connect_from(address, state_dir)
    try:
        table = Table("skill", "version", "action", "source", "problems")
        for e in rt.skill_history(name):
            table.add_row(e.name, e.version or "", e.action, e.source, "; ".join(e.problems))
        OUT.print(table)
    finally:
        close(rt)


@skills_app.command("delete")
def delete_skill(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Unregister a skill and every version of it (running jobs keep theirs)."""
    rt = connect_from(address, state_dir)
    try:
        info = rt.delete_skill(name)
        OUT.print(f"{info.name}: deleted ({len(info.versions)} versions)", markup=False)
    finally:
        close(rt)


def ask(
    task: Annotated[str, typer.Argument(help="What is asked.")] = "",
    *,
    skill: Annotated[str | None, typer.Option(help="A skill, NAME or NAME@VERSION.")] = None,
    input_json: Annotated[
        str | None, typer.Option("--input", help="The skill's structured input, as JSON.")
    ] = None,
    address: Address = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the job.", min=0.1)] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JobResult as JSON.")] = False,
    tenant: Annotated[str, typer.Option(help="Tenant the job runs for.")] = "default",
    state_dir: StateDir = None,
) -> None:
    """Ask for something: by a skill, or routed to the best skill or team (exit 1 on failure)."""
    data = None
    if input_json is not None:
        try:
            data = json.loads(input_json)
        except json.JSONDecodeError as e:
            error(f"--input is not JSON: {e}")
            raise typer.Exit(2) from None
    if not task.strip() and data is None:
        error("give a task, or --input")
        raise typer.Exit(2)
    rt = connect_from(address, state_dir, start_local=True)
    try:
        view = rt if tenant == "default" else rt.as_tenant(tenant)
        handle = view.submit(task, skill=skill, input=data)
        if as_json:
            typer.echo(result_json(handle, timeout).model_dump_json(indent=2))
        else:
            show_result(follow(handle, f"skill {skill}" if skill else "routed", timeout))
    finally:
        close(rt)
