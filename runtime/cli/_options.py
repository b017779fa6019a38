"""Options several ``troupe`` commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["Address", "StateDir", "state_dir_of"]

StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="TROUPE_STATE_DIR",
        help="Where `up` records what it started (default: ~/.raytroupe).",
        show_default=False,
    ),
]
Address = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Ray address, host:port or ray://... (default: the Ray `troupe up` started, "
        "else $RAY_ADDRESS).",
        show_default=False,
    ),
]


def state_dir_of(given: Path | None) -> Path:
    """The state directory: ``given``, else the default (``~/.raytroupe``)."""
    from raytroupe.runtime.cli._local import default_state_dir

    return (given or default_state_dir()).expanduser()
