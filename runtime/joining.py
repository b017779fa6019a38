"""Joining a Ray: on loopback when it listens there, with its auth token when it wants one.

A driver script (``RAY_ADDRESS=127.0.0.1:6379 python my_job.py``) and the CLI join a Ray the
same way; without these two steps, joining the Ray that `troupe up` started hangs (Ray swaps
127.0.0.1 for the machine's external address, where nothing listens) or is refused (no token).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ray._private import ray_constants, services
from ray._private.authentication import authentication_token_setup

__all__ = [
    "answering",
    "env_address",
    "on_loopback",
    "prepare_join",
    "ray_auth",
    "running_here",
    "stay_on_loopback",
]

ANSWER_WAIT_S = 2.0


def env_address() -> str | None:
    """``$RAY_ADDRESS``, or None when it is unset or blank.

    A blank one (``RAY_ADDRESS= python job.py``, as people clear a variable) is dropped from
    this process's environment too: Ray reads the variable itself, for ``address="auto"`` and
    in the processes it starts, and refuses an empty one ("Invalid address format").
    """
    value = os.environ.get("RAY_ADDRESS")
    if value is not None and not value.strip():
        del os.environ["RAY_ADDRESS"]
        return None
    return value


def stay_on_loopback() -> None:
    """Make a local Ray listen on 127.0.0.1 only, as a single-machine instance.

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` when it is imported: the processes it
    starts read the variable, this process (which imported Ray already) the constant. Measured
    here: with both set no Ray process listens on another interface; with only one, several do.
    """
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0":
        ray_constants.ENABLE_RAY_CLUSTER = False


def ray_auth() -> None:
    """Send Ray's auth token when this machine has one and the caller chose no mode.

    Ray itself does so only for ``address="auto"``; a head that ``troupe up`` started with a
    token refuses a driver that joins it by address without one. Measured: a driver sending a
    token still joins a head that has auth off.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or path.is_file():
        # sets the variable and refreshes the config Ray cached when it was imported
        authentication_token_setup._enable_token_auth()


def on_loopback(address: str) -> bool:
    """Whether ``host:port`` names this machine's loopback interface."""
    host = address.rpartition(":")[0].strip("[]")
    return host in {"localhost", "::1"} or host.startswith("127.")


def prepare_join(address: str) -> None:
    """Get ready to join the Ray at ``address`` (a ``host:port``; ``ray://`` needs nothing)."""
    if "://" in address:
        return
    ray_auth()
    if on_loopback(address):
        stay_on_loopback()


def answering(address: str, *, within_s: float = ANSWER_WAIT_S) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` (no host: 127.0.0.1)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), within_s):
            return True
    except (OSError, ValueError):
        return False


def running_here() -> str | None:
    """The Ray on this machine that ``address="auto"`` would join, if its GCS answers; else None.

    Ray takes the address from ``<temp dir>/ray_current_cluster``, which the last ``ray start``
    wrote, or from a GCS process it finds. The file outlives a Ray that was killed or whose
    machine restarted without clearing /tmp, and ``ray.init(address="auto")`` then waits for
    that GCS without end (measured: still waiting when stopped at 300 s). A port that refuses
    connections is no Ray.
    """
    try:
        found = services.get_ray_address_from_environment("auto", None)
    except ConnectionError:  # none found
        return None
    return found if found and answering(found) else None
