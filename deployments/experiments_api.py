"""``/v1/experiments``: A/B experiments on skills' live traffic, for admin keys.

An experiment changes which version every tenant's jobs run and its figures are measured
over every tenant's jobs, so only an admin key may start, read or stop one.
"""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import APIRouter, Path

from raytroupe.deployments.access import Admin
from raytroupe.deployments.documents import body_of, document
from raytroupe.protocols.addresses import NAME_PATTERN
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.runtime.client import SystemClient

__all__ = ["experiment_routes"]

log = structlog.get_logger("raytroupe.api")

ExperimentName = Annotated[str, Path(pattern=rf"^{NAME_PATTERN}$")]


def experiment_routes(client: SystemClient) -> APIRouter:
    """The ``/v1/experiments`` routes."""
    routes = APIRouter(prefix="/v1/experiments", tags=["evaluation"])

    @routes.post(
        "", status_code=201, response_model=ExperimentInfo, openapi_extra=body_of(ExperimentSpec)
    )
    async def start_experiment(
        who: Admin, spec: Annotated[ExperimentSpec, document(ExperimentSpec)]
    ) -> ExperimentInfo:
        """Split the skill's live traffic between its versions until the test decides."""
        info = await client.start_experiment(spec)
        log.info("experiment_started", experiment=spec.name, key=who.name)
        return info

    @routes.get("", response_model=list[ExperimentInfo])
    async def list_experiments(_: Admin) -> list[ExperimentInfo]:
        """Every experiment, oldest first, with each arm's figures."""
        return await client.experiments()

    @routes.get("/{name}", response_model=ExperimentInfo)
    async def get_experiment(name: ExperimentName, _: Admin) -> ExperimentInfo:
        """One experiment: each arm's figures, and the decision once made."""
        return await client.experiment(name)

    @routes.post("/{name}/stop", response_model=ExperimentInfo)
    async def stop_experiment(name: ExperimentName, who: Admin) -> ExperimentInfo:
        """End a running experiment without a verdict; new jobs run the current version."""
        return await client.stop_experiment(name, by=f"key:{who.name}")

    return routes
