"""The HTTP client SDK: :class:`Client` and :class:`AsyncClient`, one method per API route.

```python
import raytroupe

with raytroupe.Client("http://127.0.0.1:8000", key="rt-...") as api:
    job = api.submit("Summarize: ...", team="research")
    for event in api.events(job.id):
        print(event.type)
    print(api.result(job.id).answer)
```

Answers are the API's typed models (``raytroupe.protocols`` and ``raytroupe.protocols.http``).
An error answer raises the :class:`~raytroupe.protocols.TroupeError` subclass its problem's
code names (``JobNotFound``, ``Forbidden``, ``InvalidRequest``, ``Unauthorized``...), with
``detail['status']`` and ``detail['request_id']``; no answer at all is :class:`Unreachable`;
an answer the API does not document is :class:`BadResponse`.

The key goes only to ``url``: redirects are not followed. This module imports httpx, pydantic
and the protocols: no Ray, no server code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
from raytroupe.runtime.http_async_client import AsyncClient
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
from raytroupe.runtime.operations import over_http
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

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")


class Client:
    """The HTTP API of raytroupe, as a blocking client (see :class:`AsyncClient`).

    ``url`` is the API's base (``http://host:8000``, with Serve's route prefix if any);
    ``key`` is sent as ``Authorization: Bearer`` to that origin only. ``transport`` is httpx's
    (a test seam, or a proxy's).

    Raises:
        InvalidInput: ``url`` has no http(s) scheme or host, holds credentials, a query or a
            fragment; ``key`` cannot be a header's; ``timeout`` is not positive.
    """

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = base_url(url)
        self.timeout = checked_timeout(timeout)
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers_for(checked_key(key)),
            timeout=self.timeout,
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"Client({str(self.url)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _send(self, call: Call[T], timeout: httpx.Timeout | None = None) -> T:
        request = call.request(self._http, timeout)
        try:
            response = self._http.send(request)
        except httpx.HTTPError as e:
            raise unreachable(request.url, e) from e
        return call.answer(response)

    def _send_op(self, call: Call[T], long_running: bool) -> T:
        return self._send(call, op_timeout(self.timeout, long_running=long_running))

    def _follow_op(
        self, op: Operation[..., Any], arguments: Arguments, timeout: float | None
    ) -> Iterator[BaseModel]:
        place = Follow(op, arguments, timeout)
        while True:
            broken: httpx.HTTPError | None = None
            with self._stream(place.call(), place.read_timeout(self.timeout)) as response:
                try:
                    for sse in EventSource(response).iter_sse():
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

    @contextmanager
    def _stream(self, call: Call[None], timeout: httpx.Timeout) -> Iterator[httpx.Response]:
        request = call.request(self._http, timeout)
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as e:
            raise unreachable(request.url, e) from e
        try:
            if response.status_code >= 300:  # noqa: PLR2004
                response.read()
            opened(call, response)
            yield response
        finally:
            response.close()

    # --- jobs ------------------------------------------------------------------------------

    submit = over_http(submit_ops.submit, older=submit_ops.session_id_keyword)

    job = over_http(read_ops.job)

    def result(self, job_id: str, *, timeout: float | None = None) -> JobResult:
        """Wait for the job's end (following its events) and return its result.

        Raises:
            JobTimeout: it did not end within ``timeout`` seconds (it keeps running).
            JobFailed: it ended without an answer; ``detail['result']`` has what ran.
            JobCancelled: it was cancelled; ``detail['result']`` has what ran.
        """
        view = self.job(job_id)
        if view.result is None:
            for _ in self.events(job_id, timeout=timeout):
                pass
            view = self.job(job_id)
        return outcome(view)

    events = over_http(read_ops.events)

    statuses = over_http(read_ops.statuses)

    def jobs(
        self,
        status: JobsShown | None = None,
        q: str | None = None,
        before: float | None = None,
        limit: int = 100,
    ) -> list[JobSummary]:
        """The tenant's jobs, newest first: ``status`` (or 'live'), text ``q``, paging."""
        return self.summaries(status, q, before, limit).jobs

    cancel = over_http(job_ops.cancel)
    approvals = over_http(job_ops.approvals)
    approve = over_http(job_ops.approve)
    reject = over_http(job_ops.reject)
    feedback = over_http(job_ops.feedback)
    feedbacks = over_http(job_ops.feedbacks)
    checkpoints = over_http(job_ops.checkpoints)
    interrupts = over_http(job_ops.interrupts)
    resume = over_http(job_ops.resume)
    fork = over_http(job_ops.fork)
    summaries = over_http(read_ops.summaries)
    summary = over_http(read_ops.summary)
    trace = over_http(read_ops.trace)
    daily_usage = over_http(read_ops.daily_usage)
    me = over_http(read_ops.me)

    # --- teams, agents, policies -----------------------------------------------------------

    teams = over_http(team_ops.teams)
    team = over_http(team_ops.team)
    delete_team = over_http(team_ops.delete_team)
    agents = over_http(team_ops.agents)
    delete_agent = over_http(team_ops.delete_agent)
    create_team = over_http(team_ops.create_team)
    apply_team = over_http(team_ops.apply_team)
    create_agent = over_http(team_ops.create_agent)
    apply_agent = over_http(team_ops.apply_agent)
    put_agent = renamed("apply_agent")

    policy = over_http(policy_ops.policy)
    policies = over_http(policy_ops.policies)
    put_policy = over_http(policy_ops.put_policy)
    delete_policy = over_http(policy_ops.delete_policy)

    # --- operations ------------------------------------------------------------------------

    usage = over_http(observe_ops.usage, older=observe_ops.usage_by_day)
    spend_windows = over_http(spend_ops.spend_windows)
    spend_limits = over_http(spend_ops.spend_limits)
    put_spend_limit = over_http(spend_ops.put_spend_limit)
    delete_spend_limit = over_http(spend_ops.delete_spend_limit)
    dead_letters = over_http(observe_ops.dead_letters)

    def models(self) -> list[str]:
        """What the key may name as an OpenAI ``model``: teams, ``skill:<name>``, ``auto``."""
        return self._send(routes.models())

    def model(self, model_id: str) -> str:
        """``model_id``, if the key may name it (``TeamNotFound`` otherwise)."""
        return self._send(routes.model(model_id))

    def health(self) -> Health:
        """Liveness (no key needed)."""
        return self._send(routes.health())

    def ready(self) -> Readiness:
        """Readiness of each system actor (no key needed); not ready is an answer too."""
        return self._send(routes.ready())

    # --- skills ----------------------------------------------------------------------------

    skills = over_http(skill_ops.skills)
    apply_skill = over_http(skill_ops.apply_skill)
    skill = over_http(skill_ops.skill)
    skill_history = over_http(skill_ops.skill_history)
    rollback_skill = over_http(skill_ops.rollback_skill)
    promote_skill = over_http(skill_ops.promote_skill)
    optimise_skill = over_http(skill_ops.optimise_skill)
    delete_skill = over_http(skill_ops.delete_skill)
    lessons = over_http(skill_ops.lessons)
    delete_lesson = over_http(skill_ops.delete_lesson)

    def apply_skill_file(self, text: str, *, kind: str = "yaml") -> SkillApplied:
        """Register a skill from its file's text, ``kind`` 'yaml' or 'markdown' (admin keys).

        Raises:
            InvalidInput: the file is not a valid skill (each problem with its line).
        """
        return self._send(routes.apply_skill_file(text, kind))

    # --- evals and experiments -------------------------------------------------------------

    start_eval = over_http(eval_ops.start_eval)
    evals = over_http(eval_ops.evals)
    eval_run = over_http(eval_ops.eval_run)
    compare_evals = over_http(eval_ops.compare_evals)

    start_experiment = over_http(experiment_ops.start_experiment)
    experiments = over_http(experiment_ops.experiments)
    experiment = over_http(experiment_ops.experiment)
    stop_experiment = over_http(experiment_ops.stop_experiment)

    # --- knowledge bases -------------------------------------------------------------------

    knowledge_bases = over_http(knowledge_ops.knowledge_bases)
    ingest = over_http(knowledge_ops.ingest)
    documents = over_http(knowledge_ops.documents)
    delete_document = over_http(knowledge_ops.delete_document)
    search = over_http(knowledge_ops.search)
    drop_knowledge_base = over_http(knowledge_ops.drop_knowledge_base)

    # --- sessions --------------------------------------------------------------------------

    create_session = over_http(session_ops.create_session)
    sessions = over_http(session_ops.sessions)
    session = over_http(session_ops.session)
    delete_session = over_http(session_ops.delete_session)

    # --- webhooks ---------------------------------------------------------------------------

    create_webhook = over_http(webhook_ops.create_webhook)
    webhooks = over_http(webhook_ops.webhooks)
    webhook = over_http(webhook_ops.webhook)
    delete_webhook = over_http(webhook_ops.delete_webhook)
    webhook_deliveries = over_http(webhook_ops.webhook_deliveries)
    put_schedule = over_http(schedule_ops.put_schedule)
    schedules = over_http(schedule_ops.schedules)
    schedule = over_http(schedule_ops.schedule)
    delete_schedule = over_http(schedule_ops.delete_schedule)
    put_guardrail = over_http(guardrail_ops.put_guardrail)
    guardrails = over_http(guardrail_ops.guardrails)
    guardrail = over_http(guardrail_ops.guardrail)
    delete_guardrail = over_http(guardrail_ops.delete_guardrail)
    guardrail_decisions = over_http(guardrail_ops.guardrail_decisions)
