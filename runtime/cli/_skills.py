"""``troupe skills ...`` and ``troupe ask``: skills from the command line."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._connect import close, connect_from
from raytroupe.runtime.cli._jobs import Detach, RemoteJob, connect_for_job, watch
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import no_tenant, remote, tenant_transport, transport
from raytroupe.runtime.cli._show import OUT, error, plain_row, usage

if TYPE_CHECKING:
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.http_client import Client

__all__ = ["ask", "skills_app"]

skills_app = typer.Typer(
    help="Skills: list, show, apply files, roll back; their lessons.", no_args_is_help=True
)
SkillName = Annotated[str, typer.Argument(help="The skill's name.")]
Tenant = Annotated[str, typer.Option(help="Whose lessons (local Ray; over HTTP: the key's).")]


@skills_app.command("list")
def list_skills(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Registered skills: current version, versions, mode, where they came from."""
    with transport(address, state_dir) as api:
        listing = api.skills()
    table = Table("skill", "version", "versions", "mode", "source", "description")
    for info in listing.skills:
        plain_row(table, info.name, info.version, ", ".join(info.versions),
                  info.execution_mode, info.source, info.description)  # fmt: skip
    OUT.print(table)
    for problem in listing.problems:  # skill files the registry could not load (admins')
        error(f"{problem.file}: {'; '.join(problem.problems)}")


@skills_app.command("lessons")
def lessons(
    name: SkillName,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """What reflection learned from the tenant's jobs of the skill, newest first."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        found = api.lessons(name)
    table = Table("lesson", "learned", "text")
    for hit in found:
        learned = time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.created_at))
        plain_row(table, hit.id, learned, hit.text)
    OUT.print(table)


@skills_app.command("forget")
def forget_lesson(
    name: SkillName,
    lesson_id: Annotated[str, typer.Argument(help="The lesson's id (`troupe skills lessons`).")],
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Forget one lesson of the tenant's, so that no later job of the skill recalls it."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        api.delete_lesson(name, lesson_id)
    OUT.print(f"forgot lesson {lesson_id} of skill {name}", markup=False)


@skills_app.command("show")
def show_skill(
    name: SkillName,
    version: Annotated[str | None, typer.Option(help="A version (default: current).")] = None,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A skill version as JSON."""
    with transport(address, state_dir) as api:
        typer.echo(api.skill(name, version).model_dump_json(indent=2))


@skills_app.command("apply")
def apply_skills(
    files: Annotated[list[Path], typer.Argument(help="Skill files (.yaml, .yml, .md).")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Register the skills of these files (each version once; exit 1 if any fails)."""
    from raytroupe.protocols import ConfigError, Conflict, InvalidInput

    client = remote(address)
    if client is not None:
        apply, finish = functools.partial(_apply_remote, client), client.close
    else:
        rt = connect_from(address, state_dir)
        apply, finish = functools.partial(_apply_local, rt), functools.partial(close, rt)
    failed = False
    try:
        for path in files:
            try:
                name, version, created = apply(path)
            except (ConfigError, Conflict, InvalidInput) as exc:
                failed = True
                for problem in exc.detail.get("problems") or [exc.message]:
                    said = str(problem)
                    error(said if said.startswith(str(path)) else f"{path}: {said}")
                continue
            said = "registered" if created else "current again"
            OUT.print(f"{name} {version}: {said}", markup=False)
    finally:
        finish()
    if failed:
        raise typer.Exit(1)


def _apply_remote(client: Client, path: Path) -> tuple[str, str, bool]:
    """Send the skill file at ``path``: its name, version, and whether it is new."""
    from raytroupe.protocols import ConfigError

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None
    kind = "markdown" if path.suffix.lower() == ".md" else "yaml"
    applied = client.apply_skill_file(text, kind=kind)
    return applied.name, applied.version, applied.created


def _apply_local(rt: Runtime, path: Path) -> tuple[str, str, bool]:
    """Register the skill file at ``path``: its name, version, and whether it is new."""
    from raytroupe.protocols.skill_files import read_skill

    created = rt.put_skill(path)
    spec = rt.skill(read_skill(path).name)
    return spec.name, spec.version, created


@skills_app.command("rollback")
def rollback_skill(
    name: SkillName,
    version: Annotated[str | None, typer.Option(help="Version (default: the one before).")] = None,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Make an earlier version current: new jobs get it, running jobs keep theirs."""
    with transport(address, state_dir) as api:
        current = api.rollback_skill(name, version).version
    OUT.print(f"{name}: version {current} is current", markup=False)


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
    from raytroupe.protocols.eval_suites import read_suite

    checked = read_suite(suite)
    with transport(address, state_dir) as api:
        report = api.optimise_skill(name, checked, variants=variants, model=model, promote=promote)
    table = Table("version", "score", "vs current", "p", "beats", "instructions")
    for c in report.candidates:
        plain_row(table, c.version, f"{c.score:.3f}", f"{c.mean_diff:+.3f}", f"{c.p_value:.4f}",
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
    name: SkillName,
    version: Annotated[str, typer.Argument(help="The version to make current.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Make a version (an optimiser's proposal) current: new jobs get it."""
    with transport(address, state_dir) as api:
        spec = api.promote_skill(name, version)
    OUT.print(f"{spec.name}: version {spec.version} is current", markup=False)


@skills_app.command("history")
def skill_history(
    name: Annotated[str | None, typer.Argument(help="One skill (default: all).")] = None,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """What happened to skills: versions applied, rolled back to, files rejected."""
    with transport(address, state_dir) as api:
        events = api.skill_history(name)
    table = Table("skill", "version", "action", "source", "problems")
    for e in events:
        plain_row(table, e.name, e.version or "", e.action, e.source, "; ".join(e.problems))
    OUT.print(table)


@skills_app.command("delete")
def delete_skill(
    name: SkillName,
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Unregister a skill and every version of it (running jobs keep theirs)."""
    with transport(address, state_dir) as api:
        info = api.delete_skill(name)
    OUT.print(f"{info.name}: deleted ({len(info.versions)} versions)", markup=False)


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
    detach: Detach = False,
    tenant: Annotated[str, typer.Option(help="Tenant the job runs for.")] = "default",
    state_dir: StateDir = None,
) -> None:
    """Ask for something: by a skill, or routed to the best skill or team (exit 1 on failure)."""
    data = None
    if input_json is not None:
        try:
            data = json.loads(input_json)
        except json.JSONDecodeError as e:
            raise usage(f"--input is not JSON: {e}") from None
    if not task.strip() and data is None:
        raise usage("give a task, or --input")
    label = f"skill {skill}" if skill else "routed"
    client = remote(address)
    if client is not None:
        no_tenant(tenant, "default")
        with client:
            job = RemoteJob(client, client.submit(task, skill=skill, input=data).id)
            watch(job, label, timeout, as_json=as_json, detach=detach)
        return
    rt = connect_for_job(address, state_dir, detach=detach)
    try:
        view = rt if tenant == "default" else rt.as_tenant(tenant)
        handle = view.submit(task, skill=skill, input=data)
        watch(handle, label, timeout, as_json=as_json, detach=detach)
    finally:
        close(rt)
