"""The names a driver's inline team runs under: its agents are actors of the job's tenant.

A driver submits for tenant ``default`` unless it says otherwise, and an inline team's agents
and roles are scoped to the job's tenant (``agent/default-<hash>.ada``), as a tenant's are, so
no inline team takes a registered team's names. Tests that reach those actors by name (to
kill one, to read the router's registry) name them through these.
"""

from __future__ import annotations

import re

from raytroupe.protocols import scoped_name, team_role

DRIVER_TENANT = "default"


def agent_name(name: str, tenant: str = DRIVER_TENANT) -> str:
    """The router's name of inline agent ``name`` of a job of ``tenant``."""
    return scoped_name(tenant, name)


def agent_actor(name: str, tenant: str = DRIVER_TENANT) -> str:
    """The Ray actor name of inline agent ``name`` of a job of ``tenant``."""
    return f"agent/{agent_name(name, tenant)}"


def inline_role(team: str, role: str, tenant: str = DRIVER_TENANT) -> str:
    """The router's role of ``role`` in inline team ``team`` of a job of ``tenant``."""
    return team_role(scoped_name(tenant, team), role)


_SCOPE = re.compile(r"^[A-Za-z0-9]{1,8}-[0-9a-f]{6}\.")


def written(name: str) -> str:
    """``name`` without the tenant scope it may have (``acme-3f2a9c.ada`` is ``ada``)."""
    return _SCOPE.sub("", name, count=1)
