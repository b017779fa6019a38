"""The Ray Serve application: the HTTP entry point of raytroupe.

``serve run deployments/serve_config.yaml`` / ``serve deploy`` use :func:`build` (its
``args`` are an :class:`~raytroupe.deployments.config.APIConfig`); Python callers use
:func:`deploy`.
"""

from typing import Any

import ray
from ray import serve
from ray.serve import Application
from starlette.types import ASGIApp

from raytroupe.actors.spawn import (
    NAMESPACE,
    actor_env,
    configure_worker_logging,
    configure_worker_tracing,
)
from raytroupe.deployments.api import create_api
from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.guard import Guard
from raytroupe.deployments.keys import keys_from_env
from raytroupe.protocols.config.llm import LLMConfig, refuse_own_api
from raytroupe.runtime.client import SystemClient

# No ``from __future__ import annotations`` here: Serve inspects :func:`build`'s signature.

__all__ = ["TroupeAPI", "app", "build", "deploy"]

APP_NAME = "troupe"


@serve.deployment(
    name="TroupeAPI",
    ray_actor_options={"num_cpus": 0},
    # event streams hold their request open for a job's whole life
    max_ongoing_requests=1000,
    logging_config={"enable_access_log": False},
)
@serve.ingress()
class TroupeAPI:
    """One HTTP replica: the guard (keys, limits, request ids) in front of the API."""

    def __init__(self, config: APIConfig) -> None:
        configure_worker_logging()  # JSON lines in the replica's Ray log, as every actor's
        configure_worker_tracing("TroupeAPI")  # as every actor: from the OTEL_* variables
        self._config = config
        self._keys = [*config.api_keys, *self._env_keys()]
        path = config.llm_config_path()
        llm = None if path is None else LLMConfig.from_yaml(path)
        # the system actors already running in the namespace (a driver's, `troupe up`'s), or
        # new ones: llm_config and journal apply only to actors this starts
        self._client = SystemClient.start(
            llm=llm,
            journal=config.journal,
            config=config.system(),
            policies=config.tenant_policies,
        )

    def _env_keys(self) -> list[Any]:
        if self._config.api_keys_env is None:
            return []
        return list(keys_from_env(self._config.api_keys_env))

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return Guard(create_api(self._client, self._config), self._config, self._keys)


def build(args: dict[str, Any]) -> Application:
    """The application for a Serve config: ``import_path: raytroupe.deployments.app:build``.

    Raises:
        ConfigError: ``args`` is not a valid API config (each problem named).
    """
    return TroupeAPI.bind(APIConfig.from_mapping(args, source="serve config args"))  # type: ignore[attr-defined]


app: Application = build({})
"""The application with the default API config, for
``serve build raytroupe.deployments.app:app``: keys from ``TROUPE_API_KEYS``, the system
actors' configuration from ``TROUPE_CONFIG``."""


def _served_models() -> dict[str, Any]:
    """What the running LLM pool serves (nothing before a pool is started)."""
    if not ray.is_initialized():
        return {}
    try:
        pool = ray.get_actor("llm/0", namespace=NAMESPACE)
    except ValueError:
        return {}
    models: dict[str, Any] = ray.get(pool.models.remote())
    return models


def deploy(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    config: APIConfig | None = None,
    route_prefix: str = "/",
    name: str = APP_NAME,
) -> str:
    """Deploy the HTTP application on the Ray this process is connected to; its base URL.

    Serve's proxy listens on ``host:port`` (loopback by default). Call after
    ``raytroupe.runtime.connect()``. The application keeps running after this process exits. Its
    replica traces as the actors do: given this process's ``OTEL_*`` variables when it joined
    a running Ray (see :func:`raytroupe.actors.telemetry.tracing.actor_env`).

    Raises:
        ConfigError: a model the running pool serves has this application's own OpenAI
            route as its ``base_url`` (``http://127.0.0.1:<port><route_prefix>v1``): the pool
            would call raytroupe itself (see :func:`raytroupe.actors.llm.config.refuse_own_api`).
    """
    refuse_own_api(_served_models(), host=host, port=port, route_prefix=route_prefix)
    serve.start(http_options={"host": host, "port": port})
    deployment: Any = TroupeAPI
    if env := actor_env():  # the replica traces as this process's OTEL_* variables say
        deployment = TroupeAPI.options(  # type: ignore[attr-defined]
            ray_actor_options={"num_cpus": 0, "runtime_env": {"env_vars": env}}
        )
    serve.run(
        deployment.bind(config or APIConfig()),
        name=name,
        route_prefix=route_prefix,
        blocking=False,
    )
    return f"http://{host}:{port}{route_prefix.rstrip('/')}"
