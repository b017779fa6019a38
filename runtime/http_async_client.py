"""The asynchronous HTTP client: :class:`AsyncClient`, the blocking client's methods as coroutines.

:class:`~raytroupe.runtime.http_client.Client` is the blocking one.

```python
async with raytroupe.AsyncClient("http://127.0.0.1:8000", key="rt-...") as api:
    job = await api.submit("Summarize: ...", team="research")
    async for event in api.events(job.id):
        print(event.type)
```

It raises what the blocking client raises. This module imports httpx, pydantic and the
protocols: no Ray, no server code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from httpx_sse import EventSource
from pydantic import BaseModel

from raytroupe.protocols import (
    JobResult,
    JobSummary,
)
from raytroupe.protocols.http import (
    Health,
    Readiness,
    SkillApplied,
)
from raytroupe.runtime import http_routes as routes
from raytroupe.runtime.http_calls import Call, base_url, checked_key
from raytroupe.runtime.http_follow import (
    Follow,
    checked_timeout,
    headers_for,
    op_timeout,
    opened,
    outcome,
    unreachable,
)
from raytroupe.runtime.operations import evals as eval_ops
from raytroupe.runtime.operations import experiments as experiment_ops
from raytroupe.runtime.operations import guardrails as guardrail_ops
from raytroupe.runtime.operations import job_reads as read_ops
from raytroupe.runtime.operations import jobs as job_ops
from raytroupe.runtime.operations import knowledge as knowledge_ops
from raytroupe.runtime.operations import observe as observe_ops
from raytroupe.runtime.operations import over_http_async
from raytroupe.runtime.operations import policies as policy_ops
from raytroupe.runtime.operations import schedules as schedule_ops
from raytroupe.runtime.operations import sessions as session_ops
from raytroupe.runtime.operations import skills as skill_ops
from raytroupe.runtime.operations import spend as spend_ops
from raytroupe.runtime.operations import submit as submit_ops
from raytroupe.runtime.operations import teams as team_ops
from raytroupe.runtime.operations import webhooks as webhook_ops
from raytroupe.runtime.operations.declare import Arguments, Operation
from raytroupe.runtime.operations.job_reads import JobsShown
from raytroupe.runtime.operations.surfaces import renamed

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """The HTTP API of raytroupe, as an asyncio client: :class:`Client`'s methods, awaited.

    ``transport`` is httpx's async transport. :meth:`events` is an async iterator.

    Raises:
        InvalidInput: as :class:`Client`.
    """

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = base_url(url)
        self.timeout = checked_timeout(timeout)
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=headers_for(checked_key(key)),
            timeout=self.timeout,
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"AsyncClient({str(self.url)!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _send(self, call: Call[T], timeout: httpx.Timeout | None = None) -> T:
        request = call.request(self._http, timeout)
        try:
            response = await self._http.send(request)
        except httpx.HTTPError as e:
            raise unreachable(request.url, e) from e
        return call.answer(response)

    async def _send_op(self, call: Call[T], long_running: bool) -> T:
        return await self._send(call, op_timeout(self.timeout, long_running=long_running))

    async def _follow_op(
        self, op: Operation[..., Any], arguments: Arguments, timeout: float | None
    ) -> AsyncIterator[BaseModel]:
        place = Follow(op, arguments, timeout)
        while True:
            broken: httpx.HTTPError | None = None
            async with self._stream(place.call(), place.read_timeout(self.timeout)) as response:
                try:
                    async for sse in EventSource(response).aiter_sse():
                        item = place.item_of(sse)
                        if item is None:
                            continue
                        yield item
                        if place.seen(item):
                            return
                except httpx.HTTPError as e:
                    broken = e
            if not place.broke(response.request.url, broken):
                return

    @asynccontextmanager
    async def _stream(
        self, call: Call[None], timeout: httpx.Timeout
    ) -> AsyncIterator[httpx.Response]:
        request = call.request(self._http, timeout)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as e:
            raise unreachable(request.url, e) from e
        try:
            if response.status_code >= 300:  # noqa: PLR2004
                await response.aread()
            opened(call, response)
            yield response
        finally:
            await response.aclose()

    async def result(self, job_id: str, *, timeout: float | None = None) -> JobResult:
        """Wait for the job's end (following its events) and return its result.

        Raises:
            JobTimeout: it did not end within ``timeout`` seconds (it keeps running).
            JobFailed: it ended without an answer; ``detail['result']`` has what ran.
            JobCancelled: it was cancelled; ``detail['result']`` has what ran.
        """
        view = await self.job(job_id)
        if view.result is None:
            async for _ in self.events(job_id, timeout=timeout):
                pass
            view = await self.job(job_id)
        return outcome(view)

    events = over_http_async(read_ops.events)

    # --- jobs ------------------------------------------------------------------------------

    submit = over_http_async(submit_ops.submit, older=submit_ops.session_id_keyword)

    job = over_http_async(read_ops.job)

    statuses = over_http_async(read_ops.statuses)

    async def jobs(
        self,
        status: JobsShown | None = None,
        q: str | None = None,
        before: float | None = None,
        limit: int = 100,
    ) -> list[JobSummary]:
        """The tenant's jobs, newest first: ``status`` (or 'live'), text ``q``, paging."""
        return (await self.summaries(status, q, before, limit)).jobs

    cancel = over_http_async(job_ops.cancel)
    approvals = over_http_async(job_ops.approvals)
    approve = over_http_async(job_ops.approve)
    reject = over_http_async(job_ops.reject)
    feedback = over_http_async(job_ops.feedback)
    feedbacks = over_http_async(job_ops.feedbacks)
    checkpoints = over_http_async(job_ops.checkpoints)
    interrupts = over_http_async(job_ops.interrupts)
    resume = over_http_async(job_ops.resume)
    fork = over_http_async(job_ops.fork)
    summaries = over_http_async(read_ops.summaries)
    summary = over_http_async(read_ops.summary)
    trace = over_http_async(read_ops.trace)
    daily_usage = over_http_async(read_ops.daily_usage)
    me = over_http_async(read_ops.me)

    # --- teams, agents, policies -----------------------------------------------------------

    teams = over_http_async(team_ops.teams)
    team = over_http_async(team_ops.team)
    delete_team = over_http_async(team_ops.delete_team)
    agents = over_http_async(team_ops.agents)
    delete_agent = over_http_async(team_ops.delete_agent)
    create_team = over_http_async(team_ops.create_team)
    apply_team = over_http_async(team_ops.apply_team)
    create_agent = over_http_async(team_ops.create_agent)
    apply_agent = over_http_async(team_ops.apply_agent)
    put_agent = renamed("apply_agent")

    policy = over_http_async(policy_ops.policy)
    policies = over_http_async(policy_ops.policies)
    put_policy = over_http_async(policy_ops.put_policy)
    delete_policy = over_http_async(policy_ops.delete_policy)

    # --- operations ------------------------------------------------------------------------

    usage = over_http_async(observe_ops.usage, older=observe_ops.usage_by_day)
    spend_windows = over_http_async(spend_ops.spend_windows)
    spend_limits = over_http_async(spend_ops.spend_limits)
    put_spend_limit = over_http_async(spend_ops.put_spend_limit)
    delete_spend_limit = over_http_async(spend_ops.delete_spend_limit)
    dead_letters = over_http_async(observe_ops.dead_letters)

    async def models(self) -> list[str]:
        """What the key may name as an OpenAI ``model``: teams, ``skill:<name>``, ``auto``."""
        return await self._send(routes.models())

    async def model(self, model_id: str) -> str:
        """``model_id``, if the key may name it (``TeamNotFound`` otherwise)."""
        return await self._send(routes.model(model_id))

    async def health(self) -> Health:
        """Liveness (no key needed)."""
        return await self._send(routes.health())

    async def ready(self) -> Readiness:
        """Readiness of each system actor (no key needed); not ready is an answer too."""
        return await self._send(routes.ready())

    # --- skills ----------------------------------------------------------------------------

    skills = over_http_async(skill_ops.skills)
    apply_skill = over_http_async(skill_ops.apply_skill)
    skill = over_http_async(skill_ops.skill)
    skill_history = over_http_async(skill_ops.skill_history)
    rollback_skill = over_http_async(skill_ops.rollback_skill)
    promote_skill = over_http_async(skill_ops.promote_skill)
    optimise_skill = over_http_async(skill_ops.optimise_skill)
    delete_skill = over_http_async(skill_ops.delete_skill)
    lessons = over_http_async(skill_ops.lessons)
    delete_lesson = over_http_async(skill_ops.delete_lesson)

    async def apply_skill_file(self, text: str, *, kind: str = "yaml") -> SkillApplied:
        """Register a skill from its file's text, ``kind`` 'yaml' or 'markdown' (admin keys).

        Raises:
            InvalidInput: the file is not a valid skill (each problem with its line).
        """
        return await self._send(routes.apply_skill_file(text, kind))

    # --- evals and experiments -------------------------------------------------------------

    start_eval = over_http_async(eval_ops.start_eval)
    evals = over_http_async(eval_ops.evals)
    eval_run = over_http_async(eval_ops.eval_run)
    compare_evals = over_http_async(eval_ops.compare_evals)

    start_experiment = over_http_async(experiment_ops.start_experiment)
    experiments = over_http_async(experiment_ops.experiments)
    experiment = over_http_async(experiment_ops.experiment)
    stop_experiment = over_http_async(experiment_ops.stop_experiment)

    # --- knowledge bases -------------------------------------------------------------------

    knowledge_bases = over_http_async(knowledge_ops.knowledge_bases)
    ingest = over_http_async(knowledge_ops.ingest)
    documents = over_http_async(knowledge_ops.documents)
    delete_document = over_http_async(knowledge_ops.delete_document)
    search = over_http_async(knowledge_ops.search)
    drop_knowledge_base = over_http_async(knowledge_ops.drop_knowledge_base)

    # --- sessions --------------------------------------------------------------------------

    create_session = over_http_async(session_ops.create_session)
    sessions = over_http_async(session_ops.sessions)
    session = over_http_async(session_ops.session)
    delete_session = over_http_async(session_ops.delete_session)

    # --- webhooks ---------------------------------------------------------------------------

    create_webhook = over_http_async(webhook_ops.create_webhook)
    webhooks = over_http_async(webhook_ops.webhooks)
    webhook = over_http_async(webhook_ops.webhook)
    delete_webhook = over_http_async(webhook_ops.delete_webhook)
    webhook_deliveries = over_http_async(webhook_ops.webhook_deliveries)
    put_schedule = over_http_async(schedule_ops.put_schedule)
    schedules = over_http_async(schedule_ops.schedules)
    schedule = over_http_async(schedule_ops.schedule)
    delete_schedule = over_http_async(schedule_ops.delete_schedule)
    put_guardrail = over_http_async(guardrail_ops.put_guardrail)
    guardrails = over_http_async(guardrail_ops.guardrails)
    guardrail = over_http_async(guardrail_ops.guardrail)
    delete_guardrail = over_http_async(guardrail_ops.delete_guardrail)
    guardrail_decisions = over_http_async(guardrail_ops.guardrail_decisions)
