"""The ``troupe`` commands (typer): thin glue over the driver API and ``runtime.cli._local``."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final, ParamSpec

import typer
import yaml
from pydantic import ValidationError
from rich.table import Table

from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.state import checked_state_url, redact_url
from raytroupe.actors.system_config import StateConfig, SystemConfig
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.deployments import APIConfig, APIKey, deploy, hash_key, new_key
from raytroupe.protocols import ConfigError, TroupeError
from raytroupe.runtime.cli import _local
from raytroupe.runtime.cli._connect import close, connect, resolve_address
from raytroupe.runtime.cli._evals import evals_app, evaluate
from raytroupe.runtime.cli._experiments import experiments_app
from raytroupe.runtime.cli._graphs import checkpoints, fork, resume
from raytroupe.runtime.cli._knowledge import kb_app, sessions_app
from raytroupe.runtime.cli._models import models_app
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._show import (
    ERR,
    OUT,
    agents_table,
    error,
    follow,
    jobs_table,
    result_json,
    show_key,
    show_result,
)
from raytroupe.runtime.cli._skills import ask, skills_app
from raytroupe.runtime.config import Team

__all__ = ["app", "main"]

_READY_S: Final = 120.0

app = typer.Typer(
    name="troupe",
    help="Run raytroupe: a local Ray with its HTTP app, jobs, teams' agents, API keys.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold API keys
)
key_app = typer.Typer(help="API keys of the HTTP app.", no_args_is_help=True)
app.add_typer(key_app, name="key")
config_app = typer.Typer(help="Configuration files.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(skills_app, name="skills")
app.add_typer(evals_app, name="evals")
app.add_typer(experiments_app, name="experiments")
app.add_typer(models_app, name="models")
app.add_typer(kb_app, name="kb")
app.add_typer(sessions_app, name="sessions")

P = ParamSpec("P")


def _version(shown: bool) -> None:
    if shown:
        from raytroupe import __version__  # noqa: PLC0415

        OUT.print(f"troupe {__version__}", highlight=False)
        raise typer.Exit


@app.callback()
def _root(
    *,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Run raytroupe: a local Ray with its HTTP app, jobs, teams' agents, API keys."""


ApiConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--api-config", help="HTTP app config (YAML): API keys, limits, ...", dir_okay=False
    ),
]


