"""The ``troupe`` commands (typer): thin glue over the driver API, the HTTP client and ``_local``.

Nothing heavy is imported here: ``troupe --help``, ``--version`` and shell completion load
typer and rich only. Each command imports Ray, pydantic's models or the HTTP client in its
body (measured: ``--help`` went from 4 s to ~0.2 s once nothing imported ``ray.serve``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from raytroupe.runtime.cli import _remote
from raytroupe.runtime.cli._approvals import approvals, approve, reject
from raytroupe.runtime.cli._evals import evals_app, evaluate
from raytroupe.runtime.cli._experiments import experiments_app
from raytroupe.runtime.cli._graphs import checkpoints, fork, interrupts, resume
from raytroupe.runtime.cli._jobs import (
    agents,
    cancel,
    dead_letters,
    events,
    feedback,
    jobs,
    result,
    run,
    usage_command,
)
from raytroupe.runtime.cli._knowledge import kb_app, sessions_app
from raytroupe.runtime.cli._models import models_app
from raytroupe.runtime.cli._options import Address, StateDir, state_dir_of
from raytroupe.runtime.cli._policies import me, policies_app
from raytroupe.runtime.cli._show import ERR, OUT, error, reported
from raytroupe.runtime.cli._show import usage as usage_error
from raytroupe.runtime.cli._skills import ask, skills_app
from raytroupe.runtime.cli._teams import teams_app

if TYPE_CHECKING:
    from raytroupe.actors.system_config import SystemConfig
    from raytroupe.deployments import APIConfig
    from raytroupe.runtime.cli._local import UpState

__all__ = ["app", "main"]

_READY_S: Final = 120.0
_HELP: Final = (
    "Run raytroupe: a local Ray with its HTTP app, jobs, teams' agents, API keys. "
    "With --url (or --profile) the commands act on a deployment over HTTP instead."
)

_JOBS: Final = "Jobs (here, or over HTTP with --url)"
_WAITING: Final = "Jobs waiting for a person, graph checkpoints"
_LOCAL: Final = "This machine's Ray"
_RESOURCES: Final = "Teams, skills, knowledge, evaluation"

app = typer.Typer(
    name="troupe",
    help=_HELP,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish)
    pretty_exceptions_show_locals=False,  # locals may hold API keys
)
key_app = typer.Typer(help="API keys of the HTTP app.", no_args_is_help=True)
config_app = typer.Typer(help="Configuration files.", no_args_is_help=True)
for _group, _name, _panel in (
    (teams_app, "teams", _RESOURCES),
    (skills_app, "skills", _RESOURCES),
    (evals_app, "evals", _RESOURCES),
    (experiments_app, "experiments", _RESOURCES),
    (policies_app, "policies", _RESOURCES),
    (kb_app, "kb", _RESOURCES),
    (sessions_app, "sessions", _RESOURCES),
    (key_app, "key", _LOCAL),
    (config_app, "config", _LOCAL),
    (models_app, "models", _LOCAL),
):
    app.add_typer(_group, name=_name, rich_help_panel=_panel)


def _version(shown: bool) -> None:
    if shown:
        from raytroupe import __version__

        OUT.print(f"troupe {__version__}", highlight=False)
        raise typer.Exit


@app.callback()
def _root(
    ctx: typer.Context,
    *,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="TROUPE_URL",
            help="A deployment's HTTP app (https://host): the commands act on it over HTTP.",
            show_default=False,
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar="TROUPE_API_KEY",
            help="The API key to present (better: $TROUPE_API_KEY or a profile, out of `ps`).",
            show_default=False,
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            envvar="TROUPE_PROFILE",
            help="A deployment of ~/.config/troupe/profiles.toml ($TROUPE_CONFIG_DIR): its url "
            "and where its key is (key_env or key_file).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Run raytroupe: a local Ray with its HTTP app, jobs, teams' agents, API keys."""
    del version  # its eager callback printed it and stopped

    def on_line(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    _remote.given(
        _remote.Given(
            url=url,
            key=key,
            profile=profile,
            url_on_line=on_line("url"),
            key_on_line=on_line("key"),
            profile_on_line=on_line("profile"),
        )
    )


ApiConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--api-config", help="HTTP app config (YAML): API keys, limits, ...", dir_okay=False
    ),
]

