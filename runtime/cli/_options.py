"""Options several ``troupe`` commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["Address", "StateDir"]

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
