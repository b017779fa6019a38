"""What the ``troupe up`` tests read of this machine: a session's processes, free ports."""

from __future__ import annotations

import socket
import subprocess

__all__ = ["free_ports", "live_in_session"]


def live_in_session(sid: int) -> set[int]:
    """PIDs of session ``sid`` that are not zombies (``ps``, independently of the CLI)."""
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,sid=,stat="],  # noqa: S607 - procps from PATH
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = (line.split() for line in out.splitlines())
    return {int(pid) for pid, s, stat in rows if int(s) == sid and not stat.startswith("Z")}


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports free now (held together while chosen, then released)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
