"""The one error hierarchy of raytroupe.

Every error the project raises derives from :class:`TroupeError` and carries a typed
:class:`ErrorCode`, a ``retryable`` flag and keyword ``detail``. A caller's mistake (bad
bytes, bad config, bad address) is a different branch from a failure during a run::

    TroupeError
    ├── InvalidInput                  the caller sent something unusable
    │   ├── MalformedEnvelope         envelope bytes that do not decode to an AgentMessage
    │   ├── UnsupportedSchemaVersion  envelope bytes from another protocol version
    │   └── ConfigError               a team, agent or model configuration that cannot work
    ├── DeliveryError                 the router could not deliver an envelope
    │   ├── UnknownRecipient
    │   ├── RecipientUnavailable      the recipient actor died or is restarting (retryable)
    │   ├── DeadlineExceeded          (retryable)
    │   └── HopLimitExceeded
    ├── ModelError                    a model provider failed or answered unusably
    │   └── ScriptError               a scripted provider was misused (turns missing or left over)
    ├── ToolError                     a tool call failed (bad arguments, the tool raised)
    ├── PlanError                     a planner's output is not a valid plan
    └── JobError
        ├── JobFailed                 the job ended without an answer; ``result`` holds what ran
        ├── JobTimeout                waiting for the job took longer than asked (retryable)
        └── JobNotFound

Errors cross process boundaries (Ray pickles them), so they rebuild from
``(message, detail)`` and keep their class.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

__all__ = [
    "ConfigError",
    "DeadlineExceeded",
    "DeliveryError",
    "ErrorCode",
    "HopLimitExceeded",
    "InvalidInput",
    "JobError",
    "JobFailed",
    "JobNotFound",
    "JobTimeout",
    "MalformedEnvelope",
    "ModelError",
    "PlanError",
    "RecipientUnavailable",
    "ScriptError",
    "ToolError",
    "TroupeError",
    "UnknownRecipient",
    "UnsupportedSchemaVersion",
    "error_class",
]


class ErrorCode(StrEnum):
    """Machine-readable error codes, shared by exceptions and ``ErrorPayload``."""

    INTERNAL = "internal"
    INVALID_INPUT = "invalid_input"
    MALFORMED_ENVELOPE = "malformed_envelope"
    UNSUPPORTED_VERSION = "unsupported_version"
    CONFIG = "config"
    DELIVERY = "delivery"
    UNKNOWN_RECIPIENT = "unknown_recipient"
    RECIPIENT_UNAVAILABLE = "recipient_unavailable"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    HOP_LIMIT = "hop_limit"
    MODEL = "model"
    SCRIPT = "script"
    TOOL = "tool"
    PLAN = "plan"
    MAX_TURNS = "max_turns"
    JOB = "job"
    JOB_FAILED = "job_failed"
    JOB_TIMEOUT = "job_timeout"
    JOB_NOT_FOUND = "job_not_found"


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


class InvalidInput(TroupeError):
    """The caller sent something that cannot be used as it is."""

    code = ErrorCode.INVALID_INPUT


class MalformedEnvelope(InvalidInput):
    """Bytes that do not decode to a valid ``AgentMessage``."""

    code = ErrorCode.MALFORMED_ENVELOPE


class UnsupportedSchemaVersion(InvalidInput):
    """Envelope bytes written by a protocol version this build does not read."""

    code = ErrorCode.UNSUPPORTED_VERSION


class ConfigError(InvalidInput):
    """A configuration (team, agent, model, runtime) that cannot work."""

    code = ErrorCode.CONFIG


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


class ScriptError(ModelError):
    """A scripted provider ran out of turns, or was closed with turns left unused."""

    code = ErrorCode.SCRIPT


class ToolError(TroupeError):
    """A tool call failed: unknown tool, invalid arguments, or the tool raised."""

    code = ErrorCode.TOOL


class PlanError(TroupeError):
    """A planner's output is not a valid plan (bad JSON, cycles, unknown roles)."""

    code = ErrorCode.PLAN


class JobError(TroupeError):
    """Base of job-level errors seen by drivers."""

    code = ErrorCode.JOB


class JobFailed(JobError):
    """The job ended without an answer; ``detail['result']`` holds the ``JobResult``."""

    code = ErrorCode.JOB_FAILED


class JobTimeout(JobError):
    """The job did not finish within the time the caller was willing to wait."""

    code = ErrorCode.JOB_TIMEOUT
    retryable = True


class JobNotFound(JobError):
    """No job with that id is known to the orchestrator."""

    code = ErrorCode.JOB_NOT_FOUND


_BY_CODE: dict[ErrorCode, type[TroupeError]] = {}


def _index(cls: type[TroupeError]) -> None:
    _BY_CODE.setdefault(cls.code, cls)
    for sub in cls.__subclasses__():
        _index(sub)


_index(TroupeError)


def error_class(code: ErrorCode) -> type[TroupeError]:
    """The exception class that stands for ``code`` (``TroupeError`` for codes without one)."""
    return _BY_CODE.get(code, TroupeError)
