"""``troupe policies mine|list|set|delete``: what tenants' jobs may ask for; ``troupe me``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import transport
from raytroupe.runtime.cli._show import OUT, show_yaml

__all__ = ["me", "policies_app"]

policies_app = typer.Typer(
    help="Tenants' policies: yours; every one, set or dropped by admins.", no_args_is_help=True
)
Tenant = Annotated[str, typer.Argument(help="The tenant ('*': the default policy).")]


def me(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Who you are to the deployment: your key's name, its tenant, whether it is an admin's."""
    with transport(address, state_dir) as api:
        caller = api.me()
    admin = ", admin" if caller.admin else ""
    OUT.print(f"{caller.name} (tenant {caller.tenant}{admin})", markup=False)


@policies_app.command("mine")
def mine(*, address: Address = None, state_dir: StateDir = None) -> None:
    """The policy that binds your tenant, as YAML (`policies set` takes it back)."""
    with transport(address, state_dir) as api:
        show_yaml(api.policy())


@policies_app.command("list")
def list_policies(*, address: Address = None, state_dir: StateDir = None) -> None:
    """Every tenant policy set, by tenant ('*': the default)."""
    with transport(address, state_dir) as api:
        found = api.policies()
    for tenant, policy in sorted(found.items()):
        OUT.print(f"# {tenant}", markup=False)
        show_yaml(policy)
    OUT.print(f"{len(found)} polic{'y' if len(found) == 1 else 'ies'}", markup=False)


@policies_app.command("set")
def set_policy(
    tenant: Tenant,
    file: Annotated[Path, typer.Argument(help="The policy, as YAML or JSON.", exists=True)],
    *,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Set a tenant's policy from a file: its new jobs are checked against it."""
    from raytroupe.protocols import TenantPolicy
    from raytroupe.protocols.config.files import read_yaml, validated

    policy = validated(TenantPolicy, read_yaml(file, what="policy"), source=str(file),
                       what="policy")  # fmt: skip
    with transport(address, state_dir) as api:
        api.put_policy(tenant, policy)
    OUT.print(f"policy of {tenant}: set", markup=False)


@policies_app.command("delete")
def delete_policy(tenant: Tenant, *, address: Address = None, state_dir: StateDir = None) -> None:
    """Drop a tenant's own policy: the default binds it again."""
    with transport(address, state_dir) as api:
        api.delete_policy(tenant)
    OUT.print(f"policy of {tenant}: dropped (the default binds it)", markup=False)
