"""An OpenAI-compatible face: ``model`` names a registered team, the chat is its task.

Any OpenAI client (``openai.OpenAI(base_url=".../v1", api_key=<raytroupe key>)``) can talk to
a team. The last user message is the task; earlier turns and system messages travel with it
as context; images in the messages are given to the job. Streaming sends the answer as
``chat.completion.chunk`` events once the job has one (SSE comments report progress while it
runs, which clients ignore), then ``[DONE]``.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from raytroupe.deployments.access import Caller, visible_teams
from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.guard import request_id_of
from raytroupe.deployments.problems import problem
from raytroupe.protocols import (
    Attachment,
    InvalidInput,
    JobFailed,
    JobResult,
    JobTimeout,
    TeamNotFound,
)
from raytroupe.protocols.sessions import checked_session_id
from raytroupe.runtime.client import SystemClient

__all__ = ["openai_routes"]

_CHUNK_CHARS: Final = 64
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
        names = [*await visible_teams(client, who, teams), *(f"skill:{s.name}" for s in skills)]
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
    )
    async def chat(
        body: ChatRequest,
        request: Request,
        who: Caller,
        x_session_id: Annotated[str | None, Header(max_length=128)] = None,
    ) -> dict[str, Any] | StreamingResponse | JSONResponse:
        """Run the chat's last user message as a job of the team named by ``model``.

        A field the team cannot honour (``tools``, ``n`` > 1, ``logprobs``, a non-text
        modality, an unknown ``response_format``) is a 400 naming it; nothing is started.

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
        job_id = await client.submit(
            task, team, tenant=who.tenant, attachments=tuple(attachments), admin=who.admin,
            skill=skill, session=session, by=who.name,
        )  # fmt: skip
        as_json = _wants_json(body.response_format)
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
                headers={"Cache-Control": "no-cache"},
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


async def _wait(client: SystemClient, config: APIConfig, job_id: str, tenant: str) -> JobResult:
    result = await client.wait(job_id, config.chat_timeout_s, tenant=tenant)
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
    job_id, tenant, completion_id, model = (
        stream.job_id,
        stream.tenant,
        stream.completion_id,
        stream.model,
    )
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    seen = 0
    deadline = time.monotonic() + config.chat_timeout_s
    while time.monotonic() < deadline:
        events = await client.events(job_id, seen, 15.0, tenant=tenant)
        for event in events:
            seen = event.seq
            if event.type in {"subtask_started", "subtask_finished", "plan_ready"}:
                yield f": {event.type} {event.subtask_id or ''}\n\n"
        if not events:
            yield ": waiting\n\n"
        if any(e.terminal for e in events):
            break
    try:
        result = _succeeded(await _wait(client, config, job_id, tenant))
    except (JobFailed, JobTimeout) as exc:  # headers are sent: report in the stream
        error = {"message": exc.message, "type": exc.code.value, "code": exc.code.value}
        yield f"data: {json.dumps({'error': error})}\n\n"
        return
    answer = _content(result, stream.as_json)
    for start in range(0, len(answer), _CHUNK_CHARS):
        yield chunk({"content": answer[start : start + _CHUNK_CHARS]})
    yield chunk({}, "stop")
    if stream.include_usage:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(result),
        }
        yield f"data: {json.dumps(body)}\n\n"
    yield "data: [DONE]\n\n"


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
