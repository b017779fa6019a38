"""The processes of a Unix session, read with ``ps`` (independently of the CLI under test)."""

from __future__ import annotations

import subprocess

__all__ = ["live_in_session"]


def live_in_session(sid: int) -> set[int]:
    """PIDs of session ``sid`` that are not zombies."""
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,sid=,stat="],  # noqa: S607 - procps from PATH
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rows = (line.split() for line in out.splitlines())
    return {int(pid) for pid, s, stat in rows if int(s) == sid and not stat.startswith("Z")}
