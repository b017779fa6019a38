"""Failures of a call during a run: an envelope not delivered, a model or a tool that failed."""

from __future__ import annotations

from raytroupe.protocols.errors.base import ErrorCode, TroupeError

__all__ = [
    "AuthFailed",
    "BadRequest",
    "ContentFiltered",
    "ContextTooLong",
    "DeadlineExceeded",
    "DeliveryError",
    "HopLimitExceeded",
    "InvalidArguments",
    "ModelError",
    "ModelTimeout",
    "Overloaded",
    "ProviderUnavailable",
    "RateLimited",
    "RecipientUnavailable",
    "SandboxUnavailable",
    "ScriptError",
    "StreamInterrupted",
    "ToolError",
    "ToolInfrastructureError",
    "ToolNotAllowed",
    "UnknownRecipient",
]


class DeliveryError(TroupeError):
    """The router could not deliver an envelope; it is in the dead-letter queue."""

    code = ErrorCode.DELIVERY


class UnknownRecipient(DeliveryError):
    """No registered actor answers to the recipient address."""

    code = ErrorCode.UNKNOWN_RECIPIENT


class RecipientUnavailable(DeliveryError):
    """The recipient actor died or is restarting."""

    code = ErrorCode.RECIPIENT_UNAVAILABLE
    retryable = True


class DeadlineExceeded(DeliveryError):
    """The envelope's deadline passed before it was delivered or answered."""

    code = ErrorCode.DEADLINE_EXCEEDED
    retryable = True


class HopLimitExceeded(DeliveryError):
    """The envelope was routed more times than the hop limit allows (a loop)."""

    code = ErrorCode.HOP_LIMIT


class ModelError(TroupeError):
    """A model provider failed or answered with something unusable."""

    code = ErrorCode.MODEL


class RateLimited(ModelError):
    """The provider answered 429; ``detail['retry_after_s']`` is its requested wait, if any."""

    code = ErrorCode.RATE_LIMITED
    retryable = True


class ModelTimeout(ModelError):
    """The model call did not finish within its timeout."""

    code = ErrorCode.MODEL_TIMEOUT
    retryable = True


class Overloaded(ModelError):
    """The provider sheds load (Anthropic 529, or 503)."""

    code = ErrorCode.OVERLOADED
    retryable = True


class ProviderUnavailable(ModelError):
    """A 5xx answer, or no connection to the provider at all."""

    code = ErrorCode.PROVIDER_UNAVAILABLE
    retryable = True


class StreamInterrupted(ModelError):
    """A stream broke, or ended without a finish reason, before the answer was complete."""

    code = ErrorCode.STREAM_INTERRUPTED
    retryable = True


class ContextTooLong(ModelError):
    """The prompt does not fit the model's context window (a fallback with more may)."""

    code = ErrorCode.CONTEXT_TOO_LONG


class AuthFailed(ModelError):
    """The provider refused the key (401/403), or no key is configured."""

    code = ErrorCode.AUTH


class BadRequest(ModelError):
    """The provider refused the request as malformed (400/404/422)."""

    code = ErrorCode.BAD_REQUEST


class ContentFiltered(ModelError):
    """The provider's safety filter blocked the request or the answer."""

    code = ErrorCode.CONTENT_FILTERED


class ScriptError(ModelError):
    """A scripted provider ran out of turns, or was closed with turns left unused."""

    code = ErrorCode.SCRIPT


class ToolError(TroupeError):
    """A tool call failed: unknown tool, invalid arguments, or the tool raised."""

    code = ErrorCode.TOOL


class ToolNotAllowed(ToolError):
    """The agent asked for a tool it was not given (whatever its model says)."""

    code = ErrorCode.TOOL_NOT_ALLOWED


class InvalidArguments(ToolError):
    """The arguments do not satisfy the tool's JSON Schema, even after safe coercion."""

    code = ErrorCode.INVALID_ARGUMENTS


class SandboxUnavailable(ToolError):
    """Untrusted code was refused: this host cannot isolate it (no namespaces, no setuid)."""

    code = ErrorCode.SANDBOX_UNAVAILABLE


class ToolInfrastructureError(ToolError):
    """The tool could not run because its host failed it, not by any fault of its own.

    Its scratch directory could not be made, or is not safe to use (another user's, a symlink,
    writable by others). Nothing the model can correct: it is never shown to the model; the
    agent's subtask fails with it, and so does the job, until the operator acts.
    """

    code = ErrorCode.TOOL_INFRASTRUCTURE
