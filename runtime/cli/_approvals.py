"""``troupe approvals|approve|reject``: tool calls held for a person.

Each command acts on a deployment over HTTP when one is named (``--url``, ``--profile``), else
on the Ray of this machine through the driver API, as the tenant ``--tenant`` names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import typer
from rich.table import Table

from raytroupe.runtime.cli._jobs import JobId, Tenant
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import tenant_transport
from raytroupe.runtime.cli._show import OUT, plain_row, usage

if TYPE_CHECKING:
    from raytroupe.protocols.llm import ToolArguments

__all__ = ["HeldCall", "approvals", "approvals_table", "approve", "reject"]


def approvals(
    job_id: Annotated[
        str | None, typer.Argument(help="One job (default: every job waiting for approval).")
    ] = None,
    *,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Tool calls waiting for a person: their approval ids, tools and exact arguments."""
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        pending = api.approvals(job_id)
    OUT.print(approvals_table((p.job_id, p) for p in pending))


def approvals_table(pending: Iterable[tuple[str, HeldCall]]) -> Table:
    """Held tool calls: job, approval id, agent, tool, arguments (JSON)."""
    table = Table(title_justify="left")
    table.add_column("job", overflow="fold")
    table.add_column("approval", overflow="fold")  # ids to copy: folded, never cut
    for column in ("agent", "tool", "arguments"):
        table.add_column(column)
    count = 0
    for job_id, call in pending:
        count += 1
        arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
        plain_row(table, job_id, call.approval_id, call.agent, call.tool, arguments)
    table.title = f"{count} tool call(s) waiting for approval"
    return table


class HeldCall(Protocol):
    """What :func:`approvals_table` reads of a held call (an ``ApprovalRequest``, say)."""

    @property
    def approval_id(self) -> str:
        """The id to approve or reject it by."""
        ...

    @property
    def agent(self) -> str:
        """The agent that asked."""
        ...

    @property
    def tool(self) -> str:
        """The tool it would call."""
        ...

    @property
    def arguments(self) -> ToolArguments:
        """The exact arguments."""
        ...


def approve(
    job_id: JobId,
    approval_id: Annotated[str, typer.Argument(help="The held call's id (`troupe approvals`).")],
    *,
    reason: Annotated[str | None, typer.Option(help="Why (kept with the decision).")] = None,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Let a held tool call run."""
    _decide(job_id, approval_id, approved=True, reason=reason, tenant=tenant, address=address,
            state_dir=state_dir)  # fmt: skip


def reject(
    job_id: JobId,
    approval_id: Annotated[str, typer.Argument(help="The held call's id (`troupe approvals`).")],
    *,
    reason: Annotated[str, typer.Option(help="Why (the agent is told).")],
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Refuse a held tool call: the agent sees the refusal and its reason."""
    if not reason.strip():
        raise usage("--reason must say why")
    _decide(job_id, approval_id, approved=False, reason=reason, tenant=tenant, address=address,
            state_dir=state_dir)  # fmt: skip


def _decide(
    job_id: str,
    approval_id: str,
    *,
    approved: bool,
    reason: str | None,
    tenant: str | None,
    address: str | None,
    state_dir: Path | None,
) -> None:
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        if approved:
            api.approve(job_id, approval_id, reason)
        else:
            api.reject(job_id, approval_id, reason or "")
    said = "approved" if approved else "rejected"
    OUT.print(f"job {job_id}: call {approval_id} {said}", markup=False)
