"""The root of the hierarchy: the error codes, ``TroupeError``, and how errors cross processes.

An error pickles as its class, its message and its ``detail`` (:func:`_rebuild`), so it keeps
its class wherever Ray carries it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

__all__ = ["ErrorCode", "TroupeError"]


class ErrorCode(StrEnum):
    """Machine-readable error codes, shared by exceptions and ``ErrorPayload``."""

    INTERNAL = "internal"
    INVALID_INPUT = "invalid_input"
    MALFORMED_ENVELOPE = "malformed_envelope"
    UNSUPPORTED_VERSION = "unsupported_version"
    INVALID_ADDRESS = "invalid_address"
    CONFIG = "config"
    DELIVERY = "delivery"
    UNKNOWN_RECIPIENT = "unknown_recipient"
    RECIPIENT_UNAVAILABLE = "recipient_unavailable"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    HOP_LIMIT = "hop_limit"
    MODEL = "model"
    SCRIPT = "script"
    RATE_LIMITED = "rate_limited"
    MODEL_TIMEOUT = "model_timeout"
    OVERLOADED = "overloaded"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    STREAM_INTERRUPTED = "stream_interrupted"
    CONTEXT_TOO_LONG = "context_too_long"
    AUTH = "auth"
    BAD_REQUEST = "bad_request"
    CONTENT_FILTERED = "content_filtered"
    BUDGET_EXCEEDED = "budget_exceeded"
    GUARDRAIL = "guardrail"
    TOOL = "tool"
    TOOL_NOT_ALLOWED = "tool_not_allowed"
    INVALID_ARGUMENTS = "invalid_arguments"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    TOOL_INFRASTRUCTURE = "tool_infrastructure"
    PLAN = "plan"
    MAX_TURNS = "max_turns"
    REPEATED_TOOL_CALL = "repeated_tool_call"
    STAGNATION = "stagnation"
    JOB = "job"
    JOB_FAILED = "job_failed"
    QUALITY_GATE = "quality_gate"
    ITERATION_LIMIT = "iteration_limit"
    CANCELLED = "cancelled"
    JOB_TIMEOUT = "job_timeout"
    JOB_NOT_FOUND = "job_not_found"
    TEAM_NOT_FOUND = "team_not_found"
    SKILL_NOT_FOUND = "skill_not_found"
    AGENT_NOT_FOUND = "agent_not_found"
    EXPERIMENT_NOT_FOUND = "experiment_not_found"
    SESSION_NOT_FOUND = "session_not_found"
    KNOWLEDGE_NOT_FOUND = "knowledge_not_found"
    LESSON_NOT_FOUND = "lesson_not_found"
    WEBHOOK_NOT_FOUND = "webhook_not_found"
    SCHEDULE_NOT_FOUND = "schedule_not_found"
    GUARDRAIL_NOT_FOUND = "guardrail_not_found"
    SPEND_LIMIT_NOT_FOUND = "spend_limit_not_found"
    CONFLICT = "conflict"
    FORBIDDEN = "forbidden"
    QUOTA_EXCEEDED = "quota_exceeded"
    UNPRICED_MODEL = "unpriced_model"
    STATE_UNAVAILABLE = "state_unavailable"
    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    UNREACHABLE = "unreachable"
    BAD_RESPONSE = "bad_response"
    WORK_LIMIT = "work_limit"
    BUSY = "busy"


class TroupeError(Exception):
    """Base of every raytroupe error.

    ``detail`` holds keyword data for programs (never secrets); ``str(err)`` is for people.
    """

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, /, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail: dict[str, Any] = detail

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.detail))


def _rebuild(cls: type[TroupeError], message: str, detail: dict[str, Any]) -> TroupeError:
    return cls(message, **detail)
