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

Then a ``finish_reason: "stop"`` chunk, the usage chunk when ``stream_options.include_usage``
asks, and ``[DONE]``. A failure once the stream has started is an in-stream error event
(``data: {"error": ...}``, raised by OpenAI clients). A client that disconnects stops only
its stream (nothing goes on reading for it): the job runs to its result, kept at
``/v1/jobs/<id>`` (the completion id is ``chatcmpl-<job id>``).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from raytroupe.deployments.access import Caller
from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.declared import at_of
from raytroupe.deployments.documents import body_of, document
from raytroupe.deployments.guard import request_id_of
from raytroupe.deployments.problems import problem
from raytroupe.protocols import (
    Attachment,
    InvalidInput,
    JobEvent,
    JobFailed,
    JobResult,
    JobTimeout,
    TeamNotFound,
    TroupeError,
    orchestrator_address,
)
from raytroupe.protocols.sessions import checked_session_id
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations.teams import visible

__all__ = ["openai_routes"]

_CHUNK_CHARS: Final = 64
_POLL_S: Final = 15.0
"""Longest wait for a job's next events; a quiet stream gets a keep-alive comment then."""
_PROGRESS: Final = frozenset(
    {"plan_ready", "subtask_started", "subtask_finished", "job_aggregating"}
)
_RESPONSE_FORMATS: Final = frozenset({"text", "json_object", "json_schema"})
_TEAM_TOOLS: Final = "agents use the tools their team gives them, not a request's"
_UNSUPPORTED: Final = {
    **dict.fromkeys(("tools", "tool_choice", "functions", "function_call"), _TEAM_TOOLS),
    "audio": "answers are text",
    "prediction": "predicted outputs are not supported",
    "top_logprobs": "log probabilities are not returned",
}
"""Request fields a team cannot honour: refused (400), not silently ignored.

Sampling fields (``temperature``, ``max_tokens``, ``seed``, ...) are accepted and left to the
team: each agent calls its model with its own configuration."""
_DATA_URL: Final = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.+)$", re.DOTALL)


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
    user: str | None = Field(
        default=None,
        max_length=128,
        description="A session of the caller's tenant (made if new): the job sees the "
        "session's history instead of the request's earlier turns, and joins it.",
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

        A field the team cannot honour (``tools``, ``n`` > 1, ``logprobs``, a non-text
        modality, an unknown ``response_format``) is a 400 naming it; nothing is started. So
        is ``stream_options`` without ``stream``, or with an ``include_usage`` that is no
        boolean.

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
        if session is not None:
            await client.create_session(who.tenant, checked_session_id(session))
        task, attachments = _task(body.messages, in_session=session is not None)
        team, skill = _target(body.model)
        as_json = _wants_json(body.response_format)
        live = body.stream and not as_json  # JSON content is the envelope, not the tokens
        job_id = await client.submit(
            task, team, tenant=who.tenant, attachments=tuple(attachments), admin=who.admin,
            skill=skill, session=session, by=who.name, stream_answer=live,
            traceparent=request.headers.get("traceparent"),  # the caller's trace, continued
        )  # fmt: skip
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
                    ),
                ),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        result = _succeeded(await _wait(client, config, job_id, who.tenant))
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _content(result, as_json)},
                    "finish_reason": "stop",
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


async def _wait(
    client: SystemClient,
    config: APIConfig,
    job_id: str,
    tenant: str,
    timeout: float | None = None,
) -> JobResult:
    """The job's result within ``timeout`` seconds (default: the chat timeout).

    Raises:
        JobTimeout: it has none by then.
    """
    wait = config.chat_timeout_s if timeout is None else timeout
    result = await client.wait(job_id, wait, tenant=tenant)
    if result is None:
        raise JobTimeout(
            f"job {job_id} did not finish within {config.chat_timeout_s} s; "
            f"follow it at /v1/jobs/{job_id}",
            job_id=job_id,
        )
    return result


