"""Translate exceptions of the ``openai`` and ``anthropic`` SDKs into typed model errors.

By HTTP status first, refined by the error body (code, type, message)::

    429                               RateLimited          retry_after_s from the headers
    529, 503, overloaded_error        Overloaded           retry_after_s if the server sent one
    other >= 500                      ProviderUnavailable
    408, APITimeoutError              ModelTimeout
    APIConnectionError                ProviderUnavailable
    401, 402, 403                     AuthFailed
    400/413/422 'context too long'    ContextTooLong
    400 'content filter'              ContentFiltered
    other 4xx                         BadRequest
    error events inside a stream      by their type; else StreamInterrupted
    raw transport or JSON faults      StreamInterrupted mid-stream (both SDKs leak some),
                                      else ProviderUnavailable

Messages and details never hold a key: every value passed as ``secrets`` is masked, and so
is anything shaped like an API key or bearer token. :func:`resolve_api_key` reads a key from
the environment variable a spec names, failing with a ``ConfigError`` that names only it.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import re
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

import anthropic
import anyio
import httpx2
import openai

from raytroupe.actors.outbound import OutboundRefused
from raytroupe.protocols.errors import (
    AuthFailed,
    BadRequest,
    ConfigError,
    ContentFiltered,
    ContextTooLong,
    ModelError,
    ModelTimeout,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    StreamInterrupted,
)

__all__ = [
    "STREAM_FAULTS",
    "map_sdk_error",
    "redact",
    "resolve_api_key",
    "retry_after_seconds",
    "safe_cause",
    "stream_broke",
]

STREAM_FAULTS: Final[tuple[type[BaseException], ...]] = (
    httpx2.RequestError,
    ssl.SSLError,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    json.JSONDecodeError,
    UnicodeDecodeError,
)
"""Raw exceptions an SDK lets escape while a stream is read: a dropped connection (anthropic
does not wrap httpx2's errors), or a malformed SSE data line (neither SDK wraps JSON errors)."""

_HTTP_BAD_REQUEST: Final = 400
_HTTP_SERVER_ERROR: Final = 500
_BY_STATUS: Final[dict[int, type[ModelError]]] = {
    401: AuthFailed,
    402: AuthFailed,  # payment required: the key's account cannot pay
    403: AuthFailed,
    408: ModelTimeout,
    429: RateLimited,
    503: Overloaded,
    529: Overloaded,
}
_TOO_LONG_STATUSES: Final = frozenset({400, 413, 422})

_TOO_LONG: Final = re.compile(
    r"context[_ ](?:length|window|size|limit)|prompt is too long|input is too long"
    r"|too many (?:input )?tokens|maximum context",
    re.IGNORECASE,
)
_FILTERED: Final = re.compile(
    r"content[_ ]?filter|content[_ ]policy|content management policy|safety system",
    re.IGNORECASE,
)
_KEY_SHAPED: Final = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,}"
)
_MASK: Final = "[redacted]"
_STATUS_ERRORS: Final = (openai.APIStatusError, anthropic.APIStatusError)

# Error types (Anthropic ``error.type``, OpenAI ``type``/``code``) -> class, for errors that
# carry no HTTP status of their own (an error event inside a 200 stream).
_BY_KIND: Final[dict[str, type[ModelError]]] = {
    "overloaded_error": Overloaded,
    "rate_limit_error": RateLimited,
    "rate_limit_exceeded": RateLimited,
    "api_error": ProviderUnavailable,
    "server_error": ProviderUnavailable,
    "timeout_error": ModelTimeout,
    "authentication_error": AuthFailed,
    "permission_error": AuthFailed,
    "billing_error": AuthFailed,
    "invalid_request_error": BadRequest,
    "not_found_error": BadRequest,
    "request_too_large": BadRequest,
}


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret, and anything shaped like a key or bearer token, masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, _MASK)
    return _KEY_SHAPED.sub(_MASK, text)


def safe_cause(exc: BaseException, secrets: Iterable[str] = ()) -> BaseException | None:
    """``exc`` to chain as a mapped error's cause, or None when its text would leak a secret."""
    text = str(exc)
    return exc if redact(text, secrets) == text else None


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a response asks for, in seconds, or None if it names none.

    Reads ``retry-after-ms`` first, then ``retry-after`` as seconds (fractions allowed, such
    as ``"0.5"``) or as an HTTP date, counted from ``now`` (epoch seconds; the current time
    by default). Never negative; unparseable or non-finite values are ignored.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        seconds = _number(lowered.get(name))
        if seconds is not None:
            return max(0.0, seconds / scale)
    value = lowered.get("retry-after")
    parsed = email.utils.parsedate_tz(value) if value else None
    if parsed is None:
        return None
    try:
        at = email.utils.mktime_tz(parsed)
    except (OverflowError, ValueError):
        return None
    return max(0.0, at - (time.time() if now is None else now))


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def stream_broke(exc: BaseException, *, provider: str) -> StreamInterrupted:
    """The error for a stream whose transport failed (``exc``) after it had started.

    A timeout or dropped connection mid-stream is a broken stream, not a failed call: the
    caller may already have shown part of the answer.
    """
    what = type(_transport_fault(exc)).__name__
    return StreamInterrupted(
        f"{provider}: the stream broke ({what})", provider=provider, cause=what
    )


def _transport_fault(exc: BaseException) -> BaseException:
    """The transport fault under ``exc``, whichever SDK version raised it.

    anthropic >= 2.17 wraps a fault mid-stream in its ``APIConnectionError`` (as openai
    does); earlier versions let the raw one out. The cause named is the fault's either way.
    """
    found: BaseException | None = exc
    while found is not None and not isinstance(found, STREAM_FAULTS):
        found = found.__cause__
    return found or exc


