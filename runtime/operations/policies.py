"""Tenants' policies: the caller's own; every one, set and dropped by admins.

A policy says what a tenant's jobs may ask for (teams, tools, models, budgets); ``*`` is the
default, binding every tenant without a policy of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols import TenantPolicy
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = ["delete_policy", "policies", "policy", "put_policy"]

TAG: Final = "tenants"

Tenant = Annotated[str, Field(pattern=r"^(\*|[A-Za-z0-9_.-]{1,64})$")]
"""A tenant's name, or ``*`` (the default policy)."""


@operation("GET", "/v1/policy", cli="policies mine")
async def policy(at: At) -> TenantPolicy:
    """The policy that binds the caller's tenant (its own, else the default)."""
    return await at.system.policy(at.tenant)


@operation("GET", "/v1/tenants/policies", cli="policies list", admin=True)
async def policies(at: At) -> dict[str, TenantPolicy]:
    """Every tenant policy set, by tenant (``*``: the default)."""
    return await at.system.policies()


@operation("PUT", "/v1/tenants/{tenant}/policy", cli="policies set", admin=True)
async def put_policy(
    at: At, tenant: Tenant, policy: TenantPolicy | Mapping[str, Any]
) -> TenantPolicy:
    """Set a tenant's policy (``*``: the default for tenants without one); that policy.

    New jobs of the tenant are checked against it; a running job keeps what it was admitted
    with, and is checked against it again where it re-enters (a resume, a fork).
    """
    chosen = given(TenantPolicy, policy)
    await at.system.put_policy(tenant, chosen)
    return chosen


@operation("DELETE", "/v1/tenants/{tenant}/policy", cli="policies delete", admin=True)
async def delete_policy(at: At, tenant: Tenant) -> None:
    """Drop a tenant's own policy: the default binds it again."""
    await at.system.put_policy(tenant, None)
