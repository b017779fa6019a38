"""``/a2a/{target}``: each team and skill a key may run, as an A2A agent (A2A 1.0, JSON-RPC).

``target`` is a registered team's name, ``skill:<name>`` or ``auto`` (routed among them), as
the OpenAI facade's ``model`` is. The ``a2a-sdk`` package speaks the wire (JSON-RPC parsing,
Server-Sent Events, the protocol's errors and version header); :class:`JobTasks` answers it
with the declared operations, so keys, tenants, policies, budgets and rate limits are those of
``/v1``, and any Serve replica answers any request (an A2A task is a job; nothing is kept in a
replica).

- ``GET /a2a/{target}/.well-known/agent-card.json``: the agent card (the team or skill as its
  one skill, its JSON-RPC interface, streaming, the bearer key it needs). Behind the key like
  every route: a card says what a key may run, and another tenant's team is a 404.
- ``SendMessage``: a message without a ``taskId`` starts a job (its text parts are the task;
  a skill's data part its input); its ``contextId`` is the caller's session of that id (made
  if new), so the turns of one context see each other. The call answers when the job ends or
  waits for a person (``returnImmediately``: at once; past the chat timeout, as it is then).
  A message *with* the ``taskId`` of a job waiting for input answers it: a graph's interrupt
  takes the message (its data part, else its text) as the resume value; a tool call held for
  approval (the oldest, when several are) takes ``approve``/``reject`` (the first word of the
  text, the rest the reason) or a data part ``{"approved": bool, "reason": str}``.
- ``SendStreamingMessage``/``SubscribeToTask``: the task, then a status update per step
  (``working`` with what started or finished, ``input-required`` with what is asked), the
  answer as an artifact whose text arrives in chunks as the aggregation's tokens come, and the
  last status (``completed``, ``failed`` with the job's error code, ``canceled``).
- ``GetTask``, ``CancelTask``: the job as a task; cancelling a finished one is
  ``TaskNotCancelableError``.
- Job states: pending is ``submitted``; planning, running and aggregating ``working``;
  awaiting approval or input ``input-required``; then ``completed``/``failed``/``canceled``.
- Push notification configs (create, get, list, delete) of a caller's task: each is a
  webhook of kind ``a2a`` (see :mod:`raytroupe.protocols.webhooks`), so its pushes are
  journaled with the job's events and sent by the job's shard, retried with backoff, under
  the operator's webhooks network policy: a status update per change of the task's state,
  as A2A's own push sender posts it, with the config's token and authentication.
- Not served (``UnsupportedOperationError``): task lists and the extended card.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any, Final

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from raytroupe import __version__
from raytroupe.deployments.a2a_tasks import (
    ENDS,
    as_a2a,
    context_of,
    followed_to_pause,
    started,
    task_of,
    updates,
)
from raytroupe.deployments.declared import at_of
from raytroupe.deployments.guard import principal_of, request_id_of
from raytroupe.deployments.openai_messages import _target
from raytroupe.deployments.problems import troupe_problem
from raytroupe.protocols import Conflict, TroupeError
from raytroupe.protocols.webhooks import A2A_PUSHED, A2APush, WebhookEvent, WebhookSpec
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations import At, job_reads, jobs, skills, teams, webhooks

__all__ = ["JobTasks", "a2a_routes"]

PREFIX: Final = "/a2a"
_BEARER: Final = "bearer"
_PUSHED: Final[tuple[WebhookEvent, ...]] = tuple(A2A_PUSHED)
"""What a push config hears: every change of its task's state after it is made."""
_UNSERVED: Final = (
    "raytroupe's A2A agents do not keep {what}: follow a task with SubscribeToTask, or list "
    "jobs with GET /v1/jobs/summaries"
)


