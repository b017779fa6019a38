"""``troupe up|down|serve``: a Ray of this machine's own, and the HTTP application on it.

``up`` starts a head node (``ray start``), the system actors and the HTTP app, and records
what it started in the state directory; ``down`` stops exactly that; ``serve`` deploys the
HTTP app onto a Ray already running.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from raytroupe.runtime.cli import _remote
from raytroupe.runtime.cli._options import Address, StateDir, state_dir_of
from raytroupe.runtime.cli._show import ERR, OUT, error
from raytroupe.runtime.cli._show import usage as usage_error

if TYPE_CHECKING:
    from raytroupe.deployments import APIConfig
    from raytroupe.protocols.config.system import SystemConfig
    from raytroupe.runtime.cli._local import UpState

__all__ = ["ApiConfigFile", "api_config_of", "down", "serve", "up"]

_READY_S: Final = 120.0
"""How long `up` waits for the HTTP app to answer."""

ApiConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--api-config", help="HTTP app config (YAML): API keys, limits, ...", dir_okay=False
    ),
]


def api_config_of(path: Path | None) -> APIConfig:
    from raytroupe.deployments import APIConfig
    from raytroupe.protocols import ConfigError

    if path is None:
        return APIConfig()
    try:
        return APIConfig.from_yaml(path)
    except ConfigError as exc:
        raise usage_error(exc.message) from None


# -- up / down --------------------------------------------------------------------------------


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
    from raytroupe.deployments import APIKey, hash_key, new_key
    from raytroupe.protocols import ConfigError
    from raytroupe.protocols.config.state import checked_state_url
    from raytroupe.runtime.cli import _local
    from raytroupe.runtime.cli._show import show_key

    _remote.local_only("up")
    began = time.monotonic()
    state_dir = state_dir_of(state_dir)
    config = api_config_of(api_config)
    _refuse_if_up(state_dir)
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
    # what was written is judged first: a bad option or file is named whatever the machine runs
    _refuse_busy({"--ray-port": ray_port, "--dashboard-port": dashboard_port,
                  "--http-port": http_port})  # fmt: skip

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
    from raytroupe.protocols.config.memory import MemoryConfig
    from raytroupe.protocols.config.system import StateConfig, SystemConfig
    from raytroupe.protocols.config.tools import ToolsConfig

    if path is not None:
        return SystemConfig.from_yaml(path)
    return SystemConfig(
        tools=ToolsConfig(state_dir=state_dir),
        memory=MemoryConfig(path=state_dir / "memory"),
        state=StateConfig(journal=journal),
    )


def _refuse_own_api(llm_config: Path | None, system: SystemConfig, http_port: int) -> None:
    """Refuse, before Ray starts, a model whose base_url is this HTTP app's own OpenAI API."""
    from raytroupe.protocols.config.llm import LLMConfig, refuse_own_api

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
    config = api_config_of(api_config)
    url = _deploy(resolve_address(address, state_dir_of(state_dir)), host, port, config)
    OUT.print(f"HTTP app at {url}")
    if not config.api_keys and config.anonymous_tenant is None:
        ERR.print(
            f"[yellow]no API keys in the config: unless the cluster's ${config.api_keys_env} "
            "has some, every request is refused; `troupe key new` makes one[/yellow]"
        )
