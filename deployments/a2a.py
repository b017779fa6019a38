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
- Not served (the card says so, and the calls answer ``UnsupportedOperationError``): push
  notification configs, task lists and the extended card.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Final

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
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
    Artifact,
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
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from raytroupe import __version__
from raytroupe.deployments.declared import at_of
from raytroupe.deployments.guard import principal_of, request_id_of
from raytroupe.deployments.openai_answers import _AnswerTokens
from raytroupe.deployments.openai_messages import _target
from raytroupe.deployments.problems import troupe_problem
from raytroupe.protocols import (
    Conflict,
    ErrorCode,
    InvalidInput,
    JobEvent,
    JobNotFound,
    SkillNotFound,
    TeamNotFound,
    TroupeError,
)
from raytroupe.protocols.http import JobView
from raytroupe.protocols.job_order import JobOrder
from raytroupe.protocols.sessions import checked_session_id
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations import At, job_reads, jobs, sessions, skills, submit, teams

__all__ = ["JobTasks", "a2a_routes"]

PREFIX: Final = "/a2a"
_STATES: Final[dict[str, TaskState]] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "planning": TaskState.TASK_STATE_WORKING,
    "running": TaskState.TASK_STATE_WORKING,
    "aggregating": TaskState.TASK_STATE_WORKING,
    "awaiting_approval": TaskState.TASK_STATE_INPUT_REQUIRED,
    "awaiting_input": TaskState.TASK_STATE_INPUT_REQUIRED,
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
_ENDS: Final = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)
_PAUSES: Final = frozenset({"approval_requested", "graph_interrupted"})
_ANSWER: Final = "answer"
_OUTPUT: Final = "output"
_BEARER: Final = "bearer"
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
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
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
        with _as_a2a():
            job_id, context_id, after = await _started(at, context.state["target"], params.message)
            if not params.configuration.return_immediately:
                with contextlib.suppress(TimeoutError):  # then the task as it is: working
                    async with asyncio.timeout(self._wait_s):
                        await _followed_to_pause(at, job_id, after)
            return await _task(at, job_id, context_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """The task, then its updates until it ends or waits for a person."""
        at = _at(context)
        with _as_a2a():
            job_id, context_id, after = await _started(at, context.state["target"], params.message)
            first = await _task(at, job_id, context_id)
        yield first
        async for update in _updates(at, job_id, context_id, after):
            yield update

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """The task as it is, then its updates (a finished task: an error, as A2A says)."""
        at = _at(context)
        with _as_a2a():
            context_id, events = await _context_of(at, params.id)
            task = await _task(at, params.id, context_id)
        if task.status.state in _ENDS:
            raise UnsupportedOperationError(f"task {params.id} has ended: GetTask reads it")
        yield task
        async for update in _updates(at, params.id, context_id, events[-1].seq if events else 0):
            yield update

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The job as a task (``historyLength`` caps its messages)."""
        at = _at(context)
        with _as_a2a():
            context_id, _ = await _context_of(at, params.id)
            task = await _task(at, params.id, context_id)
        if params.HasField("history_length"):
            del task.history[: max(0, len(task.history) - params.history_length)]
        return task

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel the job; its task (a finished one cannot be: ``TaskNotCancelableError``)."""
        at = _at(context)
        with _as_a2a():
            context_id, _ = await _context_of(at, params.id)
            try:
                await jobs.cancel.run_for(at, {"job_id": params.id})
            except Conflict as exc:
                raise TaskNotCancelableError(exc.message) from None
            return await _task(at, params.id, context_id)

    async def on_list_tasks(
        self,
        params: ListTasksRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> ListTasksResponse:
        """Not served: jobs are listed by ``GET /v1/jobs/summaries``."""
        raise UnsupportedOperationError(_UNSERVED.format(what="task lists"))

    async def on_create_task_push_notification_config(
        self,
        params: TaskPushNotificationConfig,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> TaskPushNotificationConfig:
        """Not served (the card says so)."""
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self,
        params: GetTaskPushNotificationConfigRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> TaskPushNotificationConfig:
        """Not served (the card says so)."""
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self,
        params: ListTaskPushNotificationConfigsRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> ListTaskPushNotificationConfigsResponse:
        """Not served (the card says so)."""
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self,
        params: DeleteTaskPushNotificationConfigRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> None:
        """Not served (the card says so)."""
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self,
        params: GetExtendedAgentCardRequest,  # noqa: ARG002
        context: ServerCallContext,  # noqa: ARG002
    ) -> AgentCard:
        """Not served: the public card is the whole card."""
        raise UnsupportedOperationError("the card at .well-known/agent-card.json is the whole")


def _at(context: ServerCallContext) -> At:
    at = context.state.get("at")
    if not isinstance(at, At):  # pragma: no cover - the context builder always sets it
        raise InternalError("an A2A request without its caller")
    return at


class _as_a2a:  # noqa: N801 - used as a context manager, like contextlib's
    """raytroupe's typed errors as the A2A errors that mean the same."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _tb: Any
    ) -> None:
        if exc is None or isinstance(exc, A2AError) or not isinstance(exc, TroupeError):
            return
        data = {"code": exc.code.value}
        if isinstance(field := exc.detail.get("field"), str):
            data["field"] = field
        if isinstance(exc, JobNotFound):
            raise TaskNotFoundError(exc.message, data) from None
        if isinstance(exc, InvalidInput | TeamNotFound | SkillNotFound):
            raise InvalidParamsError(exc.message, data) from None
        if exc.code is ErrorCode.INTERNAL:
            raise InternalError(exc.message, data) from None
        raise InvalidRequestError(exc.message, data) from None


async def _started(at: At, target: str, message: Message) -> tuple[str, str, int]:
    """The job ``message`` starts, or the waiting one it answers.

    (job id, context id, the seq of its last event before: what follows is news).
    """
    if message.task_id:
        context_id, events = await _context_of(at, message.task_id)
        await _answered(at, message.task_id, message)
        return message.task_id, context_id, events[-1].seq if events else 0
    texts = [t for t in get_text_parts(message.parts) if t.strip()]
    data = get_data_parts(message.parts)
    team, skill = _target(target)
    if len(data) > 1:
        raise InvalidInput("a message gives a skill one data part (its input), not several")
    given = data[0] if data else None
    if given is not None and skill is None:
        raise InvalidInput("only a skill takes a data part (its input); a team takes text")
    if not texts and given is None:
        raise InvalidInput("the message has no text part (the task) and no data part")
    context_id = checked_session_id(message.context_id or f"a2a-{uuid.uuid4().hex}")
    await sessions.create_session.run_for(at, {"session_id": context_id})
    order = JobOrder(
        task="\n".join(texts), team=team, skill=skill, input=given, session=context_id,
        stream_answer=True,
    )  # fmt: skip
    return await submit.start(at, order), context_id, 0


async def _answered(at: At, job_id: str, message: Message) -> None:
    """``message`` as the answer the job waits for (a graph's input, or a decision)."""
    text = "\n".join(get_text_parts(message.parts)).strip()
    data = get_data_parts(message.parts)
    held = await jobs.approvals.run_for(at, {"job_id": job_id})
    if held:
        approved, reason = _decision(text, data[0] if data else None)
        decide = jobs.approve if approved else jobs.reject
        arguments = {"job_id": job_id, "approval_id": held[0].approval_id, "reason": reason}
        await decide.run_for(at, arguments)
        return
    waits = [w for w in await jobs.interrupts.run_for(at, {}) if w.job_id == job_id]
    if not waits:
        view = await job_reads.job.run_for(at, {"job_id": job_id})
        raise Conflict(
            f"task {job_id} waits for no input ({view.status}): a new message without its "
            "taskId starts a new task",
            job_id=job_id,
        )
    value = data[0] if data else text
    arguments = {"job_id": job_id, "value": value, "interrupt": waits[0].interrupt.id}
    await jobs.resume.run_for(at, arguments)


def _decision(text: str, data: Any) -> tuple[bool, str]:
    """(approved, reason) from a data part ``{"approved", "reason"}`` or ``approve``/``reject``."""
    if isinstance(data, dict) and isinstance(data.get("approved"), bool):
        reason = data.get("reason")
        return data["approved"], reason if isinstance(reason, str) else ""
    word, _, rest = text.partition(" ")
    match word.lower().rstrip(".,:!"):
        case "approve" | "approved" | "yes":
            return True, rest.strip()
        case "reject" | "rejected" | "no":
            return False, rest.strip() or "rejected over A2A"
    raise InvalidInput(
        "the task waits for a decision on a tool call: say 'approve' or 'reject <reason>' "
        '(or send a data part {"approved": true|false, "reason": "..."})'
    )


async def _context_of(at: At, job_id: str) -> tuple[str, list[JobEvent]]:
    """The job's context id (its session, or the job's own id) and its events so far."""
    stream = await job_reads.events.run_for(at, {"job_id": job_id, "follow": False})
    events = [e async for e in stream if e is not None]
    first = events[0].data.get("session") if events else None
    return (first if isinstance(first, str) else job_id), events


async def _followed_to_pause(at: At, job_id: str, after: int) -> None:
    """Follow the job's events after ``after`` until it ends or waits for a person."""
    stream = await job_reads.events.run_for(at, {"job_id": job_id, "after": after})
    async for event in stream:
        if event is None:
            continue
        if event.terminal or (event.type in _PAUSES and await _waits(at, job_id)):
            break


async def _waits(at: At, job_id: str) -> bool:
    view = await job_reads.job.run_for(at, {"job_id": job_id})
    return view.status in {"awaiting_approval", "awaiting_input"}


async def _task(at: At, job_id: str, context_id: str) -> Task:
    """The job as an A2A task: its state, its question or error, its answer."""
    view = await job_reads.job.run_for(at, {"job_id": job_id})
    summary = await job_reads.summary.run_for(at, {"job_id": job_id})
    asked = Message(
        message_id=f"{job_id}-task", role=Role.ROLE_USER, task_id=job_id, context_id=context_id,
        parts=[new_text_part(view.result.task if view.result else summary.task)],
    )  # fmt: skip
    status = await _status(at, view, context_id)
    task = Task(id=job_id, context_id=context_id, status=status, history=[asked])
    if view.result is not None and view.result.status == "succeeded":
        task.artifacts.extend(_answer(view))
    return task


async def _status(at: At, view: JobView, context_id: str) -> TaskStatus:
    """The task's status: its state, and a message saying what is asked or what failed."""
    state = _STATES[view.status]
    said = ""
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        said = await _asked(at, view.id)
    elif view.result is not None and view.result.error is not None:
        said = f"{view.result.error.code.value}: {view.result.error.message}"
    status = TaskStatus(state=state)
    status.timestamp.GetCurrentTime()
    if said:
        status.message.CopyFrom(_agent_says(view.id, context_id, said, f"{view.id}-status"))
    return status


async def _asked(at: At, job_id: str) -> str:
    """What the waiting job asks a person."""
    held = await jobs.approvals.run_for(at, {"job_id": job_id})
    if held:
        call = held[0]
        return (
            f"approve or reject: agent {call.agent} would call {call.tool} with "
            f"{call.arguments}. Answer 'approve' or 'reject <reason>'."
        )
    waits = [w for w in await jobs.interrupts.run_for(at, {}) if w.job_id == job_id]
    if waits:
        wait = waits[0].interrupt
        return f"the graph waits {wait.when} node {wait.node!r} for input: send the value"
    return "the task waits for a person"


def _agent_says(job_id: str, context_id: str, text: str, message_id: str) -> Message:
    return Message(
        message_id=message_id, role=Role.ROLE_AGENT, task_id=job_id, context_id=context_id,
        parts=[new_text_part(text)],
    )  # fmt: skip


def _answer(view: JobView) -> list[Artifact]:
    """The answer (text) and the standard output envelope (data), as two artifacts."""
    result = view.result
    if result is None:  # pragma: no cover - a succeeded job has a result
        return []
    said = [Artifact(artifact_id=_ANSWER, name=_ANSWER, parts=[new_text_part(result.answer)])]
    if result.output is not None:
        output = result.output.model_dump(mode="json")
        part = new_data_part(output, media_type="application/json")
        said.append(Artifact(artifact_id=_OUTPUT, name=_OUTPUT, parts=[part]))
    return said


async def _updates(
    at: At, job_id: str, context_id: str, after: int
) -> AsyncIterator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """The job's events after ``after`` as A2A updates, until it ends or waits."""
    tokens = _AnswerTokens(job_id)
    streamed = False
    with _as_a2a():
        stream = await job_reads.events.run_for(at, {"job_id": job_id, "after": after})
    async for event in stream:
        if event is None:
            continue
        if pieces := tokens.take(event):
            for piece in pieces:
                yield _chunk(job_id, context_id, piece, append=streamed, last=False)
                streamed = True
            continue
        if event.terminal:
            view = await job_reads.job.run_for(at, {"job_id": job_id})
            for update in _ended(view, context_id, tokens if streamed else None):
                yield update
            yield TaskStatusUpdateEvent(
                task_id=job_id, context_id=context_id, status=await _status(at, view, context_id)
            )
            return
        if event.type in _PAUSES and await _waits(at, job_id):
            view = await job_reads.job.run_for(at, {"job_id": job_id})
            status = await _status(at, view, context_id)
            yield TaskStatusUpdateEvent(task_id=job_id, context_id=context_id, status=status)
            return
        if said := _step(event):
            status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
            status.timestamp.GetCurrentTime()
            status.message.CopyFrom(_agent_says(job_id, context_id, said, f"{job_id}-{event.seq}"))
            yield TaskStatusUpdateEvent(task_id=job_id, context_id=context_id, status=status)


def _step(event: JobEvent) -> str:
    """What a step of the job says to a caller following it ('' for most records)."""
    sid = event.subtask_id or ""
    match event.type:
        case "plan_ready":
            listed = event.data.get("subtasks")
            count = len(listed) if isinstance(listed, list) else 0
            return f"planned {count} subtask(s)" if count else "planned"
        case "subtask_started":
            return f"subtask {sid} started"
        case "subtask_finished":
            return f"subtask {sid} finished"
        case "job_aggregating":
            return "writing the answer"
        case "graph_resumed" | "approval_decided":
            return event.type.replace("_", " ")
    return ""


def _chunk(
    job_id: str, context_id: str, text: str, *, append: bool, last: bool
) -> TaskArtifactUpdateEvent:
    artifact = Artifact(artifact_id=_ANSWER, name=_ANSWER, parts=[new_text_part(text)])
    return TaskArtifactUpdateEvent(
        task_id=job_id, context_id=context_id, artifact=artifact, append=append, last_chunk=last
    )


def _ended(
    view: JobView, context_id: str, tokens: _AnswerTokens | None
) -> list[TaskArtifactUpdateEvent]:
    """The answer's artifacts once the job has succeeded: what had not streamed, then the rest."""
    result = view.result
    if result is None or result.status != "succeeded":
        return []
    rest = None if tokens is None else tokens.rest(result.answer)
    if rest is None:  # nothing streamed, or a check replaced what did: the whole answer
        said = [_chunk(view.id, context_id, result.answer, append=False, last=True)]
    else:
        said = [_chunk(view.id, context_id, rest, append=True, last=True)]
    for artifact in _answer(view)[1:]:
        said.append(TaskArtifactUpdateEvent(
            task_id=view.id, context_id=context_id, artifact=artifact, last_chunk=True
        ))  # fmt: skip
    return said