def a2a_routes(client: SystemClient, wait_s: float) -> list[Route]:
    """The card and the JSON-RPC endpoint of every target, behind the guard.

    ``wait_s``: a blocking SendMessage's longest wait (the chat timeout).
    """
    dispatcher = JsonRpcDispatcher(JobTasks(wait_s), context_builder=_Callers(client))

    async def card(request: Request) -> JSONResponse:
        at = at_of(principal_of(request.scope), client, request)
        target = request.path_params["target"]
        try:
            found = await agent_card(at, target, str(request.base_url).rstrip("/"))
        except TroupeError as exc:
            return troupe_problem(exc, request_id_of(request.scope))
        return JSONResponse(agent_card_to_dict(found), headers={"Cache-Control": "private"})

    return [
        Route(f"{PREFIX}/{{target}}/.well-known/agent-card.json", card, methods=["GET"]),
        Route(f"{PREFIX}/{{target}}", dispatcher.handle_requests, methods=["POST"]),
    ]


class _Callers(DefaultServerCallContextBuilder):
    """Each request's context holds who it runs for (the key the guard checked) and its target."""

    def __init__(self, client: SystemClient) -> None:
        self._client = client

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["at"] = at_of(principal_of(request.scope), self._client, request)
        context.state["target"] = request.path_params["target"]
        return context


async def agent_card(at: At, target: str, base_url: str) -> AgentCard:
    """``target``'s card for ``at`` (raises as reading the team or skill does)."""
    team, skill = _target(target)
    modes = ["text/plain"]
    if skill is not None:
        spec = await skills.skill.run_for(at, {"name": skill})
        name, description = f"skill:{spec.name}", spec.description
        if spec.input_schema is not None:
            modes = ["application/json", "text/plain"]
        tags = ["skill"]
    elif team is not None:
        found = await teams.team.run_for(at, {"name": team})
        name, description = team, found.description or f"The team {team} of raytroupe."
        tags = ["team"]
    else:
        name = "auto"
        description = "Routes each message to the team or skill of the caller's that fits it."
        tags = ["router"]
    return AgentCard(
        name=name,
        description=description,
        version=__version__,
        provider=AgentProvider(organization="raytroupe", url=base_url),
        supported_interfaces=[
            AgentInterface(
                url=f"{base_url}{PREFIX}/{target}",
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={
            _BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="A raytroupe API key (or X-API-Key)."
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={_BEARER: StringList()})],
        default_input_modes=modes,
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id=name,
                name=name,
                description=description,
                tags=tags,
                input_modes=modes,
                output_modes=["text/plain", "application/json"],
            )
        ],
    )


