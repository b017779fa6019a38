"""An OpenAI-compatible face: ``model`` names a registered team, the chat is its task.

Any OpenAI client (``openai.OpenAI(base_url=".../v1", api_key=<raytroupe key>)``) can talk to
a team. The last user message is the task; earlier turns and system messages travel with it
as context; images in the messages are given to the job.

Streaming (``stream: true``) sends ``chat.completion.chunk`` events whose content, joined, is
exactly the non-streamed answer:

- The answer's tokens as the model writes them, when the answer is one model call's text as
  it comes: a team job's aggregation by the model (the orchestrator streams it for this
  caller; see ``runner.streams_answer``), with no skill, output schema or required fields to
  gate or redo it, and no JSON ``response_format`` (whose content is the standard output
  envelope).
- Otherwise the answer once the job has it: a skill, a graph, a gated answer, JSON, and a
  plan sized from the task (one subtask, or one per listed question), whose answer is put
  together from its subtasks' outputs without a model call. (An agent's turn cannot be sent
  as it comes: a check or a tool result may make the agent answer again.)
- Never the agents' own tokens: their subtasks' outputs are work towards the answer, not it.
  Progress (plan ready, subtasks started and finished, aggregating) goes as SSE comments,
  which OpenAI clients skip.

An answer that asks for the caller's ``tools`` (see :mod:`.openai_tools`) is not streamed
as it comes: its calls come as one ``tool_calls`` delta and ``finish_reason: "tool_calls"``.

Otherwise a ``finish_reason: "stop"`` chunk, the usage chunk when ``stream_options.include_usage``
asks, and ``[DONE]``. A failure once the stream has started is an in-stream error event
(``data: {"error": ...}``, raised by OpenAI clients). A client that disconnects stops only
its stream (nothing goes on reading for it): the job runs to its result, kept at
``/v1/jobs/<id>`` (the completion id is ``chatcmpl-<job id>``).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from raytroupe.deployments.access import Caller
from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.declared import at_of
from raytroupe.deployments.documents import body_of, document
from raytroupe.deployments.guard import request_id_of
from raytroupe.deployments.openai_answers import (
    _chunks,
    _content,
    _Stream,
    _succeeded,
    _usage,
    _wait,
)
from raytroupe.deployments.openai_messages import AUTO, _target, _task, _wants_json
from raytroupe.deployments.openai_tools import asked_calls, called, caller_tools, tool_turns
from raytroupe.deployments.problems import problem
from raytroupe.protocols import TeamNotFound
from raytroupe.protocols.job_context import checked_end_user
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.sessions import checked_session_id
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations.teams import visible

__all__ = ["openai_routes"]

_RESPONSE_FORMATS: Final = frozenset({"text", "json_object", "json_schema"})
_FUNCTIONS: Final = "functions is OpenAI's older form of tools: send tools and tool_choice"
_UNSUPPORTED: Final = {
    **dict.fromkeys(("functions", "function_call"), _FUNCTIONS),
    "audio": "answers are text",
    "prediction": "predicted outputs are not supported",
    "top_logprobs": "log probabilities are not returned",
}
"""Request fields a team cannot honour: refused (400), not silently ignored.

Sampling fields (``temperature``, ``max_tokens``, ``seed``, ...) are accepted and left to the
team: each agent calls its model with its own configuration."""


class ChatRequest(BaseModel):
    """The part of OpenAI's chat completion request a team uses (other fields are ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(
        min_length=1,
        max_length=90,
        description="A team's name, 'skill:<name>[@<version>]', or 'auto' (routed among the "
        "skills and teams the key may run).",
    )
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = Field(
        default=None,
        description="{'type': 'json_object'} or {'type': 'json_schema', ...}: the message "
        "content is the job's answer in the standard shape (StandardOutput JSON).",
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="The caller's function tools: the team may answer by asking for calls "
        "of them (finish_reason 'tool_calls'); it runs none of them itself.",
    )
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description="none, auto (the default), required, or one function."
    )
    parallel_tool_calls: bool | None = Field(
        default=None, description="False: at most one call per answer."
    )
    user: str | None = Field(
        default=None,
        max_length=128,
        description="The tenant's end user the job is for (kept with it and its usage), and "
        "a session of the caller's tenant (made if new, unless X-Session-Id names one): the "
        "job sees the session's history instead of the request's earlier turns, and joins it.",
    )


class ModelCard(BaseModel):
    """A team, as OpenAI's model list shows models."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "raytroupe"


class ModelList(BaseModel):
    """The teams a client may name as ``model``."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


