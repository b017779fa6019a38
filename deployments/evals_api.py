"""``/v1/evals``: run an eval suite on the cluster, follow it, list and compare runs.

Any key may run a suite: its cases run as the key's tenant's jobs, under its policy (a
tenant's suite may not name custom scorers, and its judges use models it may use). A run is
seen only by its tenant (and admins).
"""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import APIRouter, Path, Query

from raytroupe.deployments.access import Caller
from raytroupe.deployments.documents import body_of, document
from raytroupe.protocols.evals import EvalComparison, EvalRun
from raytroupe.protocols.http import EvalAccepted, EvalRequest
from raytroupe.runtime.client import SystemClient

__all__ = ["eval_routes"]

log = structlog.get_logger("raytroupe.api")

MAX_WAIT_S = 60.0
RUN_ID = r"^eval-[0-9a-f]{16}$"
"""What a run id looks like (anything else is refused before it reaches the store)."""


def eval_routes(client: SystemClient) -> APIRouter:
    """The ``/v1/evals`` routes."""
    routes = APIRouter(prefix="/v1/evals", tags=["evaluation"])

    @routes.post(
        "", status_code=202, response_model=EvalAccepted, openapi_extra=body_of(EvalRequest)
    )
    async def start_eval(
        who: Caller, body: Annotated[EvalRequest, document(EvalRequest)]
    ) -> EvalAccepted:
        """Start running the suite; follow it at ``url`` (``?wait=`` seconds for its end)."""
        run_id = await client.start_eval(
            body.suite, skill=body.skill, team=body.team, tenant=who.tenant, admin=who.admin,
            concurrency=body.concurrency, budget=body.budget,
        )  # fmt: skip
        log.info("eval_started", run=run_id, suite=body.suite.name, key=who.name)
        return EvalAccepted(id=run_id, url=f"/v1/evals/{run_id}")

    @routes.get("", response_model=list[EvalRun])
    async def list_evals(who: Caller) -> list[EvalRun]:
        """The caller's tenant's runs (an admin: all), oldest first, without their cases."""
        return await client.eval_runs(tenant=None if who.admin else who.tenant)

    @routes.get("/compare", response_model=EvalComparison)
    async def compare_evals(
        who: Caller,
        base: Annotated[str, Query(pattern=RUN_ID)],
        other: Annotated[str, Query(pattern=RUN_ID)],
    ) -> EvalComparison:
        """Two runs of one suite, case by case, with a paired sign-flip permutation test."""
        return await client.compare_evals(base, other, tenant=None if who.admin else who.tenant)

    @routes.get("/{run_id}", response_model=EvalRun)
    async def get_eval(
        run_id: Annotated[str, Path(pattern=RUN_ID)],
        who: Caller,
        wait: Annotated[float, Query(ge=0.0, le=MAX_WAIT_S, description="Seconds.")] = 0.0,
    ) -> EvalRun:
        """A run with each case's result; ``?wait=`` waits (bounded) for it to finish."""
        return await client.eval_run(run_id, wait, tenant=None if who.admin else who.tenant)

    return routes
