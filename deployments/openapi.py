"""The API's OpenAPI document, as faithful as the gate in front of it.

FastAPI writes the routes, bodies and answers; this adds what the gate does around them:
the API-key security schemes on every path the gate keeps behind a key (not on its
:data:`~raytroupe.deployments.guard.OPEN_PATHS`), the problem answers every operation can
give, each with the :class:`~raytroupe.protocols.http.Problem` schema
(``application/problem+json``, in place of FastAPI's own validation error), and readable,
unique operation ids (the handlers' names), so that generated clients read well and work.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI
from fastapi.routing import APIRoute

from raytroupe.deployments.guard import OPEN_PATHS
from raytroupe.deployments.problems import PROBLEM_TYPE
from raytroupe.protocols.http import Problem

__all__ = ["DOCUMENT_MARK", "DocumentedAPI", "describe", "operation_id"]

DOCUMENT_MARK: Final = "x-raytroupe-document"
"""Marks a body schema written inline by ``body_of``, to be moved to the components."""

_RENAMED: Final = {
    "models": "list_models",
    "model": "get_model",
    "chat": "create_chat_completion",
}
"""Operation ids of handlers whose names say less than OpenAI's names for them."""

_SCHEMES: Final = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `Authorization: Bearer <key>`.",
    },
    "apiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "The same key, in `X-API-Key`.",
    },
}
_KEYED: Final[tuple[dict[str, list[str]], ...]] = (
    {"bearer": []},
    {"apiKey": []},
)
"""Either scheme will do (OpenAPI reads a list of requirements as alternatives)."""

_WHY: Final = {
    400: "A malformed request (an X-Request-ID that is not 1 to 128 safe characters).",
    401: "No valid API key.",
    403: "The key may not do this: its tenant's policy refuses a field, or an admin key is needed.",
    404: "Nothing of that name or id, or not the key's tenant's.",
    409: "The change conflicts with what exists (or the job has finished).",
    413: "The body is over the size limit.",
    422: "The request does not match the schema, or cannot be used as it is.",
    429: "Over the key's rate limit, or the tenant has as much work waiting as it may: "
    "Retry-After says when to come back.",
    500: "The server failed: the request id finds the details in its logs.",
    503: "A system actor or the state store is not answering: try again.",
}
_KEYED_ERRORS: Final = tuple(_WHY)
_OPEN_ERRORS: Final = (400, 500)
_PROBLEM_REF: Final = {"$ref": "#/components/schemas/Problem"}
_FASTAPI_ERRORS: Final = ("HTTPValidationError", "ValidationError")


def operation_id(route: APIRoute) -> str:
    """A route's operation id: its handler's name (``submit_job``, ``list_teams``)."""
    return _RENAMED.get(route.name, route.name)


class DocumentedAPI(FastAPI):
    """FastAPI, whose OpenAPI document is :func:`describe`'s (made once, then kept)."""

    def __init__(self, *, anonymous: bool, **settings: Any) -> None:
        super().__init__(
            generate_unique_id_function=operation_id,
            # one schema per model: generators name models after schemas, and "TeamSpec-Input"
            # beside "TeamSpec-Output" would be two models of one name
            separate_input_output_schemas=False,
            **settings,
        )
        self._anonymous = anonymous

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document, with the gate's security and problem answers."""
        if self.openapi_schema is None:
            self.openapi_schema = describe(super().openapi(), anonymous=self._anonymous)
        return self.openapi_schema


def describe(document: dict[str, Any], *, anonymous: bool = False) -> dict[str, Any]:
    """``document`` with security, problem answers and checked operation ids (in place).

    ``anonymous``: the gate lets requests without a key through (as an anonymous tenant),
    so a key is optional.

    Raises:
        ValueError: two operations share an id.
    """
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    components["securitySchemes"] = _SCHEMES
    seen: set[str] = set()
    for path, operations in document.get("paths", {}).items():
        keyed = path not in OPEN_PATHS
        for operation in operations.values():
            _unique(operation["operationId"], seen)
            if keyed:
                operation["security"] = [*_KEYED, {}] if anonymous else list(_KEYED)
            _problems(operation["responses"], _KEYED_ERRORS if keyed else _OPEN_ERRORS)
            _hoist_document(operation, schemas)
    for name in _FASTAPI_ERRORS:
        schemas.pop(name, None)
    return document


def _hoist_document(operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    """A document body (``raytroupe.deployments.documents.body_of``) as a reference to its schema.

    The body's schema is moved to the document's components and referred to from there.
    """
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    schema = content.get("schema", {})
    if not schema.pop(DOCUMENT_MARK, False):
        return
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    schemas.setdefault(schema["title"], schema)
    content["schema"] = {"$ref": f"#/components/schemas/{schema['title']}"}


def _unique(operation: str, seen: set[str]) -> None:
    if operation in seen:
        raise ValueError(f"two operations of the API have the id {operation!r}")
    seen.add(operation)


def _problems(responses: dict[str, Any], statuses: tuple[int, ...]) -> None:
    """Declare each error status as a problem answer (FastAPI's own 422 included)."""
    for status in statuses:
        declared = responses.setdefault(str(status), {})
        if declared.get("description") in {None, "", "Validation Error"}:
            declared["description"] = _WHY[status]
        declared["content"] = {PROBLEM_TYPE: {"schema": _PROBLEM_REF}}
