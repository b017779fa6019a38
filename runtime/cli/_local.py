"""The local Ray that ``troupe up`` starts and ``troupe down`` stops, and its state file.

``up`` runs ``ray start --head --block`` as the leader of a new process session. Every
process that Ray starts for that head (GCS, raylet, dashboard and its modules, workers and
actors, the Serve proxy and replicas) inherits the session id, so the session identifies
exactly what ``up`` started, without matching process names.

Measured on a 2-core machine with 24 processes in the session (system actors, Serve): SIGTERM
to ``ray start --block`` stops them all, in ~2.4 s, but only when the node drain is off
(``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0``, set by :func:`start_head`); with Ray's default
the head first drains for 30 s, waiting for Serve replicas to move to a node that a
single-node cluster does not have. :func:`stop_head` still SIGKILLs whatever of the session
outlives a bounded wait.

Linux only: processes are inspected through ``/proc``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raytroupe.protocols import ConfigError

__all__ = [
    "Head",
    "StopReport",
    "UpState",
    "default_state_dir",
    "default_temp_dir",
    "free_port",
    "is_running",
    "parse_resources",
    "port_free",
    "process_start",
    "read_state",
    "remove_state",
    "session_members",
    "start_head",
    "stop_head",
    "wait_ready",
    "write_state",
]

STATE_FILE: Final = "up.json"
_STOP_GRACE_S: Final = 30.0
_KILL_WAIT_S: Final = 5.0
_POLL_S: Final = 0.1
_MAX_RESOURCE: Final = 10**14  # ray_constants.MAX_RESOURCE_QUANTITY
_RAY_OWN_RESOURCES: Final = {
    "CPU": "--num-cpus",
    "GPU": "--num-gpus",
    "memory": "--memory",
    "object_store_memory": "--object-store-memory",
}


class UpState(BaseModel):
    """What ``troupe up`` started, as recorded in ``<state dir>/up.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int = Field(gt=0, description="PID of `ray start --block`, leader of its session.")
    pid_start: int = Field(
        ge=0, description="Its start time in clock ticks after boot, so a reused PID is not it."
    )
    address: str = Field(description="The GCS address, host:port.")
    dashboard_url: str = Field(description="The Ray dashboard.")
    http_url: str | None = Field(default=None, description="The HTTP app, once deployed.")
    temp_dir: Path = Field(description="Ray's temporary directory (sessions, logs, sockets).")
    owns_temp_dir: bool = Field(
        default=False, description="The temp dir is up's own (down removes it)."
    )
    log_file: Path = Field(description="Where `ray start` writes its output.")
    started_at: float = Field(description="UNIX time of the start.")


def default_state_dir() -> Path:
    """``$TROUPE_STATE_DIR``, else ``~/.raytroupe``."""
    return Path(os.environ.get("TROUPE_STATE_DIR") or Path.home() / ".raytroupe")


def default_temp_dir(state_dir: Path) -> Path:
    """A short Ray temp dir of its own for ``state_dir``.

    Short because Ray puts Unix sockets under it (at most 107 bytes a path); of its own so
    that ``ray.init(address="auto")`` elsewhere, which reads ``<temp>/ray_current_cluster``,
    never mistakes this Ray for the machine's default one, nor the reverse.
    """
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"troupe-{os.getuid()}-{digest}"


def read_state(state_dir: Path) -> UpState | None:
    """The recorded state, or None without a state file.

    Raises:
        ConfigError: the file exists but is not a state file (it names the file).
    """
    path = state_dir / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        return UpState.model_validate_json(text)
    except ValidationError:
        raise ConfigError(f"{path} is not a troupe state file; remove it if nothing runs") from None