_COMMANDS: Final[dict[str, dict[str, Callable[..., None]]]] = {
    _JOBS: {
        "run": run,
        "ask": ask,
        "result": result,
        "events": events,
        "cancel": cancel,
        "feedback": feedback,
        "jobs": jobs,
        "agents": agents,
        "usage": usage_command,
        "dead-letters": dead_letters,
    },
    _WAITING: {
        "approvals": approvals,
        "approve": approve,
        "reject": reject,
        # a graph job's checkpoints; resuming it where it waits for input; forking it from one
        "checkpoints": checkpoints,
        "interrupts": interrupts,
        "resume": resume,
        "fork": fork,
    },
    _RESOURCES: {"eval": evaluate, "me": me},
}
for _panel, _commands in _COMMANDS.items():
    for _name, _command in _commands.items():
        app.command(_name, rich_help_panel=_panel)(reported(_command))
for _sub in (teams_app, skills_app, evals_app, experiments_app, policies_app, models_app, kb_app,
             sessions_app):  # fmt: skip
    for _info in _sub.registered_commands:
        _info.callback = reported(_info.callback) if _info.callback else None


def _api_config(path: Path | None) -> APIConfig:
    from raytroupe.deployments import APIConfig
    from raytroupe.protocols import ConfigError

    if path is None:
        return APIConfig()
    try:
        return APIConfig.from_yaml(path)
    except ConfigError as exc:
        raise usage_error(exc.message) from None


# -- up / down --------------------------------------------------------------------------------