class JobTasks(RequestHandler):
    """A2A's methods, each a job's operations for the request's caller.

    ``wait_s``: how long a blocking SendMessage waits for its task to end or wait for a
    person before it answers the task as it is (``working``; GetTask or SubscribeToTask
    follow it on).
    """

    def __init__(self, wait_s: float) -> None:
        self._wait_s = wait_s

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """Start a job (or answer the one waiting), then its task when it ends or waits."""
        at = _at(context)
        with as_a2a():
            job_id, context_id, after = await started(at, context.state["target"], params.message)
            if not params.configuration.return_immediately:
                with contextlib.suppress(TimeoutError):  # then the task as it is: working
                    async with asyncio.timeout(self._wait_s):
                        await followed_to_pause(at, job_id, after)
            return await task_of(at, job_id, context_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """The task, then its updates until it ends or waits for a person."""
        at = _at(context)
        with as_a2a():
            job_id, context_id, after = await started(at, context.state["target"], params.message)
            first = await task_of(at, job_id, context_id)
        yield first
        async for update in updates(at, job_id, context_id, after):
            yield update

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """The task as it is, then its updates (a finished task: an error, as A2A says)."""
        at = _at(context)
        with as_a2a():
            context_id, events = await context_of(at, params.id)
            task = await task_of(at, params.id, context_id)
        if task.status.state in ENDS:
            raise UnsupportedOperationError(f"task {params.id} has ended: GetTask reads it")
        yield task
        async for update in updates(at, params.id, context_id, events[-1].seq if events else 0):
            yield update

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The job as a task (``historyLength`` caps its messages)."""
        at = _at(context)
        with as_a2a():
            context_id, _ = await context_of(at, params.id)
            task = await task_of(at, params.id, context_id)
        if params.HasField("history_length"):
            del task.history[: max(0, len(task.history) - params.history_length)]
        return task

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel the job; its task (a finished one cannot be: ``TaskNotCancelableError``)."""
        at = _at(context)
        with as_a2a():
            context_id, _ = await context_of(at, params.id)
            try:
                await jobs.cancel.run_for(at, {"job_id": params.id})
            except Conflict as exc:
                raise TaskNotCancelableError(exc.message) from None
            return await task_of(at, params.id, context_id)

    async def on_list_tasks(
        self,
        params: ListTasksRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> ListTasksResponse:
        """Not served: jobs are listed by ``GET /v1/jobs/summaries``."""
        raise UnsupportedOperationError(_UNSERVED.format(what="task lists"))

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Keep a push config of the caller's task: a webhook of kind ``a2a`` (durable, retried).

        Its URL is checked as a webhook's is (the operator's webhooks network policy); its id
        defaults to the task's; set again under the same id, it replaces the one before.
        """
        at = _at(context)
        config_id = params.id or params.task_id
        authorization = None
        if params.HasField("authentication") and params.authentication.scheme:
            auth = params.authentication
            authorization = f"{auth.scheme} {auth.credentials}".strip()
        push = A2APush(config_id=config_id, token=params.token, authorization=authorization)
        with as_a2a():
            try:
                spec = WebhookSpec(
                    url=params.url, events=_PUSHED, job_id=params.task_id,
                    description=config_id, a2a=push,
                )  # fmt: skip
            except ValidationError as exc:
                raise InvalidParamsError(f"push config refused: {exc.errors()[0]['msg']}") from None
            await webhooks.create_webhook.run_for(at, {"webhook": spec})
        return _config(params.task_id, config_id, params.url, params.token)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """The caller's push config of that id (the task's id, unnamed) for the task."""
        at = _at(context)
        config_id = params.id or params.task_id
        webhook_id = A2APush(config_id=config_id).webhook_id(at.tenant, params.task_id)
        with as_a2a():
            found = await webhooks.webhook.run_for(at, {"webhook_id": webhook_id})
        return _config(params.task_id, config_id, found.url)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """The caller's push configs of the task (its job must be the caller's)."""
        at = _at(context)
        with as_a2a():
            await job_reads.summary.run_for(at, {"job_id": params.task_id})  # the caller's
            found = await webhooks.webhooks.run_for(at, {"job_id": params.task_id, "kind": "a2a"})
        return ListTaskPushNotificationConfigsResponse(
            configs=[_config(params.task_id, w.description, w.url) for w in found]
        )

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Drop the caller's push config of that id for the task."""
        at = _at(context)
        config_id = params.id or params.task_id
        webhook_id = A2APush(config_id=config_id).webhook_id(at.tenant, params.task_id)
        with as_a2a():
            await webhooks.delete_webhook.run_for(at, {"webhook_id": webhook_id})

    async def on_get_extended_agent_card(
        self,
        params: GetExtendedAgentCardRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> AgentCard:
        """Not served: the public card is the whole card."""
        raise UnsupportedOperationError("the card at .well-known/agent-card.json is the whole")


def _config(task_id: str, config_id: str, url: str, token: str = "") -> TaskPushNotificationConfig:
    """A push config as A2A says it (its token only when just set; credentials never)."""
    return TaskPushNotificationConfig(id=config_id, task_id=task_id, url=url, token=token)


def _at(context: ServerCallContext) -> At:
    at = context.state.get("at")
    if not isinstance(at, At):  # pragma: no cover - the context builder always sets it
        raise InternalError("an A2A request without its caller")
    return at