def write_state(state_dir: Path, state: UpState) -> None:
    """Record ``state`` atomically (readers never see half a file)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / STATE_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(state.model_dump_json(indent=2), encoding="utf-8")
    partial.replace(path)


def remove_state(state_dir: Path) -> None:
    """Forget the recorded state."""
    (state_dir / STATE_FILE).unlink(missing_ok=True)


# -- processes (through /proc) ------------------------------------------------------------


@dataclass(frozen=True)
class _Proc:
    state: str
    sid: int
    start: int


def _proc(pid: int) -> _Proc | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = raw[raw.rindex(")") + 2 :].split()
    return _Proc(state=fields[0], sid=int(fields[3]), start=int(fields[19]))


def process_start(pid: int) -> int:
    """The start time of process ``pid`` (clock ticks after boot); 0 if it does not exist."""
    proc = _proc(pid)
    return 0 if proc is None else proc.start


def is_running(pid: int, start: int) -> bool:
    """Whether ``pid`` is the process that started at ``start`` and has not exited."""
    proc = _proc(pid)
    return proc is not None and proc.state != "Z" and proc.start == start


def session_members(sid: int) -> list[int]:
    """Live processes of session ``sid`` (zombies, which are only waiting to be reaped, not)."""
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            proc = _proc(int(entry.name))
            if proc is not None and proc.sid == sid and proc.state != "Z":
                members.append(int(entry.name))
    return members


# -- ports ----------------------------------------------------------------------------------


def port_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is fine
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now (another process may take it before it is used)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# -- the head ---------------------------------------------------------------------------------


def parse_resources(text: str, *, option: str = "--resources") -> dict[str, float]:
    """Custom Ray resources, as ``ray start --resources`` takes them.

    A JSON object of resource name -> amount, e.g. ``{"models": 1}``: a node's amounts are
    whole numbers from 0 to 10^14 (what Ray's raylet accepts; a task or actor may then ask
    for a fraction of one).

    Raises:
        ConfigError: not JSON, not an object, an empty name, one of the resources Ray counts
            itself (CPU, GPU, memory, object_store_memory: their own options), or an amount
            that is not a whole number in that range; ``detail['field']`` is ``option``.
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{option}: not JSON ({e}); e.g. '{{\"models\": 1}}'",
                          field=option) from None  # fmt: skip
    if not isinstance(data, dict):
        raise ConfigError(
            f"{option}: a JSON object of resource name -> amount, e.g. '{{\"models\": 1}}', "
            f"not {type(data).__name__}",
            field=option,
        )
    resources: dict[str, float] = {}
    for name, amount in data.items():
        if not name.strip():
            raise ConfigError(f"{option}: a resource needs a name", field=option)
        if name in _RAY_OWN_RESOURCES:
            raise ConfigError(f"{option}: {name} is Ray's own; use {_RAY_OWN_RESOURCES[name]}",
                              field=option)  # fmt: skip
        if (
            isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not math.isfinite(amount)
            or not float(amount).is_integer()
            or not 0 <= amount <= _MAX_RESOURCE
        ):
            raise ConfigError(
                f"{option}: {name!r} must be a whole number from 0 to 10^14, not {amount!r}",
                field=option,
            )
        resources[name] = amount
    return resources


@dataclass(frozen=True)
class Head:
    """A ``ray start --head`` process just spawned (``--block`` unless ``blocking`` is off)."""

    process: subprocess.Popen[bytes]
    state: UpState
    blocking: bool = True
    dashboard: bool = True
    """Whether it runs a dashboard (``--include-dashboard=false`` among its arguments: not)."""


def _auth_env(env: dict[str, str]) -> None:
    """Turn on Ray's token auth for the head unless the caller chose a mode.

    A head started with a token refuses drivers without it; drivers of this machine read the
    same token file (see ``raytroupe.runtime.cli._connect``). A missing token is made, readable by
    its owner only.
    """
    env.setdefault("RAY_AUTH_MODE", "token")
    if env["RAY_AUTH_MODE"] != "token" or env.get("RAY_AUTH_TOKEN"):
        return
    path = Path(env.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made meanwhile by another process: use that one
        return
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))