def _reported(func: Callable[P, None]) -> Callable[P, None]:
    """Print a raytroupe error as one red line and exit 1, instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            func(*args, **kwargs)
        except TroupeError as exc:
            error(exc.message)
            raise typer.Exit(1) from None

    return wrapper


app.command("ask")(_reported(ask))
app.command("eval")(_reported(evaluate))
for _command in [
    *skills_app.registered_commands,
    *evals_app.registered_commands,
    *experiments_app.registered_commands,
    *models_app.registered_commands,
    *kb_app.registered_commands,
    *sessions_app.registered_commands,
]:
    _command.callback = _reported(_command.callback) if _command.callback else None


def _usage(message: str) -> typer.Exit:
    error(message)
    return typer.Exit(2)


def _state_dir(given: Path | None) -> Path:
    return (given or _local.default_state_dir()).expanduser()


def _api_config(path: Path | None) -> APIConfig:
    if path is None:
        return APIConfig()
    try:
        return APIConfig.from_yaml(path)
    except ConfigError as exc:
        raise _usage(exc.message) from None


def _team(team: str) -> Team | str:
    """A team file (by path) or the name of a team registered at run time."""
    path = Path(team)
    if path.suffix not in {".yaml", ".yml"} and os.sep not in team and not path.exists():
        return team
    if not path.is_file():
        raise _usage(f"team file {team!r} does not exist")
    try:
        return Team.from_yaml(path)
    except ConfigError as exc:
        raise _usage(exc.message) from None


# -- up / down --------------------------------------------------------------------------------


@app.command()
@_reported
def up(
    *,
    http_port: Annotated[int, typer.Option(help="Port of the HTTP app.")] = 8000,
    num_cpus: Annotated[
        int | None, typer.Option(help="CPUs Ray may use (default: all).", show_default=False)
    ] = None,
    dashboard_port: Annotated[int, typer.Option(help="Port of the Ray dashboard.")] = 8265,
    ray_port: Annotated[int, typer.Option(help="Port of Ray's GCS (the Ray address).")] = 6379,
    temp_dir: Annotated[
        Path | None,
        typer.Option(
            help="Ray's temp dir (default: a short one of its own in the system temp dir).",
            show_default=False,
        ),
    ] = None,
    api_config: ApiConfigFile = None,
    llm_config: Annotated[
        Path | None, typer.Option(help="LLM pool config (YAML).", dir_okay=False)
    ] = None,
    state_dir: StateDir = None,
    system_config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="The system actors' configuration (troupe.yaml: llm, tools, memory, state, "
            "tracing, placement). Default: files in --state-dir, the offline model.",
            envvar="TROUPE_CONFIG",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    state_url: Annotated[
        str | None,
        typer.Option(
            help="PostgreSQL database for the journal, budget ledger, idempotency records and "
            "grants (postgresql://user@host:5432/name; password in PGPASSWORD). Default: "
            "SQLite files in --state-dir.",
            envvar="TROUPE_STATE_URL",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start a local Ray on 127.0.0.1 that outlives this command, raytroupe and its HTTP app."""
    began = time.monotonic()
    state_dir = _state_dir(state_dir)
    config = _api_config(api_config)
    _refuse_if_up(state_dir)
    _refuse_busy({"--ray-port": ray_port, "--dashboard-port": dashboard_port,
                  "--http-port": http_port})  # fmt: skip
    key = None
    if not config.api_keys and not os.environ.get(config.api_keys_env or ""):
        key = new_key()
        entry = APIKey(name="troupe-up", hash=hash_key(key), tenant="default", admin=True)
        config = config.model_copy(update={"api_keys": (entry,)})
    journal = state_dir / "journal.sqlite"
    if config.journal is None:
        config = config.model_copy(update={"journal": journal})
    if state_url is not None:  # refused before Ray starts, like a bad file
        state_url = checked_state_url(state_url, field="state_url", said_as="--state-url")
    system = (
        SystemConfig.from_yaml(system_config)
        if system_config is not None
        else SystemConfig(
            tools=ToolsConfig(state_dir=state_dir),
            memory=MemoryConfig(path=state_dir / "memory"),
            state=StateConfig(journal=journal),
        )
    )

    head = _local.start_head(
        state_dir=state_dir,
        temp_dir=(temp_dir or _local.default_temp_dir(state_dir)).expanduser().resolve(),
        ray_port=ray_port,
        dashboard_port=dashboard_port,
        num_cpus=num_cpus,
        owns_temp_dir=temp_dir is None,
    )
    _local.write_state(state_dir, head.state)
    try:
        with OUT.status("starting Ray ..."):
            _local.wait_ready(head, _READY_S)
        with OUT.status("starting raytroupe's actors and the HTTP app ..."):
            url = _deploy(
                head.state.address,
                "127.0.0.1",
                http_port,
                config,
                config=system,
                state_url=state_url,
                llm_config=llm_config,
            )
    except BaseException:
        _local.stop_head(head.state)
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.process.wait(timeout=10)  # reap it: this process is its parent
        _local.remove_state(state_dir)
        raise
    state = head.state.model_copy(update={"http_url": url})
    _local.write_state(state_dir, state)

    if key is not None:
        show_key(key, "default", admin=True, url=url)
    summary = Table.grid(padding=(0, 2))
    summary.add_row("Ray address", state.address)
    summary.add_row("dashboard", state.dashboard_url)
    if os.environ.get("RAY_AUTH_MODE", "token") == "token":
        summary.add_row("", "its login token: `ray get-auth-token`")
    summary.add_row("HTTP", url)
    summary.add_row("state", str(state_dir / _local.STATE_FILE))
    summary.add_row("Ray log", str(state.log_file))
    OUT.print(summary)
    OUT.print(f"up in {time.monotonic() - began:.1f} s; `troupe down` stops it")