@app.command(rich_help_panel=_LOCAL)
@reported
def up(
    *,
    http_port: Annotated[int, typer.Option(help="Port of the HTTP app.")] = 8000,
    num_cpus: Annotated[
        int | None, typer.Option(help="CPUs Ray may use (default: all).", show_default=False)
    ] = None,
    dashboard_port: Annotated[int, typer.Option(help="Port of the Ray dashboard.")] = 8265,
    ray_port: Annotated[int, typer.Option(help="Port of Ray's GCS (the Ray address).")] = 6379,
    resources: Annotated[
        str | None,
        typer.Option(
            help="Custom Ray resources this node offers, as JSON: '{\"models\": 1}' for a "
            "local model pinned with resources: {models: 1}.",
            show_default=False,
        ),
    ] = None,
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
    from raytroupe.actors.state import checked_state_url
    from raytroupe.deployments import APIKey, hash_key, new_key
    from raytroupe.protocols import ConfigError
    from raytroupe.runtime.cli import _local
    from raytroupe.runtime.cli._show import show_key

    _remote.local_only("up")
    began = time.monotonic()
    state_dir = state_dir_of(state_dir)
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
    try:
        offered = None if resources is None else _local.parse_resources(resources)
    except ConfigError as exc:
        raise usage_error(exc.message) from None
    system = _system(system_config, state_dir, journal)
    _refuse_own_api(llm_config, system, http_port)

    head = _local.start_head(
        state_dir=state_dir,
        temp_dir=(temp_dir or _local.default_temp_dir(state_dir)).expanduser().resolve(),
        ray_port=ray_port,
        dashboard_port=dashboard_port,
        num_cpus=num_cpus,
        owns_temp_dir=temp_dir is None,
        resources=offered,
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
    _summary(state, state_dir)
    OUT.print(f"up in {time.monotonic() - began:.1f} s; `troupe down` stops it")


def _system(path: Path | None, state_dir: Path, journal: Path) -> SystemConfig:
    """The system actors' configuration: the file's, else files in ``state_dir``."""
    from raytroupe.actors.memory.config import MemoryConfig
    from raytroupe.actors.system_config import StateConfig, SystemConfig
    from raytroupe.actors.tools.config import ToolsConfig

    if path is not None:
        return SystemConfig.from_yaml(path)
    return SystemConfig(
        tools=ToolsConfig(state_dir=state_dir),
        memory=MemoryConfig(path=state_dir / "memory"),
        state=StateConfig(journal=journal),
    )


def _refuse_own_api(llm_config: Path | None, system: SystemConfig, http_port: int) -> None:
    """Refuse, before Ray starts, a model whose base_url is this HTTP app's own OpenAI API."""
    from raytroupe.actors.llm.config import LLMConfig, refuse_own_api

    llm = LLMConfig.from_yaml(llm_config) if llm_config is not None else system.llm_config()
    if llm is not None:
        refuse_own_api(llm.models, host="127.0.0.1", port=http_port)


def _summary(state: UpState, state_dir: Path) -> None:
    """Where what `up` started is: Ray, its dashboard, the HTTP app, the state, the log."""
    from rich.table import Table

    from raytroupe.runtime.cli import _local

    summary = Table.grid(padding=(0, 2))
    summary.add_row("Ray address", state.address)
    summary.add_row("dashboard", state.dashboard_url)
    if os.environ.get("RAY_AUTH_MODE", "token") == "token":
        summary.add_row("", "its login token: `ray get-auth-token`")
    summary.add_row("HTTP", state.http_url or "")
    summary.add_row("state", str(state_dir / _local.STATE_FILE))
    summary.add_row("Ray log", str(state.log_file))
    OUT.print(summary)


def _refuse_if_up(state_dir: Path) -> None:
    from raytroupe.runtime.cli import _local

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
    from raytroupe.runtime.cli import _local

    if len(set(ports.values())) < len(ports):
        raise usage_error(f"ports must differ: {ports}")
    busy = [f"{port} ({flag})" for flag, port in ports.items() if not _local.port_free(port)]
    if busy:
        error(f"already in use on 127.0.0.1: {', '.join(busy)}; choose other ports")
        raise typer.Exit(1)


def _deploy(address: str | None, host: str, port: int, api: APIConfig, **options: Any) -> str:
    """Connect, deploy the HTTP app listening on ``host:port``, disconnect; its URL."""
    import logging

    from raytroupe.deployments import deploy
    from raytroupe.runtime.cli._connect import close, connect

    rt = connect(address, **options)
    try:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # its progress lines
        return deploy(host=host, port=port, config=api)
    finally:
        close(rt)


@app.command(rich_help_panel=_LOCAL)
@reported
def down(*, state_dir: StateDir = None) -> None:
    """Stop what `troupe up` started (and nothing else)."""
    from raytroupe.runtime.cli import _local

    _remote.local_only("down")
    state_dir = state_dir_of(state_dir)
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


# -- the HTTP app -----------------------------------------------------------------------------


@app.command(rich_help_panel=_LOCAL)
@reported
def serve(
    *,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_config: ApiConfigFile = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Deploy the HTTP app onto a running Ray and print its URL."""
    from raytroupe.runtime.cli._connect import resolve_address

    _remote.local_only("serve")
    config = _api_config(api_config)
    url = _deploy(resolve_address(address, state_dir_of(state_dir)), host, port, config)
    OUT.print(f"HTTP app at {url}")
    if not config.api_keys and config.anonymous_tenant is None:
        ERR.print(
            f"[yellow]no API keys in the config: unless the cluster's ${config.api_keys_env} "
            "has some, every request is refused; `troupe key new` makes one[/yellow]"
        )


@key_app.command("new")
@reported
def key_new(
    *,
    tenant: Annotated[str, typer.Option(help="Tenant the key reaches.")] = "default",
    admin: Annotated[bool, typer.Option(help="May manage teams and agents.")] = False,
    name: Annotated[
        str | None, typer.Option(help="Who holds it (default: <tenant>-<hash prefix>).")
    ] = None,
) -> None:
    """Print a new API key once, and the entry (its hash) for an API config."""
    import yaml
    from pydantic import ValidationError

    from raytroupe.deployments import APIKey, hash_key, new_key
    from raytroupe.runtime.cli._show import show_key

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
        raise usage_error(problems) from None
    show_key(key, tenant, admin=admin)
    OUT.print("Add it to the api_keys of an API config (`--api-config FILE`):")
    OUT.print(
        yaml.safe_dump({"api_keys": [entry.model_dump(exclude_none=True)]}, sort_keys=False),
        markup=False,
        soft_wrap=True,
    )


@config_app.command("schema")
@reported
def config_schema(
    directory: Annotated[Path, typer.Argument(help="Where to write them.", file_okay=False)] = Path(
        "."
    ),
) -> None:
    """Write the JSON Schemas of troupe.yaml, the API config, the LLM config and team files."""
    from raytroupe.deployments.schemas import export

    for path in export(directory):
        OUT.print(str(path), markup=False, soft_wrap=True)


@config_app.command("check")
@reported
def config_check(
    path: Annotated[Path, typer.Argument(help="A troupe.yaml.", dir_okay=False)],
) -> None:
    """Read a troupe.yaml as the system actors would, and say what it configures."""
    from raytroupe.actors.state import redact_url
    from raytroupe.actors.system_config import SystemConfig

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
    """The ``troupe`` script (named so in its help and completion, however it was started)."""
    app(prog_name="troupe")
