"""A call to the HTTP API as data, for the clients of :mod:`raytroupe.runtime.http_client`.

A :class:`Call` is a request (method, path, query, body) and how its answer is read;
a declared operation makes one from its arguments (``Operation.call``), as
:mod:`raytroupe.runtime.http_routes` does for the few calls that are no operation; the clients
only send them, so the two clients cannot differ in what they ask. Also here: checking the
base URL and key, turning a problem answer into the
:class:`~raytroupe.protocols.errors.TroupeError` its code names, and reading job events from
Server-Sent Events.

Nothing here does I/O; nothing imports Ray, FastAPI or the deployments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from raytroupe.protocols import (
    BadResponse,
    Conflict,
    ErrorCode,
    Forbidden,
    InvalidInput,
    RateLimited,
    TroupeError,
    Unauthorized,
)
from raytroupe.protocols.errors import error_class
from raytroupe.protocols.http import Problem

__all__ = [
    "EVENT_STREAM",
    "Call",
    "base_url",
    "checked_key",
    "error_of",
    "json_body",
    "nothing",
    "read",
    "segment",
    "stream_error",
]

T = TypeVar("T")

EVENT_STREAM: Final = "text/event-stream"
_KEY: Final = re.compile(r"^[\x21-\x7e]{1,4096}$")
"""A key as a header carries it: visible ASCII, no spaces or line breaks."""
_BY_STATUS: Final[dict[int, type[TroupeError]]] = {
    401: Unauthorized,
    403: Forbidden,
    409: Conflict,
    429: RateLimited,
}
"""The error for a problem whose code the error tree has no class for (the gate's own codes:
``body_too_large``, ``invalid_request_id``, HTTP phrases such as ``not_found``)."""
_PROBLEM_EXTRAS: Final = ("problems", "fields", "field", "policy", "retry_after_s", "limit")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to the API, and how its answer is read."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, str | int | float] = field(default_factory=dict)
    body: Any = None
    content: bytes | None = None
    content_type: str | None = None
    answered: frozenset[int] = frozenset()
    """Error statuses whose body is still the route's answer (``/readyz``'s 503)."""

    def request(
        self, client: httpx.Client | httpx.AsyncClient, timeout: httpx.Timeout | None = None
    ) -> httpx.Request:
        """The request, built by ``client`` (its base URL, headers and default timeout)."""
        headers = {} if self.content_type is None else {"Content-Type": self.content_type}
        params = {k: _query_value(v) for k, v in self.params.items()}
        return client.build_request(
            self.method,
            self.path,
            params=params,
            content=self.content,
            json=None if self.content is not None else self.body,
            headers=headers,
            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
        )

    def answer(self, response: httpx.Response) -> T:
        """What the route answered, or the error its problem names.

        Raises:
            TroupeError: the subclass of the problem's code (``detail['status']``).
            BadResponse: the answer is not what the route documents.
        """
        status = response.status_code
        if 300 <= status < 400:  # noqa: PLR2004 - redirects are not followed, never with a key
            where = response.headers.get("location", "?")
            raise BadResponse(
                f"{self.method} {self.path} was redirected ({status}) to {where}: not followed "
                "(the key is sent only to the client's URL)",
                status=status,
            )
        if status >= 400 and status not in self.answered:  # noqa: PLR2004
            raise error_of(response)
        return self.read(response)


def _query_value(value: str | int | float) -> str | int | float:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


# --- checks of what the caller gives -------------------------------------------------------


def base_url(url: str) -> httpx.URL:
    """``url`` as the API's base: http(s), a host, no credentials, query or fragment.

    Raises:
        InvalidInput: anything else (the message never repeats credentials).
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("the API's URL is empty", field="url")
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError) as e:
        raise InvalidInput(f"the API's URL is not a URL: {e}", field="url") from None
    if parsed.userinfo:
        raise InvalidInput(
            "the API's URL holds credentials: pass the key as key=, never in the URL",
            field="url",
        )
    if parsed.scheme not in {"http", "https"} or not parsed.host:
        raise InvalidInput(
            f"the API's URL needs http:// or https:// and a host (got {url!r})", field="url"
        )
    if parsed.query or parsed.fragment:
        raise InvalidInput(f"the API's URL may not have a query or fragment: {url!r}", field="url")
    return parsed.copy_with(path=parsed.path.rstrip("/") or "/")