def openai_routes(client: SystemClient, config: APIConfig) -> APIRouter:
    """``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /v1/models/{id}``."""
    routes = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])

    @routes.get("/models", response_model=ModelList)
    async def models(who: Caller) -> ModelList:
        """Registered teams and skills (``skill:<name>``) the caller may run, and ``auto``."""
        teams = await client.teams()
        skills = await client.skills(tenant=None if who.admin else who.tenant)
        names = [*await visible(at_of(who, client), teams), *(f"skill:{s.name}" for s in skills)]
        return ModelList(data=[ModelCard(id=name) for name in [*names, AUTO]])

    @routes.get("/models/{model_id}", response_model=ModelCard)
    async def model(model_id: str, who: Caller) -> ModelCard:
        """One model the caller may name (404 for anything else, another tenant's included)."""
        if model_id not in {card.id for card in (await models(who)).data}:
            raise TeamNotFound(f"no model {model_id!r} for this key", team=model_id)
        return ModelCard(id=model_id)

    @routes.post(
        "/chat/completions",
        response_model=None,
        responses={400: {"description": "a request field the team cannot honour"}},
        openapi_extra=body_of(ChatRequest),
    )
    async def chat(
        who: Caller,
        request: Request,
        body: Annotated[ChatRequest, document(ChatRequest)],
        x_session_id: Annotated[str | None, Header(max_length=128)] = None,
    ) -> dict[str, Any] | StreamingResponse | JSONResponse:
        """Run the chat's last user message as a job of the team named by ``model``.

        A field the team cannot honour (``functions``, ``n`` > 1, ``logprobs``, a non-text
        modality, an unknown ``response_format``) is a 400 naming it; nothing is started. So
        is ``stream_options`` without ``stream``, or with an ``include_usage`` that is no
        boolean.

        ``tools`` (with ``tool_choice``, ``parallel_tool_calls``): the team may answer by
        asking the caller to run them (``tool_calls``, ``finish_reason: "tool_calls"``); the
        conversation sent on with their results is the next job's (see
        :mod:`~raytroupe.deployments.openai_tools`). A call the request does not allow is a
        502 ``bad_response``, never passed on.

        Streamed, the answer's tokens come as the model writes them when they are the answer
        (see the module's docstring), else the answer once the job has it.

        With a session (the ``X-Session-Id`` header, else ``user``; made if the tenant has
        none of that id), the job sees the session's history and joins it; the request's
        earlier user and assistant turns are not used (the session has them).
        """
        refused = _refused(body, request_id_of(request.scope))
        if refused is not None:
            return refused
        session = x_session_id or body.user
        user = None if body.user is None else checked_end_user(body.user)
        if session is not None:
            await client.create_session(who.tenant, checked_session_id(session), user=user)
        offered = {"tools", "tool_choice", "parallel_tool_calls"}
        tools = caller_tools(body.model_dump(include=offered, exclude_none=True))
        since = tool_turns(body.messages)  # the caller's tool calls and results, told apart
        task, history, attachments = _task(
            body.messages, in_session=session is not None, told_after=bool(since)
        )
        task = "\n\n".join(t for t in (task, since, tools and tools.instructions()) if t)
        team, skill = _target(body.model)
        as_json = _wants_json(body.response_format)
        # JSON content is the envelope, and an answer may be a tool call: neither streams live
        live = body.stream and not as_json and tools is None
        order = JobOrder(
            task=task, team=team, skill=skill, attachments=tuple(attachments), session=session,
            history=history, stream_answer=live, user=user,
        )  # fmt: skip
        caller = Submitter(
            tenant=who.tenant, admin=who.admin, by=who.name,
            traceparent=request.headers.get("traceparent"),  # the caller's trace, continued
        )  # fmt: skip
        job_id = await client.submit(order, caller)
        completion_id = f"chatcmpl-{job_id}"
        if body.stream:
            usage = bool((body.stream_options or {}).get("include_usage"))
            return StreamingResponse(
                _chunks(
                    client,
                    config,
                    _Stream(
                        job_id,
                        who.tenant,
                        completion_id,
                        body.model,
                        include_usage=usage,
                        as_json=as_json,
                        tools=tools,
                    ),
                ),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        result = _succeeded(await _wait(client, config, job_id, who.tenant))
        calls = asked_calls(result.answer, tools) if tools is not None else None
        message: dict[str, Any] = {"role": "assistant", "content": _content(result, as_json)}
        if calls:
            message = {"role": "assistant", "content": None, "tool_calls": called(job_id, calls)}
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": _usage(result),
        }

    return routes


def _refused(body: ChatRequest, request_id: str) -> JSONResponse | None:
    """A 400 for the first field of ``body`` the team cannot honour; None if there is none."""
    asked = body.model_extra or {}
    why = next(((f, r) for f, r in _UNSUPPORTED.items() if asked.get(f) not in (None, [], {})),
               None)  # fmt: skip
    if why is None and asked.get("n") not in (None, 1):
        why = ("n", "one answer per request (n = 1)")
    if why is None and asked.get("logprobs"):
        why = ("logprobs", "log probabilities are not returned")
    modalities = asked.get("modalities")
    if why is None and modalities not in (None, ["text"]):
        why = ("modalities", "answers are text")
    kind = (body.response_format or {}).get("type")
    known = isinstance(kind, str) and kind in _RESPONSE_FORMATS
    if why is None and body.response_format is not None and not known:
        why = ("response_format", f"type must be one of {', '.join(sorted(_RESPONSE_FORMATS))}")
    if why is None:
        why = _stream_options_problem(body)
    if why is None:
        return None
    field, reason = why
    return problem(
        400,
        "Bad Request",
        f"unsupported parameter {field!r}: {reason}",
        code="unsupported_parameter",
        request_id=request_id,
        field=field,
    )


def _stream_options_problem(body: ChatRequest) -> tuple[str, str] | None:
    """Why ``stream_options`` cannot be honoured, as OpenAI refuses it; None if it can."""
    if body.stream_options is None:
        return None
    if not body.stream:
        return ("stream_options", "only allowed when stream is true")
    usage = body.stream_options.get("include_usage")
    if usage is not None and not isinstance(usage, bool):
        return ("stream_options", "include_usage must be a boolean")
    return None