def _succeeded(result: JobResult) -> JobResult:
    if result.status != "succeeded":
        why = result.error.message if result.error else result.status
        raise JobFailed(f"job {result.job_id} {result.status}: {why}", job_id=result.job_id)
    return result


@dataclass(frozen=True)
class _Stream:
    job_id: str
    tenant: str
    completion_id: str
    model: str
    include_usage: bool
    as_json: bool = False


async def _chunks(client: SystemClient, config: APIConfig, stream: _Stream) -> AsyncIterator[str]:
    """The SSE body of a streamed chat completion (see the module's docstring)."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data(stream, created, [{"index": 0, "delta": delta, "finish_reason": finish}])

    yield chunk({"role": "assistant", "content": ""})
    tokens = _AnswerTokens(stream.job_id)
    try:
        seen, ended = 0, False
        deadline = time.monotonic() + config.chat_timeout_s
        while not ended and (left := deadline - time.monotonic()) > 0:
            events = await client.events(
                stream.job_id, seen, min(_POLL_S, left), tenant=stream.tenant
            )
            for event in events:
                seen, ended = event.seq, ended or event.terminal
                for text in [] if stream.as_json else tokens.take(event):
                    yield chunk({"content": text})
                if event.type in _PROGRESS:
                    yield f": {event.type} {event.subtask_id or ''}\n\n"
            if not events:
                yield ": waiting\n\n"  # keeps proxies from closing a quiet stream
        result = _succeeded(await _wait(client, config, stream.job_id, stream.tenant, 0.0))
    except TroupeError as exc:  # headers are sent: report in the stream
        yield _error(exc.message, exc.code.value)
        return
    rest = tokens.rest(_content(result, stream.as_json))
    if rest is None:
        yield _error(
            f"the streamed text is not job {stream.job_id}'s answer (the answer was made "
            f"again after it streamed); read it at /v1/jobs/{stream.job_id}",
            "answer_superseded",
        )
        return
    for start in range(0, len(rest), _CHUNK_CHARS):
        yield chunk({"content": rest[start : start + _CHUNK_CHARS]})
    yield chunk({}, "stop")
    if stream.include_usage:
        yield _data(stream, created, [], usage=_usage(result))
    yield "data: [DONE]\n\n"


def _data(stream: _Stream, created: int, choices: list[dict[str, Any]], **extra: Any) -> str:
    """One ``chat.completion.chunk`` event."""
    body = {
        "id": stream.completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": stream.model,
        "choices": choices,
        **extra,
    }
    return f"data: {json.dumps(body)}\n\n"


def _error(message: str, code: str) -> str:
    """OpenAI's in-stream error event (its clients raise ``APIError`` with the message)."""
    return f"data: {json.dumps({'error': {'message': message, 'type': code, 'code': code}})}\n\n"


class _AnswerTokens:
    """Picks the answer's tokens out of a job's events, and what of the answer is left to send.

    They are the ``llm_delta`` events from the job's orchestrator address once the job is
    aggregating: the aggregation, streamed when its text is the answer as it comes (agents'
    deltas come from their own names). Leading whitespace is held back until text comes,
    since a blank aggregation is replaced by the subtasks' outputs.
    """

    def __init__(self, job_id: str) -> None:
        self._source = orchestrator_address(job_id)
        self._aggregating = False
        self._held = ""
        self._sent: list[str] = []

    def take(self, event: JobEvent) -> list[str]:
        """The answer's text ``event`` brings, in pieces (none for any other event)."""
        self._aggregating = self._aggregating or event.type == "job_aggregating"
        if not self._aggregating or event.type != "llm_delta":
            return []
        if event.data.get("agent") != self._source:
            return []
        return [text for piece in _texts(event) if (text := self._shown(piece))]

    def rest(self, answer: str) -> str | None:
        """What of ``answer`` has not been sent; None if what was sent is not its start."""
        sent = "".join(self._sent)
        return answer[len(sent) :] if answer.startswith(sent) else None

    def _shown(self, piece: str) -> str:
        if not self._sent:
            self._held += piece
            if not self._held.strip():
                return ""
            piece, self._held = self._held, ""
        self._sent.append(piece)
        return piece


