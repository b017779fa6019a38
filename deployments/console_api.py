"""What the job console reads, and the console itself (static files under ``/console/``).

The routes are plain API routes, scoped like the rest: a tenant's key sees its tenant's jobs,
approvals, graph inputs and usage; dead letters and every tenant's usage take an admin key.
The console's files are served without a key (they hold no data: the page asks for a key and
calls these routes with it), with a Content-Security-Policy that allows only their own
scripts and styles, and requests to this origin.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Final

from fastapi import APIRouter, Query
from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from raytroupe.deployments.access import Admin, Caller
from raytroupe.protocols import JobsQuery, JobSummary
from raytroupe.protocols.http import (
    DailyUsage,
    DeadLetterView,
    JobSummaries,
    JobTrace,
    Me,
    PendingApproval,
    PendingInput,
)
from raytroupe.runtime.client import SystemClient

__all__ = ["CONSOLE_DIR", "console_app", "console_routes", "summary_routes"]

CONSOLE_DIR: Final = Path(__file__).parent / "console"
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_SUMMARY_STATUSES: Final = (
    "pending|planning|running|awaiting_approval|awaiting_input|aggregating|"
    "succeeded|failed|cancelled|live"
)


def summary_routes(client: SystemClient) -> APIRouter:
    """The jobs list (before ``/v1/jobs/{job_id}``, which would take its path)."""
    routes = APIRouter(prefix="/v1/jobs", tags=["jobs"])

    @routes.get("/summaries", response_model=JobSummaries)
    async def list_job_summaries(
        who: Caller,
        status: Annotated[str | None, Query(pattern=f"^({_SUMMARY_STATUSES})$")] = None,
        q: Annotated[
            str | None, Query(max_length=200, pattern=r"^[^\x00]*$", description="Text to find.")
        ] = None,
        before: Annotated[float | None, Query(description="Submitted before (paging).")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> JobSummaries:
        """The tenant's jobs newest first: status, team or skill, who, when, cost.

        ``q`` finds text in the id, task, team, skill and submitter; ``status`` is one
        status or ``live`` (every unfinished job).
        """
        query = JobsQuery(status=status, text=q or None, before=before, limit=limit + 1)
        lines = await client.summaries(query, tenant=who.tenant)
        return JobSummaries(jobs=lines[:limit], more=len(lines) > limit)

    @routes.get("/{job_id}/summary", response_model=JobSummary)
    async def get_job_summary(job_id: str, who: Caller) -> JobSummary:
        """The job's line of the jobs list, with its live status."""
        return await client.summary(job_id, tenant=who.tenant)

    @routes.get("/{job_id}/trace", response_model=JobTrace)
    async def get_job_trace(job_id: str, who: Caller) -> JobTrace:
        """The job's spans so far; its root ends now while it runs.

        Plan, subtasks, attempts, model calls, tool calls (arguments and results cut at 2,000
        characters), resolutions.
        """
        spans = await client.trace(job_id, tenant=who.tenant)
        trace_id = spans[0].trace_id if spans else ""
        return JobTrace(trace_id=trace_id, job_id=job_id, spans=list(spans))

    return routes


def console_routes(client: SystemClient) -> APIRouter:
    """Who is calling, what waits for people, usage by day, dead letters."""
    routes = APIRouter(prefix="/v1", tags=["console"])

    @routes.get("/me", response_model=Me)
    async def get_me(who: Caller) -> Me:
        """The caller's key: its name, tenant, and whether it is an admin's."""
        return Me(name=who.name, tenant=who.tenant, admin=who.admin)

    @routes.get("/approvals", response_model=list[PendingApproval])
    async def list_approvals(who: Caller) -> list[PendingApproval]:
        """Every tool call of the tenant's jobs waiting for a person."""
        calls, _ = await client.waiting(tenant=who.tenant)
        return [
            PendingApproval(job_id=job_id, **request.model_dump(exclude={"kind"}))
            for job_id, request in calls
        ]

    @routes.get("/interrupts", response_model=list[PendingInput])
    async def list_interrupts(who: Caller) -> list[PendingInput]:
        """Every graph of the tenant's jobs waiting for a person's input."""
        _, waits = await client.waiting(tenant=who.tenant)
        return [PendingInput(job_id=j, interrupt=i, state=s) for j, i, s in waits]

    @routes.get("/usage/daily", response_model=list[DailyUsage])
    async def get_daily_usage(who: Caller) -> list[DailyUsage]:
        """Usage by tenant, day and model alias: the caller's tenant's (an admin: everyone's)."""
        tenant = None if who.admin else who.tenant
        jobs = await client.summaries(JobsQuery(limit=1_000_000), tenant=tenant)
        whose = {j.id: (j.tenant, time.strftime("%Y-%m-%d", time.gmtime(j.submitted_at)))
                 for j in jobs}  # fmt: skip
        totals: dict[tuple[str, str, str], DailyUsage] = {}
        for row in await client.usage():
            if row.job_id not in whose:
                continue  # another tenant's, or not a job's
            tenant_of, day = whose[row.job_id]
            key = (tenant_of, day, row.model)
            line = totals.setdefault(key, DailyUsage(tenant=tenant_of, day=day, model=row.model))
            line.calls += row.calls
            line.prompt_tokens += row.prompt_tokens
            line.completion_tokens += row.completion_tokens
            line.cost_usd += row.cost_usd
        return [totals[k] for k in sorted(totals)]

    @routes.get("/dead-letters", response_model=list[DeadLetterView])
    async def list_dead_letters(
        _who: Admin, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[DeadLetterView]:
        """The router's newest dead letters with their reasons, newest first (admins)."""
        letters = await client.dead_letters(limit)
        views = []
        for letter in reversed(letters):
            message = letter.message
            views.append(
                DeadLetterView(
                    at=letter.at,
                    reason=letter.reason,
                    detail=letter.detail,
                    message_id=letter.message_id,
                    job_id=None if message is None else message.job_id,
                    sender=None if message is None else message.sender,
                    recipient=None if message is None else message.recipient,
                    tenant=None if message is None else message.tenant,
                )
            )
        return views

    return routes


def console_app() -> ASGIApp:
    """The console's static files, each response with the console's security headers."""
    files = StaticFiles(directory=CONSOLE_DIR, html=True)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = CSP
                headers["X-Content-Type-Options"] = "nosniff"
                headers["X-Frame-Options"] = "DENY"
                headers["Referrer-Policy"] = "no-referrer"
                headers["Cache-Control"] = "no-cache"
            await send(message)

        await files(scope, receive, with_headers)

    return app
