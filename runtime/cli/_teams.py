"""``troupe teams list|show|apply|delete|delete-agent``: teams registered at run time."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._connect import close, connect_from
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import remote, transport
from raytroupe.runtime.cli._show import OUT, error, plain_row, show_yaml, usage

if TYPE_CHECKING:
    from raytroupe.protocols import TeamSpec
    from raytroupe.runtime.config import Team
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.http_client import Client

__all__ = ["teams_app", "teams_table"]

teams_app = typer.Typer(
    help="Teams registered at run time: list, show, apply files, delete.", no_args_is_help=True
)
TeamName = Annotated[str, typer.Argument(help="The team's name.")]


def teams_table(teams: Mapping[str, TeamSpec]) -> Table:
    """Teams by name: their agents (role), planner and description."""
    table = Table("team", "agents", "planner", "description", title_justify="left")
    for name, spec in sorted(teams.items()):
        agents = ", ".join(f"{a.name} ({a.role})" for a in spec.agents)
        plain_row(table, name, agents, spec.planner_model, spec.description)
    table.title = f"{len(teams)} team(s)"
    return table


@teams_app.command("list")
def list_teams(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Registered teams (a tenant's key: those it may run)."""
    with transport(address, state_dir) as api:
        OUT.print(teams_table(api.teams()))


@teams_app.command("show")
def show_team(name: TeamName, *, address: Address = None, state_dir: StateDir = None) -> None:
    """A registered team's definition, as YAML (a team file `teams apply` takes back)."""
    with transport(address, state_dir) as api:
        show_yaml(api.team(name))


def _read(path: Path) -> Team:
    from raytroupe.protocols import ConfigError
    from raytroupe.runtime.config import Team

    if not path.is_file():
        raise usage(f"team file {str(path)!r} does not exist")
    try:
        return Team.from_yaml(path)
    except ConfigError as exc:
        raise usage(exc.message) from None


@teams_app.command("apply")
def apply_teams(
    files: Annotated[list[Path], typer.Argument(help="Team files (YAML).", dir_okay=False)],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Register teams, or hot-update them where they run (admins; exit 1 if any fails)."""
    from raytroupe.protocols import Forbidden, TroupeError, Unauthorized

    teams = [_read(path) for path in files]  # every file checked before any is applied
    client = remote(address)
    if client is not None:
        apply, finish = functools.partial(_apply_remote, client), client.close
    else:
        rt = connect_from(address, state_dir)
        apply, finish = functools.partial(_apply_local, rt), functools.partial(close, rt)
    failed = False
    try:
        for path, team in zip(files, teams, strict=True):
            try:
                said = apply(team)
            except (Unauthorized, Forbidden):
                raise  # the same for every file: said once
            except TroupeError as exc:
                failed = True
                error(f"{path}: {exc.message}")
                continue
            OUT.print(f"team {team.name}: {said}", markup=False)
    finally:
        finish()
    if failed:
        raise typer.Exit(1)


def _apply_remote(client: Client, team: Team) -> str:
    client.apply_team(team)
    return "applied"  # registered, or hot-updated where its agents run


def _apply_local(rt: Runtime, team: Team) -> str:
    return "registered" if rt.put_team(team) else "updated"


@teams_app.command("delete")
def delete_team(name: TeamName, *, address: Address = None, state_dir: StateDir = None) -> None:
    """Unregister a team and stop its agents (admins)."""
    with transport(address, state_dir) as api:
        spec = api.delete_team(name)
    OUT.print(f"team {spec.name}: deleted ({len(spec.agents)} agent(s) stopped)", markup=False)


@teams_app.command("add-agent")
def add_agent(
    team: TeamName,
    file: Annotated[Path, typer.Argument(help="The agent (YAML: name, role, model...).")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Add an agent to a registered team, or reconfigure the one of its name in place."""
    import yaml
    from pydantic import ValidationError

    from raytroupe.protocols import AgentSpec

    if not file.is_file():
        raise usage(f"agent file {str(file)!r} does not exist")
    try:
        agent = AgentSpec.model_validate(yaml.safe_load(file.read_text(encoding="utf-8")))
    except (yaml.YAMLError, ValidationError, UnicodeDecodeError) as exc:
        raise usage(f"{file}: not an agent: {str(exc).splitlines()[0]}") from None
    with transport(address, state_dir) as api:
        info = api.apply_agent(team, agent)
    OUT.print(f"agent {info.name}: in team {info.team} ({info.role})", markup=False)


@teams_app.command("delete-agent")
def delete_agent(
    name: Annotated[str, typer.Argument(help="The agent's name.")],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Remove an agent from its team and stop it; the team's other agents keep running."""
    with transport(address, state_dir) as api:
        info = api.delete_agent(name)
    OUT.print(f"agent {info.name}: removed from team {info.team} and stopped", markup=False)
