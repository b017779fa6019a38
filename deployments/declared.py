"""The HTTP routes of the declared operations, made from their declarations.

Each :class:`~raytroupe.runtime.operations.Operation` becomes one route by the rule its
clients follow (:mod:`raytroupe.runtime.operations.declare`): ``{names}`` of the path are
path parameters, the other parameters the query of a GET or DELETE, else the JSON body (the
model itself when it is the only parameter there, else an object of them). They are checked
against the declaration's types before anything runs (a 422 problem); a body is checked as a
document is (:mod:`raytroupe.deployments.documents`: off the event loop, in the caller's share
and time). An admin operation answers 403 to another key, as every admin route does.

A streamed operation's route answers Server-Sent Events: its errors before the stream begins
(no such job) are problems as any route's; one after is an ``event: error`` message.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Iterable
from typing import Annotated, Any, Final

import structlog
from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, create_model

from raytroupe.deployments.access import Admin, Caller
from raytroupe.deployments.documents import body_of, document
from raytroupe.deployments.guard import Principal, request_id_of
from raytroupe.protocols import Conflict, TroupeError
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.http_calls import EVENT_STREAM
from raytroupe.runtime.operations import At, Operation
from raytroupe.runtime.operations.declare import Arguments, Stream, field_of

__all__ = ["at_of", "declared_routes"]

log = structlog.get_logger("raytroupe.api")

_KEPT_IDS: Final = {
    "teams": "list_teams",
    "team": "get_team",
    "agents": "list_agents",
    "skill": "get_skill",
    "evals": "list_evals",
    "eval_run": "get_eval",
    "experiments": "list_experiments",
    "experiment": "get_experiment",
    "policy": "get_my_policy",
    "policies": "list_policies",
    "knowledge_bases": "list_knowledge_bases",
    "ingest": "ingest_documents",
    "documents": "list_documents",
    "search": "search_knowledge_base",
    "drop_knowledge_base": "delete_knowledge_base",
    "cancel": "cancel_job",
    "feedback": "give_feedback",
    "feedbacks": "list_feedback",
    "checkpoints": "list_checkpoints",
    "resume": "resume_job",
    "interrupts": "list_interrupts",
    "approvals": "list_approvals",
    "fork": "fork_job",
    "summaries": "list_job_summaries",
    "summary": "get_job_summary",
    "trace": "get_job_trace",
    "daily_usage": "get_daily_usage",
    "me": "get_me",
    "sessions": "list_sessions",
    "session": "get_session",
    "skills": "list_skills",
    "lessons": "list_skill_lessons",
    "delete_lesson": "delete_skill_lesson",
    "usage": "get_usage",
    "dead_letters": "list_dead_letters",
    "job": "get_job",
    "statuses": "list_jobs",
    "apply_team": "put_team",
    "apply_agent": "put_agent",
    "apply_skill": "put_skill",
    "submit": "submit_job",
    "events": "stream_job_events",
}
"""The OpenAPI operation ids the routes had before they were declared (generated clients name
their functions by them); every other declared route's id is its operation's name."""


_PLACE: Final = re.compile(r"[0-9]{1,18}")
"""A place in a stream as ``Last-Event-ID`` says it (it fits an int64)."""

_KEPT_BODIES: Final = {"submit": "JobRequest", "create_session": "SessionCreate"}
"""The names the OpenAPI document gave the bodies before their operations were declared
(generated clients name their body models by them)."""


def at_of(who: Principal, system: SystemClient, request: Request | None = None) -> At:
    """Who a request's operation runs for: its key's tenant, an admin's or not.

    ``request``: its id and ``traceparent`` header go with the operation.
    """
    return At(
        system, tenant=who.tenant, admin=who.admin, source=f"api:{who.name}",
        request_id=None if request is None else request_id_of(request.scope),
        traceparent=None if request is None else request.headers.get("traceparent"),
    )  # fmt: skip


def declared_routes(ops: Iterable[Operation[..., Any]], system: SystemClient) -> APIRouter:
    """A route for each of ``ops``."""
    router = APIRouter()
    for op in sorted(ops, key=_specific_first):
        body, alone = _body_of(op)
        shape: Arguments  # add_api_route's keyword arguments
        if op.stream is not None:
            shape = {"response_model": None, "response_class": StreamingResponse,
                     "responses": _streamed(op, op.stream)}  # fmt: skip
        elif op.answer is type(None):
            shape = {"response_model": None, "status_code": 204, "response_class": Response}
        else:
            shape = {"response_model": op.answer, "status_code": op.status}
        router.add_api_route(
            op.route_path,
            _endpoint(op, system, body, alone=alone),
            methods=[op.method],
            **shape,
            name=op.name,
            operation_id=_KEPT_IDS.get(op.name, op.name),
            openapi_extra=None if body is None else body_of(body, op.readers),
            summary=op.doc.partition("\n")[0],
            description=op.doc,
            tags=[op.tag],
        )
    return router


def _streamed(op: Operation[..., Any], stream: Stream) -> dict[int | str, Any]:
    """The OpenAPI answer of a streamed operation: its Server-Sent Events."""
    item = op.item.__name__
    said = (
        f"Server-Sent Events: `id` is the {item}'s {stream.id}, `event` its {stream.event}, "
        f"`data` the {item} as JSON; `event: error` (data: code and detail) if the stream "
        "fails after it began."
    )
    return {200: {"description": said, "content": {EVENT_STREAM: {"schema": {"type": "string"}}}}}


async def _server_sent(
    items: AsyncIterator[BaseModel | None], stream: Stream
) -> AsyncIterator[str]:
    """``items`` as Server-Sent Events (a None: a comment, that the stream is still there)."""
    try:
        async for item in items:
            if item is None:
                yield ": waiting\n\n"
                continue
            place, kind = getattr(item, stream.id), getattr(item, stream.event)
            yield f"id: {place}\nevent: {kind}\ndata: {item.model_dump_json()}\n\n"
    except TroupeError as exc:  # the stream has begun: said in-band, and it ends
        data = json.dumps({"code": exc.code.value, "detail": exc.message})
        yield f"event: error\ndata: {data}\n\n"


def _resumed(last_event_id: str | None, default: Any) -> Any:
    """Where a stream resumes: after the ``Last-Event-ID`` a reconnecting reader sent.

    A header that is no place (not up to 18 ASCII digits: ``²``, a 5,000-digit number) is
    none: the stream starts where it would without one.
    """
    said = (last_event_id or "").strip()
    return int(said) if _PLACE.fullmatch(said) else default


def _specific_first(op: Operation[..., Any]) -> tuple[int, ...]:
    """A route's place: a literal segment before a ``{name}`` at the same depth.

    ``GET /v1/jobs/summaries`` must be tried before ``GET /v1/jobs/{job_id}``, which would
    take ``summaries`` for a job id.
    """
    return tuple(part.startswith("{") for part in op.path.split("/"))


def _body_of(op: Operation[..., Any]) -> tuple[type[BaseModel] | None, bool]:
    """The model of the JSON body, and whether it is the one model parameter itself."""
    names = op.body_names()
    if not names:
        return None, False
    alone = op.body_model()
    if alone is not None:
        return alone, True
    fields: Arguments = {}  # create_model's: name -> (type, default)
    for name in names:
        default = op.signature.parameters[name].default
        given = ... if default is inspect.Parameter.empty else default
        fields[name] = (op.hints[name], Field(given, alias=op.wire_name(name)))
    title = _KEPT_BODIES.get(op.name) or (
        "".join(part.capitalize() for part in op.name.split("_")) + "Request"
    )
    return create_model(
        title, __config__=ConfigDict(extra="forbid"), __module__=__name__, **fields
    ), False


def _endpoint(
    op: Operation[..., Any], system: SystemClient, body: type[BaseModel] | None, *, alone: bool
) -> Any:
    """The route's function: its parameters as FastAPI reads them, the operation its body.

    ``body`` is the model of its JSON body, if it has one; ``alone``: the operation's one model
    parameter itself, else an object of its parameters.
    """
    params = [
        inspect.Parameter(
            "who", inspect.Parameter.KEYWORD_ONLY, annotation=Admin if op.admin else Caller
        ),
        inspect.Parameter("response", inspect.Parameter.KEYWORD_ONLY, annotation=Response),
        inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request),
    ]
    for name, param in op.signature.parameters.items():
        tp = op.hints[name]
        if name in op.path_names:
            params.append(inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[tp, Path()]
            ))  # fmt: skip
        elif op.stream is not None and name == op.stream.resume:  # or Last-Event-ID says it
            params.append(inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=None,
                annotation=Annotated[tp | None, Query(description=(
                    f"Resume after this {op.stream.id} (else after Last-Event-ID's)."
                ))],
            ))  # fmt: skip
        elif name not in op.body_names():
            params.append(inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[tp, Query()],
                default=param.default,
            ))  # fmt: skip
    params.extend(
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[str, Path()])
        for n in op.path_fields  # a body field the URL says too (``{team.name}``)
    )
    if body is not None:
        params.append(inspect.Parameter(
            "body_", inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[body, document(body, op.readers)]
        ))  # fmt: skip
    if op.stream is not None:
        params.append(inspect.Parameter(
            "last_event_id", inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[str | None, Header(description=(
                f"The {op.stream.id} of the last event a reconnecting reader had."
            ))], default=None,
        ))  # fmt: skip

    async def endpoint(
        who: Principal,
        response: Response,
        request: Request,
        body_: BaseModel | None = None,
        last_event_id: str | None = None,
        **values: Any,
    ) -> Any:
        in_url = {n: values.pop(n) for n in op.path_fields}
        if op.stream is not None and values[op.stream.resume] is None:
            default = op.signature.parameters[op.stream.resume].default
            values[op.stream.resume] = _resumed(last_event_id, default)
        arguments = dict(values)
        if body_ is not None:
            if alone:
                arguments[op.body_names()[0]] = body_
            else:
                arguments.update({name: getattr(body_, name) for name in op.body_names()})
        for route_name, (param, field) in op.path_fields.items():
            said = field_of(arguments[param], field)
            if said != in_url[route_name]:
                raise Conflict(
                    f"the body's {param} is {said!r}, the URL's {in_url[route_name]!r}",
                    field=f"{param}.{field}",
                )
        at = at_of(who, system, request)
        answer = await op.invoke(at, arguments)
        if op.stream is not None:  # opened: a missing job was a 404 above, not a broken stream
            return StreamingResponse(
                _server_sent(answer, op.stream), media_type=EVENT_STREAM,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )  # fmt: skip
        if at.reply.created is False and op.status == 201:  # noqa: PLR2004 - made, or there
            response.status_code = 200
        if op.method != "GET":  # a change: who made it, as every change is logged
            said = {n: v for n, v in values.items() if isinstance(v, str | int | float | bool)}
            log.info(op.name, key=who.name, tenant=who.tenant, arguments=said)
        if op.location is not None:
            response.headers["Location"] = op.location(answer)
        return Response(status_code=204) if answer is None else answer

    endpoint.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    endpoint.__name__ = op.name
    endpoint.__doc__ = op.doc
    return endpoint