def _refuse_if_up(state_dir: Path) -> None:
    existing = _local.read_state(state_dir)
    if existing is None:
        return
    if _local.is_running(existing.pid, existing.pid_start):
        error(
            f"raytroupe is already up here (Ray at {existing.address}, ray start pid "
            f"{existing.pid}, recorded in {state_dir / _local.STATE_FILE}); `troupe down` stops it"
        )
        raise typer.Exit(1)
    _local.stop_head(existing)  # a head that died: its session may have left processes
    _local.remove_state(state_dir)


def _refuse_busy(ports: dict[str, int]) -> None:
    if len(set(ports.values())) < len(ports):
        raise _usage(f"ports must differ: {ports}")
    busy = [f"{port} ({flag})" for flag, port in ports.items() if not _local.port_free(port)]
    if busy:
        error(f"already in use on 127.0.0.1: {', '.join(busy)}; choose other ports")
        raise typer.Exit(1)


def _deploy(address: str | None, host: str, port: int, api: APIConfig, **options: Any) -> str:
    """Connect, deploy the HTTP app listening on ``host:port``, disconnect; its URL."""
    rt = connect(address, **options)
    try:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # its progress lines
        return deploy(host=host, port=port, config=api)
    finally:
        close(rt)


@app.command()
@_reported
def down(*, state_dir: StateDir = None) -> None:
    """Stop what `troupe up` started (and nothing else)."""
    state_dir = _state_dir(state_dir)
    state = _local.read_state(state_dir)
    if state is None:
        OUT.print(f"nothing is up (no {_local.STATE_FILE} in {state_dir})")
        return
    report = _local.stop_head(state)
    if report.left:
        error(f"processes of Ray session {state.pid} survived SIGKILL: {list(report.left)}")
        raise typer.Exit(1)
    _local.remove_state(state_dir)
    if state.owns_temp_dir:
        shutil.rmtree(state.temp_dir, ignore_errors=True)
    if report.was_running:
        OUT.print(f"stopped Ray at {state.address} (ray start pid {state.pid}) in "
                  f"{report.seconds:.1f} s")  # fmt: skip
    else:
        OUT.print(f"the Ray recorded in {state_dir} (pid {state.pid}) was not running")
    if report.killed:
        OUT.print(f"killed {len(report.killed)} process(es) that outlived SIGTERM")


# -- jobs -------------------------------------------------------------------------------------


@app.command()
@_reported
def run(
    team: Annotated[str, typer.Argument(help="A team file (YAML), or a registered team's name.")],
    task: Annotated[str, typer.Argument(help="What the team should do.")],
    *,
    address: Address = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the job.", min=0.1)] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JobResult as JSON.")] = False,
    tenant: Annotated[str, typer.Option(help="Tenant the job runs for.")] = "default",
    state_dir: StateDir = None,
) -> None:
    """Run a job and show its subtasks live, then its answer (exit 1 if it fails)."""
    spec = _team(team)
    rt = connect(resolve_address(address, _state_dir(state_dir)), start_local=True)
    try:
        handle = rt.submit(task, team=spec, tenant=tenant)
        try:
            if as_json:
                typer.echo(result_json(handle, timeout).model_dump_json(indent=2))
            else:
                name = spec if isinstance(spec, str) else spec.name
                show_result(follow(handle, f"team {name}", timeout))
        except KeyboardInterrupt:
            handle.cancel()
            error(f"interrupted: job {handle.job_id} cancelled")
            raise typer.Exit(130) from None
    finally:
        close(rt)


@app.command()
@_reported
def jobs(
    *,
    address: Address = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's jobs.")] = None,
    state_dir: StateDir = None,
) -> None:
    """List jobs and their status."""
    rt = connect(resolve_address(address, _state_dir(state_dir)))
    try:
        OUT.print(jobs_table(rt.jobs(tenant)))
    finally:
        close(rt)