def checked_key(key: str | None) -> str | None:
    """``key``, if a header can carry it (visible ASCII, no spaces, at most 4096 characters).

    Raises:
        InvalidInput: it cannot (the message never repeats the key).
    """
    if key is None:
        return None
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InvalidInput(
            "the API key must be 1 to 4096 visible ASCII characters without spaces",
            field="key",
        )
    return key


def segment(value: str, what: str) -> str:
    """``value`` as one path segment (quoted: a '/' or '..' cannot reach another route).

    Raises:
        InvalidInput: empty, or '.' or '..'.
    """
    if not isinstance(value, str) or value in {"", ".", ".."}:
        raise InvalidInput(f"{what} {value!r} cannot name anything", field=what)
    return quote(value, safe="")


def json_body(value: Any, what: str) -> Any:
    """``value`` (models, mappings, lists) as JSON-ready data.

    Raises:
        InvalidInput: it holds something JSON cannot carry.
    """
    try:
        return to_jsonable_python(value, by_alias=True)
    except (PydanticSerializationError, TypeError, ValueError) as e:
        raise InvalidInput(f"{what} cannot be sent as JSON: {e}", field=what) from None


# --- answers -------------------------------------------------------------------------------

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: type[T]) -> TypeAdapter[T]:
    found = _ADAPTERS.get(tp)
    if found is None:
        found = _ADAPTERS[tp] = TypeAdapter(tp)
    return found


def read(tp: type[T]) -> Callable[[httpx.Response], T]:
    """A reader of answers that are a ``tp`` in JSON."""
    adapter = _adapter(tp)

    def reader(response: httpx.Response) -> T:
        try:
            return adapter.validate_json(response.content)
        except ValidationError as e:
            raise BadResponse(
                f"{response.request.method} {response.request.url.path} answered "
                f"{response.status_code} with a body that is not a {_name(tp)}: "
                f"{e.error_count()} problem(s), first {_first(e)}",
                status=response.status_code,
                request_id=response.headers.get("x-request-id"),
            ) from None

    return reader


def nothing(response: httpx.Response) -> None:
    """A reader of answers without a body (204)."""
    del response


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _first(error: ValidationError) -> str:
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"{where}: {first['msg']}"


def error_of(response: httpx.Response) -> TroupeError:
    """The error an error answer stands for: the class its problem's code names.

    It carries the problem's ``detail`` as message, and in ``detail`` the HTTP ``status``,
    the problem's ``code``, the ``request_id`` and what else the problem names (``problems``,
    ``field``, ``policy``, ``retry_after_s``, ``limit``). A body that is not a problem is a
    :class:`BadResponse`.
    """
    status = response.status_code
    request_id = response.headers.get("x-request-id")
    try:
        problem = Problem.model_validate_json(response.content)
    except ValidationError:
        return BadResponse(
            f"{response.request.method} {response.request.url.path} answered {status} "
            "without a problem document",
            status=status,
            request_id=request_id,
        )
    extras = {name: getattr(problem, name) for name in _PROBLEM_EXTRAS}
    detail = {name: value for name, value in extras.items() if value is not None}
    cls = _class_of(problem.code, status)
    return cls(
        problem.detail,
        status=status,
        code=problem.code,
        request_id=problem.request_id or request_id,
        **detail,
    )


def _class_of(code: str, status: int) -> type[TroupeError]:
    try:
        known = error_class(ErrorCode(code))
    except ValueError:
        known = TroupeError
    if known is not TroupeError:
        return known
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return InvalidInput if 400 <= status < 500 else TroupeError  # noqa: PLR2004


# --- streams ------------------------------------------------------------------------------


class _StreamError(BaseModel):
    code: str
    detail: str


def stream_error(data: str) -> TroupeError:
    """The error an ``event: error`` message of a stream says (its ``data``: code, detail)."""
    try:
        error = _StreamError.model_validate_json(data)
    except ValidationError:
        return BadResponse(f"the event stream failed with an unreadable error: {data[:200]!r}")
    return _class_of(error.code, 500)(error.detail, code=error.code)