def start_head(
    *,
    state_dir: Path,
    temp_dir: Path,
    ray_port: int,
    dashboard_port: int,
    num_cpus: int | None,
    owns_temp_dir: bool,
    resources: Mapping[str, float] | None = None,
    extra_args: Sequence[str] = (),
    block: bool = True,
) -> Head:
    """Spawn ``ray start --head --block`` on 127.0.0.1, detached from this process.

    It outlives the caller (a session of its own, output to ``<state dir>/ray.log``). Ports
    that ``up`` does not expose are picked free, so this head never collides with another
    Ray of the machine on Ray's fixed defaults (client server 10001, agent 52365).

    ``block=False`` starts the head as a cluster's ``ray start --head`` does: it returns once
    the head is up, and the head's processes no longer share one fate (with ``--block``, all
    stop when any one exits, the GCS included; the GCS fault-tolerance drill needs them not
    to). They keep the session, by which :func:`stop_head` still finds them.

    ``resources`` are custom resources the head advertises (see :func:`parse_resources`):
    e.g. ``{"models": 1}`` for a local model pinned to nodes that hold its file.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    temp_dir.mkdir(parents=True, exist_ok=True)
    (temp_dir / "ray_current_cluster").unlink(missing_ok=True)
    args = [
        sys.executable, "-m", "ray.scripts.scripts", "start", "--head", *(["--block"] * block),
        "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
        f"--port={ray_port}", f"--dashboard-port={dashboard_port}", f"--temp-dir={temp_dir}",
        f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
        "--min-worker-port=0", "--max-worker-port=0",  # workers on ports the OS picks
        "--disable-usage-stats",
    ]  # fmt: skip
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus}")
    if resources:
        args.append(f"--resources={json.dumps(dict(resources))}")
    args += extra_args
    env = dict(os.environ)
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every Ray process on 127.0.0.1 only
    env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"  # see the module docstring
    env.pop("RAY_ADDRESS", None)
    _auth_env(env)
    log_file = state_dir / "ray.log"
    with log_file.open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter, fixed arguments
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    state = UpState(
        pid=process.pid,
        pid_start=process_start(process.pid),
        address=f"127.0.0.1:{ray_port}",
        dashboard_url=f"http://127.0.0.1:{dashboard_port}",
        temp_dir=temp_dir,
        owns_temp_dir=owns_temp_dir,
        log_file=log_file,
        started_at=time.time(),
    )
    dashboard = "--include-dashboard=false" not in extra_args
    return Head(process=process, state=state, blocking=block, dashboard=dashboard)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_ready(head: Head, timeout: float) -> None:
    """Wait until the head runs and its dashboard listens.

    The head writes its address once its processes are up; its dashboard (which `ray job
    submit` talks to), when it has one, may start listening a little later on a loaded
    machine: both are waited for.

    Raises:
        ConfigError: ``ray start`` exited (its log's tail is in the message and in
            ``detail['log']``), or was not up within ``timeout`` seconds.
    """
    marker = head.state.temp_dir / "ray_current_cluster"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        returned = head.process.poll()
        if returned is not None and (head.blocking or returned != 0):
            log = _tail(head.state.log_file)
            raise ConfigError(
                f"ray start exited with status {head.process.returncode}; "
                f"see {head.state.log_file}",
                log=log,
            )
        try:
            if marker.read_text(encoding="utf-8").strip() == head.state.address and (
                not head.dashboard or _listens(head.state.dashboard_url)
            ):
                return
        except OSError:
            pass
        time.sleep(_POLL_S)
    raise ConfigError(f"Ray did not start within {timeout} s; see {head.state.log_file}")


def _listens(url: str) -> bool:
    """Whether something accepts connections at ``url``'s host and port."""
    host, _, port = url.removeprefix("http://").partition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=_POLL_S):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class StopReport:
    """How a stop went."""

    seconds: float
    was_running: bool
    killed: tuple[int, ...] = ()
    left: tuple[int, ...] = ()


def _wait_gone(sid: int, until: float) -> list[int]:
    while True:
        members = session_members(sid)
        if not members or time.monotonic() >= until:
            return members
        time.sleep(_POLL_S)


def stop_head(state: UpState, grace: float = _STOP_GRACE_S) -> StopReport:
    """Stop what ``up`` started: SIGTERM its leader, then SIGKILL what outlives ``grace``.

    Only processes of the recorded session are signalled. If the recorded PID now belongs to
    another process (the head died and the PID was reused), nothing is.
    """
    began = time.monotonic()
    leader = _proc(state.pid)
    if leader is not None and leader.start != state.pid_start:
        return StopReport(seconds=0.0, was_running=False)
    was_running = is_running(state.pid, state.pid_start)
    if was_running:
        os.kill(state.pid, signal.SIGTERM)
    else:  # a head started without --block, or whose `ray start` died: its processes first
        for pid in session_members(state.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    left = _wait_gone(state.pid, began + grace)
    killed = []
    for pid in left:
        proc = _proc(pid)
        if proc is not None and proc.sid == state.pid:  # still ours, not a reused PID
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    left = _wait_gone(state.pid, time.monotonic() + _KILL_WAIT_S)
    return StopReport(
        seconds=time.monotonic() - began,
        was_running=was_running,
        killed=tuple(killed),
        left=tuple(left),
    )
