"""Connecting the CLI to Ray: which Ray, with which credentials, without Ray's chatter."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # Ray and the driver load when a command connects, not for --help
    from raytroupe.runtime.driver import Runtime

__all__ = ["close", "connect", "connect_from", "resolve_address"]

_PROBE_S: Final = 3.0


def resolve_address(explicit: str | None, state_dir: Path) -> str | None:
    """The Ray to join: ``explicit``, else `up`'s if it runs, else ``$RAY_ADDRESS``, or None.

    Never Ray's ``"auto"``: it joins whichever Ray process it finds on the machine (another
    user's, a test suite's), and on a machine whose Ray listens on 127.0.0.1 only it resolves
    the address to the external interface and retries for minutes.
    """
    from raytroupe.runtime.cli._local import is_running, read_state
    from raytroupe.runtime.joining import env_address

    if explicit:
        return explicit
    state = read_state(state_dir)
    if state is not None and is_running(state.pid, state.pid_start):
        return state.address
    return env_address()


def _probe(address: str) -> None:
    """Fail fast on a ``host:port`` nothing listens on (Ray itself retries for a minute)."""
    from raytroupe.protocols import ConfigError
    from raytroupe.runtime.joining import answering

    _, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return
    if not answering(address, within_s=_PROBE_S):
        raise ConfigError(f"no Ray answers at {address}", address=address)


def connect(address: str | None, *, start_local: bool = False, **options: Any) -> Runtime:
    """Join the Ray at ``address`` and raytroupe's actors on it.

    Without ``address``, start a local Ray for this command if ``start_local``. Worker output
    stays in Ray's log files instead of this terminal. ``options`` go to
    :func:`raytroupe.runtime.connect` (they configure system actors this call starts).

    Raises:
        ConfigError: nothing answers at ``address``, or there is no address and not
            ``start_local``.
    """
    import ray

    from raytroupe import runtime
    from raytroupe.actors.spawn import NAMESPACE
    from raytroupe.protocols import ConfigError
    from raytroupe.runtime.joining import prepare_join

    if address is None:
        if not start_local:
            raise ConfigError("nothing is up: start Ray with `troupe up`, or pass --address")
        return runtime.connect(address="local", log_level="warning", **options)
    prepare_join(address)
    _probe(address)
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except ConnectionError as exc:
        raise ConfigError(f"cannot join Ray at {address}: {exc}", address=address) from None
    return runtime.connect(log_level="warning", **options)


def close(rt: Runtime) -> None:
    """Disconnect; a local Ray that :func:`connect` started for this command stops."""
    import ray

    rt.shutdown()
    if ray.is_initialized():
        ray.shutdown()


def connect_from(
    address: str | None, state_dir: Path | None, *, start_local: bool = False
) -> Runtime:
    """:func:`connect` to ``address``, else the Ray `troupe up` recorded in ``state_dir``."""
    from raytroupe.runtime.cli._local import default_state_dir

    where = resolve_address(address, (state_dir or default_state_dir()).expanduser())
    return connect(where, start_local=start_local)
