"""What the two HTTP clients share: headers, timeouts, errors, and following a stream.

A streamed operation's answer (a job's events) is followed across reconnects (each resumes
after the last item seen: none twice) until its last item, a deadline, or ``RECONNECTS``
breaks in a row. This module imports httpx, pydantic and the protocols: no Ray, no server
code.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Final

import httpx
from httpx_sse import ServerSentEvent
from pydantic import BaseModel, ValidationError

from raytroupe.protocols import (
    BadResponse,
    InvalidInput,
    JobCancelled,
    JobFailed,
    JobResult,
    Unreachable,
)
from raytroupe.protocols.http import (
    JobView,
)
from raytroupe.runtime.http_calls import EVENT_STREAM, Call, stream_error

if TYPE_CHECKING:
    from raytroupe.runtime.operations.declare import Arguments, Operation, Stream

__all__ = [
    "QUIET_S",
    "RECONNECTS",
    "Follow",
    "checked_timeout",
    "headers_for",
    "op_timeout",
    "opened",
    "outcome",
    "unreachable",
    "user_agent",
]

QUIET_S: Final = 60.0
"""Longest silence on an event stream before it is taken as broken (the server sends a
keep-alive comment every 15 s)."""
RECONNECTS: Final = 5
"""Reconnects of an event stream in a row, without an event between them, before giving up."""


def user_agent() -> str:
    """What the clients say they are: ``raytroupe-client/<version>``."""
    from raytroupe import __version__  # noqa: PLC0415 - the package's root, loaded already

    return f"raytroupe-client/{__version__}"


def headers_for(key: str | None) -> dict[str, str]:
    """Every request's headers: JSON, the user agent, and the key as a bearer token."""
    headers = {"Accept": "application/json", "User-Agent": user_agent()}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def checked_timeout(timeout: float) -> float:
    """``timeout`` as seconds, if it is a positive finite number.

    Raises:
        InvalidInput: it is not.
    """
    if not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise InvalidInput(f"timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


def op_timeout(default: float, *, long_running: bool) -> httpx.Timeout | None:
    """The timeouts of a declared operation's call: no read timeout for one that runs long."""
    return httpx.Timeout(default, read=None) if long_running else None


def unreachable(url: httpx.URL, error: httpx.HTTPError) -> Unreachable:
    """The error of a request ``url`` that got no answer (without its query)."""
    where = str(url.copy_with(query=None))
    if isinstance(error, httpx.TimeoutException):
        return Unreachable(f"{where} did not answer in time ({type(error).__name__})", url=where)
    return Unreachable(f"cannot reach {where}: {type(error).__name__}: {error}", url=where)


def outcome(view: JobView) -> JobResult:
    """The result of a finished job, as :meth:`JobHandle.result` gives it.

    Raises:
        JobCancelled: it was cancelled (``detail['result']``).
        JobFailed: it ended without an answer (``detail['result']``).
        BadResponse: the job has no result yet.
    """
    result = view.result
    if result is None:
        raise BadResponse(f"job {view.id} ended but has no result ({view.status})")
    if result.status == "cancelled":
        raise JobCancelled(f"job {view.id} was cancelled", job_id=view.id, result=result)
    if result.status != "succeeded":
        message = result.error.message if result.error else "job failed"
        raise JobFailed(f"job {view.id} failed: {message}", job_id=view.id, result=result)
    return result


class Follow:
    """Where a streamed operation's answer is, across reconnects, and how long it may wait."""

    def __init__(
        self, op: Operation[..., Any], arguments: Arguments, timeout: float | None
    ) -> None:
        assert op.stream is not None  # noqa: S101 - only streams are followed
        self.op = op
        self.stream: Stream = op.stream
        self.arguments = dict(arguments)
        self._timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._broken = 0

    def call(self) -> Call[None]:
        """The request that opens the stream after the last item seen."""
        return self.op.call(**self.arguments)

    def read_timeout(self, default: float) -> httpx.Timeout:
        """The stream's timeouts: a read waits ``QUIET_S``, or until the deadline."""
        quiet = QUIET_S
        if self._deadline is not None:
            quiet = max(0.001, min(quiet, self._deadline - time.monotonic()))
        return httpx.Timeout(default, read=quiet)

    def item_of(self, sse: ServerSentEvent) -> BaseModel | None:
        """The item an SSE message carries (None: not one, such as a keep-alive comment).

        Raises:
            TroupeError: the stream's in-band error (what it reads failed mid-stream), as
                the class its code names.
            BadResponse: a message that is not an item of the stream.
        """
        if sse.event == "error":
            raise stream_error(sse.data)
        if not sse.data:
            return None
        try:
            return self.op.item.model_validate_json(sse.data)
        except ValidationError as e:
            where = ".".join(str(p) for p in e.errors()[0]["loc"])
            raise BadResponse(
                f"an item of the stream is not a {self.op.item.__name__}: {where}"
            ) from None

    def seen(self, item: BaseModel) -> bool:
        """``item`` arrived: the stream resumes after it, unbroken; True if it is the last."""
        self.arguments[self.stream.resume] = getattr(item, self.stream.id)
        self._broken = 0
        return bool(getattr(item, self.stream.last))

    def broke(self, url: httpx.URL, error: httpx.HTTPError | None) -> bool:
        """The stream stopped before its last item: whether to go on, or why not.

        A stream asked not to follow ends there (unless it broke).

        Raises:
            the stream's ``late`` error: the deadline has passed.
            Unreachable: it broke ``RECONNECTS`` times in a row.
        """
        if error is None and not self.arguments[self.stream.follow]:
            return False
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise self.stream.late(self.arguments, self._timeout or 0.0)
        self._broken += 1
        if self._broken > RECONNECTS:
            if error is None:
                raise Unreachable(
                    f"the stream of {self.op.method} {url.path} kept ending before its last item",
                    url=str(url),
                )
            raise unreachable(url, error) from error
        return True


def opened(call: Call[None], response: httpx.Response) -> None:
    """Raise the error an event stream's opening answer stands for, if it does."""
    call.answer(response)
    kind = response.headers.get("content-type", "")
    if not kind.startswith(EVENT_STREAM):
        raise BadResponse(
            f"GET {call.path} answered {kind or 'no content type'}, not an event stream",
            status=response.status_code,
        )