def _texts(event: JobEvent) -> Iterator[str]:
    """The text pieces of an ``llm_delta`` event (tool-call fragments carry none)."""
    deltas = event.data.get("deltas")
    for delta in deltas if isinstance(deltas, list) else ():
        text = delta.get("text") if isinstance(delta, dict) else None
        if isinstance(text, str) and text:
            yield text


AUTO: Final = "auto"
"""The model name that routes a chat among the skills and teams the key may run."""


def _target(model: str) -> tuple[str | None, str | None]:
    """(team, skill) that ``model`` names."""
    if model == AUTO:
        return None, None
    if model.startswith("skill:"):
        return None, model.removeprefix("skill:")
    return model, None


def _wants_json(response_format: dict[str, Any] | None) -> bool:
    return bool(response_format) and (response_format or {}).get("type") in {
        "json_object",
        "json_schema",
    }


def _content(result: JobResult, as_json: bool) -> str:
    """The message content: the answer, or (asked for JSON) the standard output envelope."""
    if as_json and result.output is not None:
        return result.output.model_dump_json()
    return result.answer


def _usage(result: JobResult) -> dict[str, int]:
    usage = result.usage
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def _task(
    messages: list[dict[str, Any]], *, in_session: bool = False
) -> tuple[str, list[Attachment]]:
    """The job's task and images from OpenAI-style messages.

    The last user message is the task; the other messages follow it as context (only the
    system and developer messages ``in_session``: the session holds the conversation).

    Raises:
        InvalidInput: no user message, or a message of a shape OpenAI does not define.
    """
    turns: list[tuple[str, str]] = []
    images: list[Attachment] = []
    for n, message in enumerate(messages):
        role = message.get("role")
        if not isinstance(role, str | None):  # a list or an object: no role, nor hashable
            raise InvalidInput(f"messages[{n}]: unknown role (a {type(role).__name__})")
        if role not in {"system", "developer", "user", "assistant", "tool"}:
            raise InvalidInput(f"messages[{n}]: unknown role {role!r}")
        text = _text(message.get("content"), n, images)
        turns.append((str(role), text))
    users = [i for i, (role, _) in enumerate(turns) if role == "user"]
    if not users:
        raise InvalidInput("messages: there is no user message to act on")
    last = users[-1]
    task = turns[last][1].strip() or ("See the attached image(s)." if images else "")
    if not task:
        raise InvalidInput(f"messages[{last}]: the last user message is empty")
    context = [
        f"{role}: {text}"
        for i, (role, text) in enumerate(turns)
        if i != last and text and not (in_session and role not in {"system", "developer"})
    ]
    if context:
        task += "\n\nConversation so far:\n" + "\n".join(context)
    return task, images


def _text(content: Any, n: int, images: list[Attachment]) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidInput(f"messages[{n}].content must be a string or a list of parts")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            images.append(_image(part.get("image_url"), n, len(images)))
        else:
            raise InvalidInput(f"messages[{n}]: unsupported content part {kind!r}")
    return "\n".join(texts)


def _image(spec: Any, n: int, index: int) -> Attachment:
    url = spec.get("url") if isinstance(spec, dict) else spec
    if not isinstance(url, str):
        raise InvalidInput(f"messages[{n}]: image_url needs a url")
    name = f"image-{index + 1}"
    found = _DATA_URL.match(url)
    try:
        if found is not None:
            data = found.group(2)
            base64.b64decode(data, validate=True)
            return Attachment(name=name, media_type=found.group(1), data_b64=data)
        return Attachment(name=name, media_type="image/png", url=url)
    except ValueError as exc:
        raise InvalidInput(f"messages[{n}]: unusable image: {exc}") from None