# a graph job's checkpoints; resuming it where it waits for input; forking it from one
app.command("checkpoints")(_reported(checkpoints))
app.command("resume")(_reported(resume))
app.command("fork")(_reported(fork))


@app.command()
@_reported
def agents(*, address: Address = None, state_dir: StateDir = None) -> None:
    """List agents: those of registered teams, and others running (from teams given inline)."""
    rt = connect(resolve_address(address, _state_dir(state_dir)))
    try:
        infos = rt.agents()
        known = {info.name for info in infos}
        stats = rt.router_stats()
        # an agent's router roles are scoped by its team ("research.researcher"); the system
        # actors' are not ("tools") or absent
        running = {
            name: (", ".join(roles), stats.in_flight.get(name, 0))
            for name, roles in stats.registered.items()
            if name not in known and any("." in role for role in roles)
        }
        OUT.print(agents_table(infos, running))
    finally:
        close(rt)


# -- the HTTP app -----------------------------------------------------------------------------


@app.command()
@_reported
def serve(
    *,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_config: ApiConfigFile = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Deploy the HTTP app onto a running Ray and print its URL."""
    config = _api_config(api_config)
    url = _deploy(resolve_address(address, _state_dir(state_dir)), host, port, config)
    OUT.print(f"HTTP app at {url}")
    if not config.api_keys and config.anonymous_tenant is None:
        ERR.print(
            f"[yellow]no API keys in the config: unless the cluster's ${config.api_keys_env} "
            "has some, every request is refused; `troupe key new` makes one[/yellow]"
        )


@key_app.command("new")
@_reported
def key_new(
    *,
    tenant: Annotated[str, typer.Option(help="Tenant the key reaches.")] = "default",
    admin: Annotated[bool, typer.Option(help="May manage teams and agents.")] = False,
    name: Annotated[
        str | None, typer.Option(help="Who holds it (default: <tenant>-<hash prefix>).")
    ] = None,
) -> None:
    """Print a new API key once, and the entry (its hash) for an API config."""
    key = new_key()
    hashed = hash_key(key)
    try:
        entry = APIKey(name=name or f"{tenant}-{hashed[7:15]}", hash=hashed, tenant=tenant,
                       admin=admin)  # fmt: skip
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise _usage(problems) from None
    show_key(key, tenant, admin=admin)
    OUT.print("Add it to the api_keys of an API config (`--api-config FILE`):")
    OUT.print(
        yaml.safe_dump({"api_keys": [entry.model_dump(exclude_none=True)]}, sort_keys=False),
        markup=False,
        soft_wrap=True,
    )


@config_app.command("schema")
@_reported
def config_schema(
    directory: Annotated[Path, typer.Argument(help="Where to write them.", file_okay=False)] = Path(
        "."
    ),
) -> None:
    """Write the JSON Schemas of troupe.yaml, the API config, the LLM config and team files."""
    from raytroupe.deployments.schemas import export  # noqa: PLC0415 - only this command needs it

    for path in export(directory):
        OUT.print(str(path), markup=False, soft_wrap=True)


@config_app.command("check")
@_reported
def config_check(
    path: Annotated[Path, typer.Argument(help="A troupe.yaml.", dir_okay=False)],
) -> None:
    """Read a troupe.yaml as the system actors would, and say what it configures."""
    system = SystemConfig.from_yaml(path)
    state = system.state.location()
    memory = system.memory_config()
    OUT.print(f"{path}: valid", markup=False)
    OUT.print(f"  state: {redact_url(state) if state else f'SQLite, {system.state.journal}'}",
              markup=False, soft_wrap=True)  # fmt: skip
    OUT.print(f"  memory: {memory.server or memory.path}", markup=False, soft_wrap=True)
    llm = system.llm_config()
    aliases = ", ".join(sorted(llm.models)) if llm else "the offline model"
    OUT.print(f"  llm: {aliases}", markup=False, soft_wrap=True)


def main() -> None:
    """The ``troupe`` script."""
    app()