def map_sdk_error(  # noqa: PLR0911 - one return per kind of failure reads best
    exc: BaseException,
    *,
    provider: str,
    secrets: Iterable[str] = (),
    now: float | None = None,
    stream: bool = False,
) -> ModelError:
    """The typed error that stands for ``exc``, raised by an SDK call or a stream it read.

    ``provider`` goes into the message and ``detail['provider']``; ``secrets`` (API keys) are
    masked wherever they appear. A raw transport or JSON fault (:data:`STREAM_FAULTS`) is a
    ``StreamInterrupted`` when ``stream`` says it broke a stream already under way, else a
    ``ProviderUnavailable`` (an unreadable answer). A ``ModelError`` is returned as it is.
    """
    secrets = tuple(secrets)
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, openai.APIConnectionError | anthropic.APIConnectionError):
        if isinstance(exc, openai.APITimeoutError | anthropic.APITimeoutError):
            return ModelTimeout(f"{provider}: the call timed out", provider=provider)
        refused = _refusal(exc)
        if refused is not None:  # the network policy said no: trying again would too
            return ModelError(
                f"{provider}: {redact(refused, secrets)}", provider=provider, refused=True
            )
        return ProviderUnavailable(
            f"{provider}: no connection ({redact(exc.message, secrets)})", provider=provider
        )
    if isinstance(exc, openai.APIError | anthropic.APIError):
        return _from_api_error(exc, provider, secrets, now)
    if isinstance(exc, STREAM_FAULTS):
        return _raw_fault(exc, provider, stream=stream)
    what = type(exc).__name__
    return ModelError(f"{provider}: {what}: {redact(str(exc), secrets)}", provider=provider)


def _refusal(exc: BaseException) -> str | None:
    """The outbound policy's refusal behind a connection error, if that is what it was."""
    seen: BaseException | None = exc
    for _ in range(8):  # the SDK wraps httpx2's error, which wraps httpcore2's
        if seen is None:
            return None
        if isinstance(seen, OutboundRefused):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def _raw_fault(exc: BaseException, provider: str, *, stream: bool) -> ModelError:
    if stream:
        return stream_broke(exc, provider=provider)
    what = type(exc).__name__
    return ProviderUnavailable(
        f"{provider}: the answer could not be read ({what})", provider=provider, cause=what
    )


def _from_api_error(
    exc: openai.APIError | anthropic.APIError,
    provider: str,
    secrets: tuple[str, ...],
    now: float | None,
) -> ModelError:
    """An error the API answered: by HTTP status, or (inside a stream) by the body alone."""
    status = exc.status_code if isinstance(exc, _STATUS_ERRORS) else 0
    kind, text = _describe(exc)
    cls = _status_class(status, kind, text)
    detail: dict[str, Any] = {"provider": provider, **_kind(redact(kind, secrets))}
    if status >= _HTTP_BAD_REQUEST:
        detail["status_code"] = status
    if isinstance(exc, _STATUS_ERRORS):
        if exc.request_id:
            detail["request_id"] = redact(exc.request_id, secrets)
        if cls in (RateLimited, Overloaded):
            wait = retry_after_seconds(exc.response.headers, now=now)
            if wait is not None:
                detail["retry_after_s"] = wait
    label = f"HTTP {status}" if status >= _HTTP_BAD_REQUEST else "error"
    return cls(f"{provider}: {label}: {redact(text, secrets)}", **detail)


def _status_class(status: int, kind: str, text: str) -> type[ModelError]:
    if status < _HTTP_BAD_REQUEST:  # an error event inside a successful stream
        return _by_content(kind, text) or _BY_KIND.get(kind, StreamInterrupted)
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if kind == "overloaded_error":
        return Overloaded
    if status >= _HTTP_SERVER_ERROR:
        return ProviderUnavailable
    if status in _TOO_LONG_STATUSES:
        return _by_content(kind, text) or BadRequest
    return BadRequest


def _by_content(kind: str, text: str) -> type[ModelError] | None:
    if kind == "context_length_exceeded" or _TOO_LONG.search(text):
        return ContextTooLong
    if _FILTERED.search(kind) or _FILTERED.search(text):
        return ContentFiltered
    return None


def _describe(exc: openai.APIError | anthropic.APIError) -> tuple[str, str]:
    """(kind, message): the body's error code or type, and its human message."""
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    kind = ""
    text = exc.message
    if isinstance(body, Mapping):
        for key in ("code", "type"):
            value = body.get(key)
            if isinstance(value, str) and value and value != "error":
                kind = value
                break
        message = body.get("message")
        if isinstance(message, str) and message:
            text = message
    return kind, text


def _kind(kind: str) -> dict[str, str]:
    return {"provider_code": kind} if kind else {}


def resolve_api_key(env: str | None, *, provider: str, model: str, required: bool) -> str | None:
    """The key held by environment variable ``env``; None when ``env`` is None and not required.

    Raises:
        ConfigError: ``env`` is unset or empty (the message names the variable, never a
            value), or no variable is named although the endpoint needs a key.
    """
    if env is None:
        if required:
            raise ConfigError(
                f"{provider} model {model!r} needs api_key_env (the variable holding its key)",
                provider=provider,
            )
        return None
    key = os.environ.get(env, "").strip()
    if not key:
        raise ConfigError(
            f"environment variable {env} is not set; it should hold the API key for "
            f"{provider} model {model!r}",
            env=env,
            provider=provider,
        )
    return key
