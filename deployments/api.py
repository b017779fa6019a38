"""The HTTP API: jobs, events, approvals, graph checkpoints, teams, agents, usage, health.

Every job route is scoped to the caller's tenant: another tenant's job is 404, as if it did
not exist. A tenant's job passes its policy (inline teams are data: model aliases and tools
the operator allows, within caps; see ``raytroupe.actors.orchestrator.admission``). Teams and agents
are shared by the deployment; changing them, and tenants' policies, takes an admin key.
"""

from __future__ import annotations

from http import HTTPStatus

import structlog
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from raytroupe import __version__
from raytroupe.actors.spawn import Offload
from raytroupe.deployments.a2a import a2a_routes
from raytroupe.deployments.access import Caller, NotAdmin
from raytroupe.deployments.ag_ui import ag_ui_routes
from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.console_api import console_app
from raytroupe.deployments.declared import at_of, declared_routes
from raytroupe.deployments.mcp_http import mcp_endpoint
from raytroupe.deployments.openai_compat import openai_routes
from raytroupe.deployments.openapi import DocumentedAPI
from raytroupe.deployments.problems import problem, troupe_problem
from raytroupe.deployments.skills_api import skill_routes
from raytroupe.protocols import (
    ApprovalRequest,
    TroupeError,
)
from raytroupe.protocols.http import (
    Decided,
    Decision,
    Health,
    Readiness,
)
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations import declared
from raytroupe.runtime.operations import jobs as job_ops

__all__ = ["create_api"]

log = structlog.get_logger("raytroupe.http")


def create_api(client: SystemClient, config: APIConfig) -> FastAPI:
    """The FastAPI application (without the guard; see :mod:`raytroupe.deployments.app`)."""
    app = DocumentedAPI(
        anonymous=config.anonymous_tenant is not None,
        title="raytroupe",
        version=__version__,
        description="Multi-agent jobs on Ray: submit, watch, approve, resume, cancel; teams.",
    )
    _install_error_handlers(app)
    # tenants' documents are checked off the loop, each tenant within its share
    app.state.offload = Offload(config.shares, name="http-checks")
    app.state.request_work_s = config.request_work_s
    # first: /v1/jobs/{job_id} would take /v1/jobs/summaries
    app.include_router(declared_routes(declared().values(), client))
    app.include_router(_jobs(client))
    app.include_router(skill_routes(client))
    app.include_router(_ops(client))
    app.include_router(openai_routes(client, config))
    app.include_router(ag_ui_routes(client))
    # MCP's streamable HTTP: every team and skill the key may run is a tool
    app.router.routes.append(Route("/mcp", mcp_endpoint(client), include_in_schema=False))
    # A2A 1.0: every team and skill the key may run is an agent (its card and JSON-RPC)
    app.router.routes.extend(a2a_routes(client, config.chat_timeout_s))
    app.mount("/console", console_app(), name="console")
    return app


def _jobs(client: SystemClient) -> APIRouter:
    routes = APIRouter(prefix="/v1/jobs", tags=["jobs"])

    @routes.get("/{job_id}/approvals", response_model=list[ApprovalRequest], deprecated=True)
    async def list_job_approvals(job_id: str, who: Caller) -> list[ApprovalRequest]:
        """Deprecated: ``GET /v1/approvals?job_id=``. The job's held tool calls."""
        return await client.approvals(job_id, tenant=who.tenant)

    @routes.post("/{job_id}/approvals/{approval_id}", response_model=Decided, deprecated=True)
    async def decide_approval(
        job_id: str, approval_id: str, body: Decision, who: Caller
    ) -> Decided:
        """Deprecated: ``POST .../approvals/{approval_id}/approve`` or ``/reject``."""
        decide = job_ops.approve if body.approved else job_ops.reject
        arguments = {"job_id": job_id, "approval_id": approval_id, "reason": body.reason}
        return await decide.run_for(at_of(who, client), arguments)

    return routes


def _ops(client: SystemClient) -> APIRouter:
    routes = APIRouter(tags=["operations"])

    @routes.get("/healthz", response_model=Health)
    async def get_health() -> Health:
        """Liveness: this process answers."""
        return Health(status="ok")

    @routes.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "a system actor does not answer"}},
    )
    async def get_readiness() -> JSONResponse:
        """Readiness: the router, orchestrator and LLM pool answer."""
        checks = await client.ready()
        ready = all(checks.values())
        readiness = Readiness(status="ready" if ready else "not ready", checks=checks)
        return JSONResponse(readiness.model_dump(), status_code=200 if ready else 503)

    return routes


def _install_error_handlers(app: FastAPI) -> None:
    async def troupe_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, TroupeError)  # noqa: S101 - registered for TroupeError only
        response = troupe_problem(exc, _rid(request))
        if response.status_code >= 500:  # noqa: PLR2004
            log.warning("request_failed", code=exc.code.value, error=exc.message)
        return response

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)  # noqa: S101
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()]
        return problem(
            422,
            "Invalid request",
            "the request does not match the API's schema",
            code="invalid_request",
            request_id=_rid(request),
            problems=problems,
        )

    async def forbidden(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, NotAdmin)  # noqa: S101
        return problem(
            403,
            "Forbidden",
            f"key {exc.key!r} may not manage teams, agents or policies (an admin key is needed)",
            code="forbidden",
            field="key",
            policy="admin keys only",
            request_id=_rid(request),
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("request_crashed", error_type=type(exc).__name__, exc_info=exc)
        return problem(
            500,
            "Internal Server Error",
            "the server failed; the request id finds the details in its logs",
            code="internal",
            request_id=_rid(request),
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)  # noqa: S101
        return problem(
            exc.status_code,
            HTTPStatus(exc.status_code).phrase,
            str(exc.detail),
            code=HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_"),
            request_id=_rid(request),
            headers=dict(exc.headers or {}),
        )

    app.add_exception_handler(TroupeError, troupe_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(NotAdmin, forbidden)
    app.add_exception_handler(Exception, unexpected)


def _rid(request: Request) -> str | None:
    rid = request.scope.get("state", {}).get("request_id")
    return rid if isinstance(rid, str) else None
