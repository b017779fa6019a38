"""What a tenant may ask of the cluster: its policy, and the names its inline teams get.

A tenant (an API key that is not an admin's, or a driver acting for a tenant) may run
registered teams and, within its :class:`TenantPolicy`, inline teams. An inline team is data:
it names model aliases and tools the operator configured, and its agents' and team's names are
scoped to the tenant (:func:`scoped_name`), so that no choice of names reaches another
tenant's agents or a registered team's. An admin's inline team (a driver's) is scoped to its
tenant too, unchecked by any policy. What a job's caller reads of it (its result, events,
approvals, trace, usage) names them as the caller wrote them (:func:`as_written`); actor
names (the Ray dashboard's) keep the scope.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.llm import Budget

__all__ = ["TenantPolicy", "as_written", "scoped_name", "tenant_scope", "unscoped"]

T = TypeVar("T")


class TenantPolicy(BaseModel):
    """The operator's limits on one tenant's jobs (or the default for every tenant).

    Every cap applies to inline teams; ``teams``, ``max_budget`` and ``image_urls`` also to
    jobs of registered teams. Admin keys are not bound by any of it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    inline_teams: bool = Field(
        default=True, description="May send team definitions with a job (else: names only)."
    )
    teams: tuple[Name, ...] | None = Field(
        default=None, description="Registered teams it may run by name (None: every one)."
    )
    skills: tuple[Name, ...] | None = Field(
        default=None, description="Registered skills it may run and see (None: every one)."
    )
    models: tuple[Name, ...] = Field(
        default=("default",),
        description="Model aliases (configured by the operator) its inline agents may use.",
    )
    tools: tuple[Name, ...] = Field(
        default=("calculator",),
        description="Tools its inline agents may be given (python, shell, http_get, file "
        "tools, MCP and function tools are each the operator's choice).",
    )
    max_budget: Budget | None = Field(
        default=None,
        description="Ceiling of one job's budget; a job without a budget gets this one.",
    )
    max_agents: int = Field(default=8, ge=1, le=256, description="Agents of one inline team.")
    max_live_agents: int = Field(
        default=32,
        ge=1,
        le=4096,
        description="Agents of its inline teams kept running at once; the least recently "
        "used idle teams are stopped to make room.",
    )
    agents_idle_s: float | None = Field(
        default=300.0,
        ge=1.0,
        le=7 * 24 * 3600.0,
        description="Seconds an inline team's agents keep running after its last job; then "
        "they are stopped, and the team's next job starts them again. None: kept until "
        "max_live_agents needs their room.",
    )
    max_turns: int = Field(default=12, ge=1, le=100, description="AgentSpec.max_turns, at most.")
    max_agent_concurrency: int = Field(
        default=8, ge=1, le=256, description="AgentSpec.max_concurrency, at most."
    )
    max_subtasks: int = Field(
        default=32, ge=1, le=1024, description="TeamSpec.max_subtasks, at most."
    )
    max_parallel: int = Field(default=16, ge=1, le=1024, description="TeamSpec.max_parallel.")
    max_redundancy: int = Field(
        default=3, ge=1, le=16, description="A planned subtask's redundancy, at most."
    )
    max_timeout_s: float = Field(
        default=600.0, gt=0.0, description="Subtask timeouts, at most (seconds)."
    )
    max_graph_steps: int = Field(default=50, ge=1, le=1000, description="GraphSpec.max_steps.")
    image_urls: bool = Field(
        default=False,
        description="May attach images by URL (a model server may fetch them from inside the "
        "cluster's network); base64 images are always allowed.",
    )


_SLUG: Final = re.compile(r"[^A-Za-z0-9]")


def tenant_scope(tenant: str) -> str:
    """The prefix of the names of ``tenant``'s inline agents and teams: ``acme-3f2a9c``.

    Letters and digits of the tenant (at most 8, for people) and 6 hex digits of its hash
    (for uniqueness): different tenants get different prefixes, and no agent name a tenant
    chooses can produce another tenant's prefix, since the prefix ends at the first ``.``.
    """
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:6]
    return f"{_SLUG.sub('', tenant)[:8] or 't'}-{digest}"


def scoped_name(tenant: str, name: str) -> str:
    """``name`` as the actor or team name of an inline definition of ``tenant``."""
    return f"{tenant_scope(tenant)}.{name}"


def unscoped(name: str, tenant: str) -> str:
    """``name`` as ``tenant`` wrote it: without its scope, if it is one of its scoped names."""
    prefix = f"{tenant_scope(tenant)}."
    return name.removeprefix(prefix) if name.startswith(prefix) and name != prefix else name


def as_written(value: T, tenant: str) -> T:
    """``value`` (a record of one of ``tenant``'s jobs) with its names as the tenant wrote them.

    Every string in it (a model's fields, lists, tuples, dicts' keys and values, recursively)
    loses ``tenant``'s scope: ``acme-3f2a9c.ada`` is ``ada`` again, in a field of its own or in
    a sentence. Other tenants' scopes are left as they are. What has nothing to change is
    returned itself, not copied.
    """
    return _unscope(value, f"{tenant_scope(tenant)}.")  # type: ignore[no-any-return]


def _unscope(value: Any, prefix: str) -> Any:
    if isinstance(value, str):
        return value.replace(prefix, "") if prefix in value else value
    if isinstance(value, BaseModel):
        return _unscope_model(value, prefix)
    if isinstance(value, list | tuple | dict):
        return _unscope_items(value, prefix)
    return value


def _unscope_model(model: BaseModel, prefix: str) -> BaseModel:
    changed = {}
    for name in type(model).model_fields:
        old = getattr(model, name)
        new = _unscope(old, prefix)
        if new is not old:
            changed[name] = new
    return model.model_copy(update=changed) if changed else model


def _unscope_items(value: list[Any] | tuple[Any, ...] | dict[Any, Any], prefix: str) -> Any:
    if isinstance(value, dict):
        pairs = [(_unscope(k, prefix), _unscope(v, prefix)) for k, v in value.items()]
        old = value.items()
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, old, strict=True))
        return value if same else dict(pairs)
    items = [_unscope(item, prefix) for item in value]
    if all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return items if isinstance(value, list) else type(value)(items)
