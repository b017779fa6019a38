"""Errors as RFC 9457 problem details: ``application/problem+json``, never a stack trace."""

from __future__ import annotations

import json
import math
from typing import Any, Final

from starlette.responses import JSONResponse

from raytroupe.protocols import ErrorCode, TroupeError

__all__ = ["PROBLEM_TYPE", "problem", "status_of", "troupe_problem"]

PROBLEM_TYPE: Final = "application/problem+json"

_STATUS: Final[dict[ErrorCode, int]] = {
    ErrorCode.INVALID_INPUT: 422,
    ErrorCode.INVALID_REQUEST: 422,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.MALFORMED_ENVELOPE: 400,
    ErrorCode.UNSUPPORTED_VERSION: 400,
    ErrorCode.CONFIG: 422,
    ErrorCode.TEAM_NOT_FOUND: 404,
    ErrorCode.SKILL_NOT_FOUND: 404,
    ErrorCode.AGENT_NOT_FOUND: 404,
    ErrorCode.EXPERIMENT_NOT_FOUND: 404,
    ErrorCode.JOB_NOT_FOUND: 404,
    ErrorCode.SESSION_NOT_FOUND: 404,
    ErrorCode.WEBHOOK_NOT_FOUND: 404,
    ErrorCode.GUARDRAIL_NOT_FOUND: 404,
    ErrorCode.SPEND_LIMIT_NOT_FOUND: 404,
    ErrorCode.SCHEDULE_NOT_FOUND: 404,
    ErrorCode.KNOWLEDGE_NOT_FOUND: 404,
    ErrorCode.LESSON_NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.BUDGET_EXCEEDED: 402,
    ErrorCode.PLAN: 422,
    ErrorCode.TOOL_NOT_ALLOWED: 403,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.GUARDRAIL: 422,
    ErrorCode.QUOTA_EXCEEDED: 403,
    ErrorCode.UNPRICED_MODEL: 402,
    ErrorCode.RECIPIENT_UNAVAILABLE: 503,
    ErrorCode.UNKNOWN_RECIPIENT: 503,
    ErrorCode.JOB_TIMEOUT: 504,
    ErrorCode.STATE_UNAVAILABLE: 503,
    ErrorCode.WORK_LIMIT: 422,
    ErrorCode.BUSY: 429,
    ErrorCode.BAD_RESPONSE: 502,  # a model's answer the request cannot pass on
}
_RETRYABLE_STATUS: Final = 503


def status_of(error: TroupeError) -> int:
    """The HTTP status that says what ``error`` means to a client."""
    if error.code in _STATUS:
        return _STATUS[error.code]
    return _RETRYABLE_STATUS if error.retryable else 500


class _ProblemResponse(JSONResponse):
    """A problem's JSON, written as ASCII, so that it always renders.

    A message quoting the caller's input may hold any text (a lone surrogate too): the
    answer to bad input must never turn into a 500 itself.
    """

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False).encode("ascii")


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    code: str,
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem-details response; ``code`` is raytroupe's machine-readable error code."""
    body: dict[str, Any] = {
        "type": f"https://raytroupe.dev/problems/{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
        # what OpenAI clients read (the SDKs show error.message): one body for both kinds
        "error": {"message": detail, "type": code, "code": code, "param": extra.get("field")},
    }
    if request_id is not None:
        body["request_id"] = request_id
    return _ProblemResponse(body, status_code=status, headers=headers, media_type=PROBLEM_TYPE)


def troupe_problem(error: TroupeError, request_id: str | None) -> JSONResponse:
    """The problem response for a raytroupe error (its message, code and retryability)."""
    status = status_of(error)
    extra: dict[str, Any] = {"retryable": error.retryable}
    for name in ("problems", "fields"):  # each problem, and the input fields they are about
        listed = error.detail.get(name)
        if isinstance(listed, list):
            extra[name] = [str(p) for p in listed]
    # what it refused, by which policy, limit or guardrail rule (never the text it matched)
    for name in ("field", "policy", "limit", "guardrail", "rule", "stage"):
        if isinstance(error.detail.get(name), str):
            extra[name] = error.detail[name]
    headers = None
    retry_after = error.detail.get("retry_after_s")
    if isinstance(retry_after, int | float) and not isinstance(retry_after, bool):
        extra["retry_after_s"] = max(1, math.ceil(retry_after))
        headers = {"Retry-After": str(extra["retry_after_s"])}
    return problem(
        status,
        type(error).__name__,
        error.message,
        code=error.code.value,
        request_id=request_id,
        headers=headers,
        **extra,
    )
