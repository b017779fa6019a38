"""``troupe checkpoints|resume|fork``: a graph job's checkpoints, its interrupts, its forks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import tenant_transport
from raytroupe.runtime.cli._show import ERR, OUT, error, plain_row

if TYPE_CHECKING:
    from raytroupe.protocols.graph_checkpoints import GraphCheckpoint

__all__ = ["checkpoints", "checkpoints_table", "fork", "interrupts", "resume"]

JobId = Annotated[str, typer.Argument(help="The graph job's id.")]
Tenant = Annotated[
    str | None,
    typer.Option(help="Reach the job as this tenant (default: any tenant's job).",
                 show_default=False),
]  # fmt: skip
StateEdit = Annotated[
    str | None,
    typer.Option("--state", help="Fields of the state to change, as a JSON object.",
                 show_default=False),
]  # fmt: skip


def _json(option: str, text: str | None, *, mapping: bool = False) -> Any:
    """``text`` parsed as JSON (None stays None); a usage error (exit 2) if it is not."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        error(f"{option} is not JSON: {e}")
        raise typer.Exit(2) from None
    if mapping and not isinstance(value, dict):
        error(f"{option} must be a JSON object (field: value), not {type(value).__name__}")
        raise typer.Exit(2)
    return value


def checkpoints_table(points: Iterable[GraphCheckpoint]) -> Table:
    """Checkpoints in the order given: subgraph, superstep, when, what runs next, interrupt."""
    table = Table(title_justify="left")
    for column in ("namespace", "step", "at", "next", "interrupt"):
        table.add_column(column, justify="right" if column == "step" else "left")
    count = 0
    for point in points:
        count += 1
        runs = (t.node if t.index is None else f"{t.node}[{t.index}]" for t in point.next)
        plain_row(
            table,
            point.namespace or Text("(graph)", style="dim"),
            str(point.step),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(point.at)),
            ", ".join(runs) or Text("(end)", style="dim"),
            Text(point.interrupt.id, style="magenta") if point.interrupt else "",
        )
    table.title = f"{count} checkpoint(s)"
    return table


def checkpoints(
    job_id: JobId,
    *,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A graph job's checkpoints, one per superstep (and per subgraph's), oldest first."""
    from pydantic import TypeAdapter

    from raytroupe.protocols.graph_checkpoints import GraphCheckpoint

    with tenant_transport(tenant, address, state_dir, default=None) as api:
        points = api.checkpoints(job_id)
    if as_json:
        dumped = TypeAdapter(list[GraphCheckpoint]).dump_json(points, indent=2)
        typer.echo(dumped.decode())
    else:
        OUT.print(checkpoints_table(points))


def resume(
    job_id: JobId,
    *,
    value: Annotated[
        str | None,
        typer.Option(help="The value the node resumes with, as JSON.", show_default=False),
    ] = None,
    state: StateEdit = None,
    interrupt: Annotated[
        str | None,
        typer.Option(help="The interrupt answered (only when several wait).", show_default=False),
    ] = None,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Let a graph job waiting for input go on: with a value, a state edit, both or neither."""
    from raytroupe.protocols import Conflict

    resumed_with = _json("--value", value)
    edit = _json("--state", state, mapping=True)
    try:
        with tenant_transport(tenant, address, state_dir, default=None) as api:
            answered = api.resume(job_id, resumed_with, state=edit, interrupt=interrupt).interrupt
    except Conflict as exc:  # name the interrupts it waits at, for --interrupt
        waiting = exc.detail.get("waiting")
        named = ", ".join(map(str, waiting)) if isinstance(waiting, list) else ""
        listed = f" (waiting: {named})" if named else ""
        error(exc.message + listed)
        raise typer.Exit(1) from None
    OUT.print(f"job {job_id} resumed at {answered.id} ({answered.when} node {answered.node})",
              markup=False, soft_wrap=True)  # fmt: skip


def interrupts(
    *,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Graph jobs waiting for a person's input: the interrupt to resume, and the state."""
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        waiting = api.interrupts()
    table = Table("job", "interrupt", "node", "state")
    for pending in waiting:
        where = f"{pending.interrupt.when} {pending.interrupt.node}"
        state = json.dumps(pending.state, default=str)
        plain_row(table, pending.job_id, pending.interrupt.id, where, state[:200])
    OUT.print(table)


def fork(
    job_id: JobId,
    step: Annotated[int, typer.Argument(help="The checkpoint's superstep to start from.", min=0)],
    *,
    state: StateEdit = None,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Start a new job from a checkpoint of a graph job (its state edited or not); its id."""
    edit = _json("--state", state, mapping=True)
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        new_id = api.fork(job_id, step, state=edit).job_id
    typer.echo(new_id)  # alone on stdout, for scripts: NEW=$(troupe fork ...)
    ERR.print(f"forked from job {job_id} at step {step}", markup=False, style="dim")
