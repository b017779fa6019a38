"""Request bodies that are documents, checked off the event loop in the caller's share.

FastAPI validates a body on the event loop that serves every request of the replica. A
team, a graph, an eval suite or a skill carries schemas and patterns whose checking cost
its sender chooses, so these bodies are read whole and validated on the replica's
:class:`~raytroupe.actors.offload.Offload` pool instead: within the caller's tenant's share (a
flood waits for itself, then is refused 429 busy) and within ``APIConfig.request_work_s``
(past it, 422 work_limit). A body that is not the model is the same 422 ``invalid_request``
FastAPI gives, with each problem located under ``body``.

Routes take ``body: Annotated[Model, document(Model)]`` and ``openapi_extra=body_of(Model)``
(the OpenAPI document still names the body's schema; see :mod:`raytroupe.deployments.openapi`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

import pydantic_core
from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from raytroupe.actors.spawn import Offload
from raytroupe.deployments.guard import principal_of
from raytroupe.deployments.openapi import DOCUMENT_MARK

__all__ = ["LIMIT", "body_of", "checked", "document"]

M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")
T = TypeVar("T")

LIMIT = "request_work_s"
"""The name refusals give the per-request limit (``APIConfig.request_work_s``)."""


async def checked(request: Request, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` off the loop, in the caller's share, within the request's time.

    Raises:
        Busy: the caller's tenant has its share in hand and its queue full.
        WorkLimitExceeded: it ran past ``request_work_s``.
    """
    offload: Offload = request.app.state.offload
    seconds: float = request.app.state.request_work_s
    tenant = principal_of(request.scope).tenant
    return await offload.run(tenant, seconds, LIMIT, fn, *args, **kwargs)


def _validated(model: type[M], raw: bytes) -> M:
    # parsed first, then validated as Python data: pydantic's JSON mode validates every item
    # of a list before it looks at the list's length (20,000 agents: 57 ms against 10 ms)
    try:
        data = pydantic_core.from_json(raw)  # nesting past 200, bad UTF-8, huge numbers refused
    except ValueError as e:
        problem = {"type": "json_invalid", "loc": ("body",), "msg": f"JSON decode error: {e}"}
        raise RequestValidationError([problem]) from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors(include_url=False, include_input=False, include_context=False)
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in errors]
        ) from None


def document(model: type[M], readers: Mapping[str, Callable[[bytes], M]] | None = None) -> Any:
    """The dependency that reads a ``model`` body and checks it (see the module).

    ``readers``: by content type (``application/yaml``), how a body of another form than
    JSON is read into a ``model`` (a skill sent as its file); their problems are theirs.
    """

    async def read(request: Request) -> M:
        raw = await request.body()
        kind = request.headers.get("content-type", "application/json").split(";")[0]
        reader = (readers or {}).get(kind.strip().lower())
        if reader is not None:
            return await checked(request, reader, raw)
        return await checked(request, _validated, model, raw)

    read.__name__ = f"read_{model.__name__}"
    return Depends(read)


def body_of(model: type[BaseModel], kinds: Iterable[str] = ()) -> dict[str, Any]:
    """The ``openapi_extra`` naming ``model`` as a route's JSON body (or text of ``kinds``)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema[DOCUMENT_MARK] = True
    content: dict[str, Any] = {"application/json": {"schema": schema}}
    content.update({kind: {"schema": {"type": "string"}} for kind in kinds})
    return {"requestBody": {"required": True, "content": content}}
