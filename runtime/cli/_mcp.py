"""``troupe mcp``: the teams and skills as an MCP server on stdin and stdout."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from raytroupe.runtime.cli import _remote
from raytroupe.runtime.cli._options import Address, StateDir

__all__ = ["mcp"]


def mcp(
    *,
    address: Address = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            help="Run jobs as this tenant, under its policy (default: as the driver, every "
            "team and skill).",
            show_default=False,
        ),
    ] = None,
    state_dir: StateDir = None,
) -> None:
    """Serve the teams and skills to an MCP client on stdin/stdout (Claude Desktop & co).

    The client starts it as a child process. It joins the Ray `troupe up` started (or
    --address), else starts one for as long as it runs. A deployment's HTTP app serves the
    same tools at <url>/mcp to clients that speak streamable HTTP, with their keys.
    """
    from raytroupe.runtime.cli._connect import close
    from raytroupe.runtime.cli._jobs import connect_for_job

    _remote.local_only("mcp")
    with _quiet_stdout():  # stdout is the protocol's: joining Ray says nothing on it
        rt = connect_for_job(address, state_dir, detach=False)
    try:
        rt.serve_mcp(tenant=tenant)
    finally:
        close(rt)


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """What this process (and its children) writes to fd 1 goes to stderr meanwhile."""
    kept = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(kept, 1)
        os.close(kept)
