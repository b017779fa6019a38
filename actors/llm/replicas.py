"""How a pool's replicas share its aliases: one slot each, and a script played by ``llm-0``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard

from raytroupe.protocols import ConfigError, DeploymentSpec, ModelSpec, RouteSpec, ScriptedModel

__all__ = ["check_share", "reaches_script", "served_here"]


def check_share(alias: str, spec: ModelSpec, replicas: int) -> None:
    """Check that every one of ``replicas`` replicas gets a slot of ``spec``'s concurrency.

    Raises:
        ConfigError: its ``max_concurrency`` is below the number of replicas.
    """
    slots = getattr(spec, "max_concurrency", None)
    if slots is not None and slots < replicas:
        raise ConfigError(
            f"{alias} allows {slots} concurrent calls, fewer than the pool's "
            f"{replicas} replicas (each needs one): raise its max_concurrency or "
            "lower LLMConfig.replicas",
            alias=alias,
        )


def served_here(spec: ModelSpec, *, forwards_scripts: bool) -> TypeGuard[DeploymentSpec]:
    """Whether a replica runs a provider for ``spec``.

    Not for a route (it names deployments), nor, on replicas that forward scripted calls
    (all but the first), for a scripted model: its turns are one sequence, so ``llm-0``
    alone plays them.
    """
    if isinstance(spec, RouteSpec):
        return False
    return not (isinstance(spec, ScriptedModel) and forwards_scripts)


def reaches_script(
    specs: Mapping[str, ModelSpec], alias: str, seen: frozenset[str] = frozenset()
) -> bool:
    """Whether a call to ``alias`` may reach a scripted model (directly or by a route)."""
    spec = specs.get(alias)
    if spec is None or alias in seen:
        return False
    if isinstance(spec, RouteSpec):
        names = (*spec.deployments, *spec.fallbacks)
        return any(reaches_script(specs, name, seen | {alias}) for name in names)
    return isinstance(spec, ScriptedModel)
