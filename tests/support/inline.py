"""The names a driver's inline team runs under: its agents are actors of the job's tenant.

A driver submits for tenant ``default`` unless it says otherwise, and an inline team's agents
and roles are scoped to the job's tenant (``agent/default-<hash>.ada``), as a tenant's are, so
no inline team takes a registered team's names. Tests that reach those actors by name (to
kill one, to read the router's registry) name them through these.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from raytroupe.protocols import TenantPolicy, scoped_name, team_role

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


@contextmanager
def idle_agents_kept(rt: Any, tenant: str = DRIVER_TENANT) -> Iterator[None]:
    """Within: ``tenant``'s inline agents stay while idle (its policy's ``agents_idle_s`` is
    None), for tests that reach agents by name after their jobs end. The session stops them
    30 s after their last job (``tests/conftest.py``); on a loaded machine a drill took longer
    than that between a job and its look at the agents. For a tenant without a policy of its
    own, which it has again after."""
    assert tenant not in rt.policies(), f"{tenant} has a policy of its own"
    rt.put_policy(tenant, TenantPolicy(agents_idle_s=None))
    try:
        yield
    finally:
        rt.delete_policy(tenant)
