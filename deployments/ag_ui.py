"""AG-UI: a job as the event stream agent front ends follow (CopilotKit and the like).

Two routes of the Serve app, behind the same keys and policies as every route:

- ``POST /v1/ag-ui/{target}``: AG-UI's ``RunAgentInput`` in, its events out (SSE). The last
  user message is the task of a job of ``target`` (a team's name, ``skill:<name>``, or
  ``auto``, as the OpenAI facade's ``model``); the thread is the caller's session of that
  id (made if new), so the next run of the thread sees this one's turns.
- ``GET /v1/jobs/{job_id}/ag-ui``: the same events for a job of the caller's, from its start
  (thread and run ids: the job's).

The events, each one of the ``ag-ui-protocol`` package's models, as its encoder writes them:

- ``RUN_STARTED``, then ``CUSTOM`` ``raytroupe.job`` (the job's id) and ``raytroupe.plan``
  (the subtasks, once planned);
- per subtask, ``STEP_STARTED`` and ``STEP_FINISHED`` (the step's name is the subtask's id),
  with the tool calls its agent made between them (``TOOL_CALL_START``/``ARGS``/``END`` and
  ``TOOL_CALL_RESULT``, read from the job's trace when the subtask finishes: its arguments
  and result as the trace keeps them, cut at 2,000 characters);
- the answer as one assistant message: ``TEXT_MESSAGE_START``, ``TEXT_MESSAGE_CONTENT`` as its
  tokens come when the answer is streamed (a team's aggregation by the model), else once,
  and ``TEXT_MESSAGE_END``;
- for a graph job, its state: ``STATE_SNAPSHOT`` at its first step, then ``STATE_DELTA``
  (JSON Patch of the state's top-level fields) at each step;
- a tool call held for approval and a graph waiting for input as ``CUSTOM`` events
  (``raytroupe.approval_requested``, ``raytroupe.graph_interrupted``): a person answers them
  over ``/v1`` or the console, and the stream goes on;
- ``RUN_FINISHED`` (its ``result``: the standard output envelope; a cancelled job's outcome
  ``cancelled``) or ``RUN_ERROR`` (the job's error code and message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Final

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import Field

from raytroupe.deployments.access import Caller
from raytroupe.deployments.declared import at_of
from raytroupe.deployments.documents import document
from raytroupe.deployments.openai_answers import _AnswerTokens
from raytroupe.deployments.openai_messages import _target
from raytroupe.protocols import InvalidRequest, JobEvent, Span
from raytroupe.protocols.job_order import JobOrder
from raytroupe.protocols.sessions import checked_session_id
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.http_calls import EVENT_STREAM
from raytroupe.runtime.operations import At, job_reads, jobs, sessions, submit

__all__ = ["ag_ui_events", "ag_ui_routes"]

_MEDIA: Final = EventEncoder().get_content_type()
_STREAM: Final[dict[int | str, Any]] = {
    200: {
        "description": "AG-UI events as Server-Sent Events: each `data` line one event's JSON.",
        "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
    }
}
_RUN_BODY: Final[dict[str, Any]] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "title": "RunAgentInput",
                    "description": "AG-UI's RunAgentInput (the ag-ui-protocol package's model): "
                    "the thread, the run, the thread's messages (the last user message is the "
                    "task); state, tools, context and forwardedProps are accepted.",
                    "type": "object",
                    "required": ["threadId", "runId", "messages"],
                    "properties": {
                        "threadId": {"type": "string"},
                        "runId": {"type": "string"},
                        "messages": {"type": "array", "items": {"type": "object"}},
                    },
                }
            }
        },
    }
}
"""Described by hand: the package's own schema names its ``ToolCall`` as raytroupe's is."""
_HEADERS: Final = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_KEEP_ALIVE: Final = ": keep-alive\n\n"
JobId = Annotated[str, Field(min_length=1, max_length=64)]
Target = Annotated[str, Field(min_length=1, max_length=90)]


def ag_ui_routes(client: SystemClient) -> APIRouter:
    """``POST /v1/ag-ui/{target}`` and ``GET /v1/jobs/{job_id}/ag-ui``."""
    routes = APIRouter(tags=["AG-UI"])

    @routes.post(
        "/v1/ag-ui/{target}", response_class=StreamingResponse, responses=_STREAM,
        openapi_extra=_RUN_BODY,
    )  # fmt: skip
    async def run_agent(
        target: Target,
        run: Annotated[RunAgentInput, document(RunAgentInput)],
        who: Caller,
        request: Request,
    ) -> StreamingResponse:
        """Run the thread's last user message as a job of ``target``; its AG-UI events.

        ``target``: a registered team's name, ``skill:<name>``, or ``auto``. The thread is
        the caller's session of that id (made if new). A run with no user message is a 422.
        """
        at = at_of(who, client, request)
        task = _last_user_text(run)
        thread = checked_session_id(run.thread_id)
        await sessions.create_session.run_for(at, {"session_id": thread})
        team, skill = _target(target)
        order = JobOrder(task=task, team=team, skill=skill, session=thread, stream_answer=True)
        job_id = await submit.start(at, order)
        events = ag_ui_events(at, job_id, thread_id=run.thread_id, run_id=run.run_id)
        return StreamingResponse(_encoded(events), media_type=_MEDIA, headers=_HEADERS)

    @routes.get("/v1/jobs/{job_id}/ag-ui", response_class=StreamingResponse, responses=_STREAM)
    async def follow(job_id: JobId, who: Caller, request: Request) -> StreamingResponse:
        """A job of the caller's as AG-UI events, from its start (404: none of the caller's)."""
        at = at_of(who, client, request)
        await job_reads.job.run_for(at, {"job_id": job_id})  # before the stream: a 404
        events = ag_ui_events(at, job_id, thread_id=job_id, run_id=job_id)
        return StreamingResponse(_encoded(events), media_type=_MEDIA, headers=_HEADERS)

    return routes


async def _encoded(events: AsyncIterator[BaseEvent | None]) -> AsyncIterator[str]:
    encoder = EventEncoder()
    async for event in events:
        yield _KEEP_ALIVE if event is None else encoder.encode(event)


def _last_user_text(run: RunAgentInput) -> str:
    """The text of the thread's last user message (its text parts, joined)."""
    for message in reversed(run.messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            text = content
        else:
            text = "\n".join(
                t for part in content if isinstance(t := getattr(part, "text", None), str)
            )
        if text.strip():
            return text
    said = "the run has no user message with text: the last one is the job's task"
    raise InvalidRequest(said, field="messages", problems=[f"body.messages: {said}"])


async def ag_ui_events(
    at: At, job_id: str, *, thread_id: str, run_id: str
) -> AsyncIterator[BaseEvent | None]:
    """The job's events as AG-UI's, from its start to its end (None: a quiet spell)."""
    job = _Follower(at, job_id, thread_id, run_id)
    yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
    yield CustomEvent(name="raytroupe.job", value={"job_id": job_id})
    stream = await job_reads.events.run_for(at, {"job_id": job_id})
    async for event in stream:
        if event is None:
            yield None
            continue
        for said in await job.said(event):
            yield said


class _Follower:
    """One job's events turned into AG-UI's, in order."""

    def __init__(self, at: At, job_id: str, thread_id: str, run_id: str) -> None:
        self._at, self._job_id = at, job_id
        self._thread_id, self._run_id = thread_id, run_id
        self._answer = _AnswerTokens(job_id)
        self._message = f"{job_id}-answer"
        self._writing = False
        self._steps: list[str] = []
        self._state: dict[str, Any] | None = None
        self._step = 0  # the graph's last step said
        self._graph = False

    async def said(self, event: JobEvent) -> list[BaseEvent]:
        """What ``event`` says to a front end (nothing, for most of the job's records)."""
        sid = event.subtask_id or ""
        said: list[BaseEvent] = []
        match event.type:
            case "plan_ready":
                said = [CustomEvent(name="raytroupe.plan", value=event.data)]
            case "subtask_started" if sid not in self._steps:
                self._steps.append(sid)
                said = [StepStartedEvent(step_name=sid)]
            case "subtask_finished" if sid in self._steps:
                self._steps.remove(sid)
                said = [*await self._tool_calls(sid), StepFinishedEvent(step_name=sid)]
            case "llm_delta" | "job_aggregating":
                said = self._text(self._answer.take(event))
            case "graph_step" if not event.data.get("namespace"):
                self._graph = True
                said = await self._graph_state(event)
            case "approval_requested" | "graph_interrupted":
                said = [CustomEvent(name=f"raytroupe.{event.type}", value=event.data)]
            case "job_succeeded" | "job_failed" | "job_cancelled":
                said = await self._end()
        return said

    def _text(self, pieces: list[str]) -> list[BaseEvent]:
        said: list[BaseEvent] = []
        if pieces and not self._writing:
            self._writing = True
            said.append(TextMessageStartEvent(message_id=self._message, role="assistant"))
        said += [TextMessageContentEvent(message_id=self._message, delta=p) for p in pieces]
        return said

    async def _end(self) -> list[BaseEvent]:
        view = await job_reads.job.run_for(self._at, {"job_id": self._job_id})
        result = view.result
        said: list[BaseEvent] = [StepFinishedEvent(step_name=s) for s in self._steps]
        if self._graph:
            said += await self._states(None)
        if result is not None and result.status == "succeeded":
            rest = self._answer.rest(result.answer) if self._writing else result.answer
            if rest is None:  # what streamed is not the answer's start: a check replaced it
                said.append(TextMessageEndEvent(message_id=self._message))
                self._message, self._writing, rest = f"{self._message}-final", False, result.answer
            said += self._text([rest] if rest else [])
            if self._writing:
                said.append(TextMessageEndEvent(message_id=self._message))
            output = result.output.model_dump(mode="json") if result.output else None
            return [*said, self._finished(output, "success")]
        if self._writing:
            said.append(TextMessageEndEvent(message_id=self._message))
        if result is not None and result.status == "cancelled":
            return [*said, self._finished(None, "cancelled")]
        error = None if result is None else result.error
        message = error.message if error else f"job {self._job_id} ended without an answer"
        code = error.code.value if error else "internal"
        return [*said, RunErrorEvent(message=message, code=code)]

    def _finished(self, output: Any, outcome: str) -> RunFinishedEvent:
        return RunFinishedEvent.model_validate(
            {"thread_id": self._thread_id, "run_id": self._run_id, "result": output,
             "outcome": {"type": outcome}}
        )  # fmt: skip

    async def _tool_calls(self, subtask_id: str) -> list[BaseEvent]:
        """The tool calls the subtask's agent made, as the job's trace keeps them."""
        trace = await job_reads.trace.run_for(self._at, {"job_id": self._job_id})
        said: list[BaseEvent] = []
        for span in _under(trace.spans, subtask_id):
            call_id = span.span_id
            attributes = span.attributes
            arguments = str(attributes.get("arguments") or "{}")
            said += [
                ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(attributes["tool"])),
                ToolCallArgsEvent(tool_call_id=call_id, delta=arguments),
                ToolCallEndEvent(tool_call_id=call_id),
                ToolCallResultEvent(
                    message_id=f"{call_id}-result", tool_call_id=call_id, role="tool",
                    content=str(attributes.get("result") or ""),
                ),
            ]  # fmt: skip
        return said

    async def _graph_state(self, event: JobEvent) -> list[BaseEvent]:
        """The graph's state up to the step ``event`` reports: in full first, then changes.

        Every step not yet said, in order, so a step whose event went by before its
        checkpoint could be read is said with the next one (or at the end).
        """
        step = event.data.get("step")
        return await self._states(step if isinstance(step, int) else None)

    async def _states(self, upto: int | None) -> list[BaseEvent]:
        points = await jobs.checkpoints.run_for(self._at, {"job_id": self._job_id})
        said: list[BaseEvent] = []
        for point in sorted((p for p in points if not p.namespace), key=lambda p: p.step):
            if point.step <= self._step or (upto is not None and point.step > upto):
                continue
            self._step = point.step
            if point.step == 0 or not isinstance(point.state, dict):
                continue  # the input, before any node ran
            before, self._state = self._state, dict(point.state)
            if before is None:
                said.append(StateSnapshotEvent(snapshot=self._state))
            elif delta := _patch(before, self._state):
                said.append(StateDeltaEvent(delta=delta))
        return said


def _under(spans: tuple[Span, ...] | list[Span], subtask_id: str) -> list[Span]:
    """The tool-call spans below the subtask's span, in the order they started."""
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    roots = [
        s for s in spans if s.kind == "subtask" and s.attributes.get("subtask_id") == subtask_id
    ]
    found: list[Span] = []
    waiting = list(roots)
    while waiting:
        span = waiting.pop()
        waiting += children.get(span.span_id, [])
        if span.kind == "tool_call":
            found.append(span)
    return sorted(found, key=lambda s: s.start)


def _patch(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON Patch (RFC 6902) from ``before`` to ``after``, field by top-level field."""
    ops: list[dict[str, Any]] = [
        {"op": "remove", "path": _pointer(key)} for key in sorted(before.keys() - after.keys())
    ]
    for key, value in after.items():
        if key not in before:
            ops.append({"op": "add", "path": _pointer(key), "value": value})
        elif before[key] != value:
            ops.append({"op": "replace", "path": _pointer(key), "value": value})
    return ops


def _pointer(key: str) -> str:
    """``key`` as a JSON Pointer to a top-level field (``~`` and ``/`` escaped)."""
    return "/" + key.replace("~", "~0").replace("/", "~1")
