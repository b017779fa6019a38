"""``troupe webhooks create|list|show|delete|deliveries``: a tenant's endpoints for job events."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import tenant_transport
from raytroupe.runtime.cli._show import OUT, plain_row

__all__ = ["webhooks_app"]

webhooks_app = typer.Typer(
    help="Webhooks: URLs told (signed, retried) when your jobs end or wait for a person.",
    no_args_is_help=True,
)
Tenant = Annotated[str, typer.Option(help="Whose webhooks (a local driver's choice).")]
WebhookArg = Annotated[str, typer.Argument(help="The webhook's id (wh-...).")]


def _when(at: float | None) -> str:
    return "" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


@webhooks_app.command("create")
def create(
    url: Annotated[str, typer.Argument(help="Where each event is POSTed (http or https).")],
    *,
    event: Annotated[
        list[str] | None,
        typer.Option(help="An event it hears (repeat it; default: ended or waiting)."),
    ] = None,
    job: Annotated[str | None, typer.Option(help="Only this job's events.")] = None,
    description: Annotated[str, typer.Option(help="What it is for.")] = "",
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Make a webhook; prints its id and its signing secret (shown this once)."""
    spec: dict[str, object] = {"url": url, "job_id": job, "description": description}
    if event:
        spec["events"] = event
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        made = api.create_webhook(spec)
    OUT.print(f"{made.id}  {', '.join(made.events)}", markup=False)
    OUT.print(f"secret (shown once): {made.secret}", markup=False)


@webhooks_app.command("list")
def list_webhooks(
    *, tenant: Tenant = "default", address: Address = None, state_dir: StateDir = None
) -> None:
    """The tenant's webhooks and A2A push configs."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        found = api.webhooks()
    table = Table("webhook", "kind", "url", "events", "job", "made")
    for hook in found:
        plain_row(table, hook.id, hook.kind, hook.url, ", ".join(hook.events),
                  hook.job_id or "", _when(hook.created_at))  # fmt: skip
    OUT.print(table)


@webhooks_app.command("show")
def show(
    webhook_id: WebhookArg,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """One webhook, as JSON (without its secret)."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        hook = api.webhook(webhook_id)
    OUT.print_json(hook.model_dump_json())


@webhooks_app.command("delete")
def delete(
    webhook_id: WebhookArg,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Drop a webhook; its deliveries not yet made fail."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        api.delete_webhook(webhook_id)
    OUT.print(f"deleted webhook {webhook_id}", markup=False)


@webhooks_app.command("deliveries")
def deliveries(
    webhook_id: WebhookArg,
    *,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many, newest first.")] = 20,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A webhook's latest deliveries: state, attempts, last answer or error."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        found = api.webhook_deliveries(webhook_id, limit=limit)
    table = Table("delivery", "job", "seq", "event", "state", "tries", "status", "error")
    for one in found:
        said = (one.last_error or "")[:120]
        plain_row(table, one.id, one.job_id, str(one.seq), one.type, one.state,
                  str(one.attempts), str(one.status_code or ""), said)  # fmt: skip
    OUT.print(table)
