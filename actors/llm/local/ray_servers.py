"""Ray glue for local models: each server's supervisor is the detached actor ``model/<alias>``.

Placed by the model's resources (``num_cpus``, ``num_gpus``, custom ``resources``: a GPU
cluster puts it on a GPU node), restarted by Ray without limit; a restarted supervisor
starts its server again (the old one died with the old supervisor). The server listens on
its node's address so that pool replicas on other nodes reach it; its key keeps others out.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import ray

from raytroupe.actors.lifecycle import with_lifecycle
from raytroupe.actors.llm.local.server import LlamaServer, LocalEndpoint
from raytroupe.actors.ray_handles import NAMESPACE, through_restarts, unwrap
from raytroupe.protocols import LocalModel

__all__ = ["RayLocalServers", "model_actor_name"]

STARTS_WITHIN_S: Final = 60.0
"""How long a call keeps waiting for a supervisor that Ray is restarting."""


def model_actor_name(alias: str) -> str:
    """The supervisor's actor name."""
    return f"model/{alias}"


class _Supervisor(LlamaServer):
    """:class:`LlamaServer` bound to its node's address (known only inside the actor)."""

    def __init__(self, alias: str, spec: LocalModel) -> None:
        super().__init__(alias, spec, host=ray.util.get_node_ip_address())


class RayLocalServers:
    """The supervisors ``model/<alias>``, made on first use (one per alias, cluster-wide)."""

    def __init__(self) -> None:
        self._handles: dict[str, Any] = {}

    def _handle(self, alias: str, spec: LocalModel) -> Any:
        handle = self._handles.get(alias)
        if handle is None:
            handle = (
                ray.remote(with_lifecycle(_Supervisor))
                .options(
                    name=model_actor_name(alias),
                    namespace=NAMESPACE,
                    lifetime="detached",
                    get_if_exists=True,
                    num_cpus=spec.num_cpus,
                    num_gpus=spec.num_gpus,
                    resources=dict(spec.resources),
                    max_concurrency=1000,
                    max_restarts=-1,
                    max_task_retries=0,
                )
                .remote(alias, spec)
            )
            self._handles[alias] = handle
        return handle

    async def endpoint(self, alias: str, spec: LocalModel) -> LocalEndpoint:
        """See :class:`raytroupe.actors.llm.local.provider.LocalServers`.

        Raises:
            ConfigError, ProviderUnavailable: as :meth:`LlamaServer.endpoint`.
        """
        handle = self._handle(alias, spec)
        try:
            endpoint: LocalEndpoint = await through_restarts(
                lambda: handle.endpoint.remote(spec), within_s=STARTS_WITHIN_S
            )
        except ray.exceptions.RayTaskError as exc:
            raise unwrap(exc) from None
        except ray.exceptions.RayActorError:
            self._handles.pop(alias, None)  # gone for good (killed): made again next time
            raise
        return endpoint

    async def stop(self, alias: str) -> None:
        """End the server and its supervisor (no restart)."""
        self._handles.pop(alias, None)
        try:
            handle = await asyncio.to_thread(
                ray.get_actor, model_actor_name(alias), namespace=NAMESPACE
            )
        except ValueError:
            return
        with contextlib.suppress(TimeoutError, ray.exceptions.RayError):
            await asyncio.wait_for(handle.stop.remote(), 10.0)  # killed below all the same
        ray.kill(handle, no_restart=True)
