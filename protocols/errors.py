"""The one error hierarchy of raytroupe.

Every error the project raises derives from :class:`TroupeError` and carries a typed
:class:`ErrorCode`, a ``retryable`` flag and keyword ``detail``. A caller's mistake (bad
bytes, bad config, bad address) is a different branch from a failure during a run::

    TroupeError
    ├── InvalidInput                  the caller sent something unusable
    │   ├── MalformedEnvelope         envelope bytes that do not decode to an AgentMessage
    │   ├── UnsupportedSchemaVersion  envelope bytes from another protocol version
    │   ├── InvalidAddress            not NAME, role:NAME or topic:NAME
    │   ├── ConfigError               a team, agent or model configuration that cannot work
    │   │   ├── TeamNotFound          no team is registered under that name
    │   │   ├── SkillNotFound         no skill (or no such version) is registered under that name
    │   │   ├── AgentNotFound         no registered team has an agent of that name
    │   │   ├── SessionNotFound       the tenant has no session (conversation) of that id
    │   │   └── KnowledgeNotFound     the tenant has no such knowledge base or document
    │   ├── Conflict                  the change clashes with what exists (a name in use)
    │   ├── InvalidRequest            an HTTP request the API's schema refuses
    │   └── WorkLimitExceeded         checking the input took longer than its limit allows
    ├── DeliveryError                 the router could not deliver an envelope
    │   ├── UnknownRecipient
    │   ├── RecipientUnavailable      the recipient actor died or is restarting (retryable)
    │   ├── DeadlineExceeded          (retryable)
    │   └── HopLimitExceeded
    ├── ModelError                    a model provider failed or answered unusably
    │   ├── RateLimited               429; detail['retry_after_s'] if the provider said (retryable)
    │   ├── ModelTimeout              the call took longer than its timeout (retryable)
    │   ├── Overloaded                529 or 503: the provider sheds load (retryable)
    │   ├── ProviderUnavailable       5xx or no connection (retryable)
    │   ├── StreamInterrupted         a stream broke or ended without a finish (retryable)
    │   ├── ContextTooLong            the prompt does not fit the model's context window
    │   ├── AuthFailed                401/403: a missing, wrong or unauthorised key
    │   ├── BadRequest                the provider refused the request as malformed
    │   ├── ContentFiltered           the provider's safety filter blocked the answer
    │   └── ScriptError               a scripted provider was misused (turns missing or left over)
    ├── Forbidden                     the caller may not do this: its tenant's policy refuses a
    │   │                             field (``detail['field']``, ``detail['policy']``)
    │   └── QuotaExceeded             the tenant holds as much of something as it may
    ├── BudgetExceeded                a job's or tenant's token or money budget would be exceeded
    │   └── UnpricedModel             a USD budget applies and the model has no known price
    ├── ToolError                     a tool call failed (bad arguments, the tool raised)
    │   ├── ToolNotAllowed            the agent was not given that tool
    │   ├── InvalidArguments          arguments fail the tool's schema (the model can correct)
    │   ├── SandboxUnavailable        this host cannot isolate untrusted code (fails closed)
    │   └── ToolInfrastructureError   its host failed the tool (scratch directory): fails the job
    ├── StateUnavailable              the state store (PostgreSQL) cannot be reached (retryable)
    ├── Busy                          the tenant has as much control-plane work waiting as it
    │                                 may; ``detail['retry_after_s']`` (retryable)
    ├── Unauthorized                  the HTTP API refused the caller's key (401)
    ├── Unreachable                   the HTTP API could not be reached, or did not answer in time
    │                                 (retryable)
    ├── BadResponse                   the HTTP API answered something it does not document
    ├── PlanError                     a planner's output is not a valid plan
    ├── QualityGateFailed             an output kept failing its schema or required fields
    └── JobError
        ├── JobFailed                 the job ended without an answer; ``result`` holds what ran
        │   └── JobCancelled          it was cancelled
        ├── JobTimeout                waiting for the job took longer than asked (retryable)
        └── JobNotFound

Errors cross process boundaries (Ray pickles them), so they rebuild from
``(message, detail)`` and keep their class.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

__all__ = [
    "AgentNotFound",
    "AuthFailed",
    "BadRequest",
    "BadResponse",
    "BudgetExceeded",
    "Busy",
    "ConfigError",
    "Conflict",
    "ContentFiltered",
    "ContextTooLong",
    "DeadlineExceeded",
    "DeliveryError",
    "ErrorCode",
    "ExperimentNotFound",
    "Forbidden",
    "HopLimitExceeded",
    "InvalidAddress",
    "InvalidArguments",
    "InvalidInput",
    "InvalidRequest",
    "JobCancelled",
    "JobError",
    "JobFailed",
    "JobNotFound",
    "JobTimeout",
    "KnowledgeNotFound",
    "MalformedEnvelope",
    "ModelError",
    "ModelTimeout",
    "Overloaded",
    "PlanError",
    "ProviderUnavailable",
    "QualityGateFailed",
    "QuotaExceeded",
    "RateLimited",
    "RecipientUnavailable",
    "SandboxUnavailable",
    "ScriptError",
    "SessionNotFound",
    "SkillNotFound",
    "StateUnavailable",
    "StreamInterrupted",
    "TeamNotFound",
    "ToolError",
    "ToolInfrastructureError",
    "ToolNotAllowed",
    "TroupeError",
    "Unauthorized",
    "UnknownRecipient",
    "UnpricedModel",
    "Unreachable",
    "UnsupportedSchemaVersion",
    "WorkLimitExceeded",
    "error_class",
]


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


class InvalidInput(TroupeError):
    """The caller sent something that cannot be used as it is."""

    code = ErrorCode.INVALID_INPUT


class MalformedEnvelope(InvalidInput):
    """Bytes that do not decode to a valid ``AgentMessage``."""

    code = ErrorCode.MALFORMED_ENVELOPE


class UnsupportedSchemaVersion(InvalidInput):
    """Envelope bytes written by a protocol version this build does not read."""

    code = ErrorCode.UNSUPPORTED_VERSION


class InvalidAddress(InvalidInput):
    """An address that is not ``NAME``, ``role:NAME`` or ``topic:NAME``."""

    code = ErrorCode.INVALID_ADDRESS


class ConfigError(InvalidInput):
    """A configuration (team, agent, model, runtime) that cannot work."""

    code = ErrorCode.CONFIG


class TeamNotFound(ConfigError):
    """No team is registered under that name."""

    code = ErrorCode.TEAM_NOT_FOUND


class SkillNotFound(ConfigError):
    """No skill is registered under that name, or it has no such version."""

    code = ErrorCode.SKILL_NOT_FOUND


class AgentNotFound(ConfigError):
    """No registered team has an agent of that name."""

    code = ErrorCode.AGENT_NOT_FOUND


class ExperimentNotFound(ConfigError):
    """No A/B experiment is named that."""

    code = ErrorCode.EXPERIMENT_NOT_FOUND


class SessionNotFound(ConfigError):
    """The tenant has no session (conversation) of that id."""

    code = ErrorCode.SESSION_NOT_FOUND


class KnowledgeNotFound(ConfigError):
    """The tenant has no knowledge base of that name, or it has no such document."""

    code = ErrorCode.KNOWLEDGE_NOT_FOUND


class Conflict(InvalidInput):
    """The change clashes with what exists: a name already taken, an agent in another team."""

    code = ErrorCode.CONFLICT


class InvalidRequest(InvalidInput):
    """An HTTP request that does not match the API's schema (a 422 ``invalid_request``).

    ``detail['problems']`` names each problem (``body.team.agents: ...``). Nothing started.
    """

    code = ErrorCode.INVALID_REQUEST


class WorkLimitExceeded(InvalidInput):
    """Checking or evaluating the caller's input took longer than its limit allows.

    ``detail['limit']`` names the limit (``request_work_s``, ``graph_step_work_s``, ...),
    ``detail['seconds']`` its value. The patterns a tenant wrote (JSON Schema ``pattern``, a
    graph edge's ``when``, a gate's or an eval's regex) are the usual cause: nothing was kept.
    """

    code = ErrorCode.WORK_LIMIT


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


class Forbidden(TroupeError):
    """The caller may not do this: a field its tenant's policy refuses, or an admin's right.

    ``detail['field']`` names the refused field (``team.agents.0.tools``), ``detail['policy']``
    the policy that refused it. Nothing was provisioned or started.
    """

    code = ErrorCode.FORBIDDEN


class QuotaExceeded(Forbidden):
    """The request would take its tenant past a quota (``detail['quota']``, ``['limit']``).

    Nothing of the request was stored. Deleting what the tenant holds makes room.
    """

    code = ErrorCode.QUOTA_EXCEEDED


class Busy(TroupeError):
    """The tenant has as much control-plane work in hand and waiting as it may: come back later.

    ``detail['retry_after_s']`` says when; ``detail['limit']`` names the limit. Other
    tenants' work is not held up by it (fair shares), and nothing of the request was kept.
    """

    code = ErrorCode.BUSY
    retryable = True


class BudgetExceeded(TroupeError):
    """A call would take a job or tenant past its token or money budget; nothing was spent."""

    code = ErrorCode.BUDGET_EXCEEDED


class UnpricedModel(BudgetExceeded):
    """A USD budget applies to the call and its model has no known price (fails closed).

    The operator sets a price (``input_usd_per_mtok`` / ``output_usd_per_mtok``, or
    ``LLMConfig.prices``) or opts in with ``LLMConfig.allow_unpriced``.
    """

    code = ErrorCode.UNPRICED_MODEL


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


class StateUnavailable(TroupeError):
    """The state store cannot be reached or failed mid-statement: nothing was recorded.

    ``detail['store']`` names it (a URL without its password). Retry once it is back.
    """

    code = ErrorCode.STATE_UNAVAILABLE
    retryable = True


class Unauthorized(TroupeError):
    """The HTTP API refused the caller's key (401): none was sent, or one it does not know."""

    code = ErrorCode.UNAUTHORIZED


class Unreachable(TroupeError):
    """The HTTP API could not be reached, or did not answer within the client's timeout.

    A refused or reset connection, a name that does not resolve; ``detail['url']`` is where
    it was called.
    """

    code = ErrorCode.UNREACHABLE
    retryable = True


class BadResponse(TroupeError):
    """The HTTP API answered something it does not document.

    Not JSON, or not the model the route answers with (``detail['status']``; the body is not
    kept: it may be anything).
    """

    code = ErrorCode.BAD_RESPONSE


class QualityGateFailed(TroupeError):
    """An output kept failing its JSON Schema or required fields after its retries."""

    code = ErrorCode.QUALITY_GATE


class PlanError(TroupeError):
    """A planner's output is not a valid plan (bad JSON, cycles, unknown roles)."""

    code = ErrorCode.PLAN


class JobError(TroupeError):
    """Base of job-level errors seen by drivers."""

    code = ErrorCode.JOB


class JobFailed(JobError):
    """The job ended without an answer; ``detail['result']`` holds the ``JobResult``."""

    code = ErrorCode.JOB_FAILED


class JobCancelled(JobFailed):
    """The job was cancelled before it finished; ``detail['result']`` holds what ran."""

    code = ErrorCode.CANCELLED


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
