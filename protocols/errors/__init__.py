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
    │   │   ├── KnowledgeNotFound     the tenant has no such knowledge base or document
    │   │   ├── LessonNotFound        the tenant has no such lesson of the skill
    │   │   ├── WebhookNotFound       the tenant has no webhook (or A2A push config) of that id
    │   │   ├── ScheduleNotFound      the tenant has no schedule of that name
    │   │   ├── GuardrailNotFound     no guardrail (or version of one) is set under that name
    │   │   └── SpendLimitNotFound    no spend limit set at run time has that name
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
    ├── GuardrailTripped              a guardrail's rule refused input, a tool call or result, or
    │                                 output (``detail['guardrail']``, ``['rule']``, ``['stage']``)
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

The root is in :mod:`~raytroupe.protocols.errors.base`, the branches in modules of their own
(``invalid_input``, ``calls``, ``refusals``, ``services``, ``jobs``); import them from here.
This package indexes the whole tree for :func:`error_class`.
"""

from __future__ import annotations

from raytroupe.protocols.errors.base import ErrorCode, TroupeError
from raytroupe.protocols.errors.base import _rebuild as _rebuild  # errors pickled before the split
from raytroupe.protocols.errors.calls import (
    AuthFailed,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    DeadlineExceeded,
    DeliveryError,
    HopLimitExceeded,
    InvalidArguments,
    ModelError,
    ModelTimeout,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    RecipientUnavailable,
    SandboxUnavailable,
    ScriptError,
    StreamInterrupted,
    ToolError,
    ToolInfrastructureError,
    ToolNotAllowed,
    UnknownRecipient,
)
from raytroupe.protocols.errors.invalid_input import (
    AgentNotFound,
    ConfigError,
    Conflict,
    ExperimentNotFound,
    GuardrailNotFound,
    InvalidAddress,
    InvalidInput,
    InvalidRequest,
    KnowledgeNotFound,
    LessonNotFound,
    MalformedEnvelope,
    ScheduleNotFound,
    SessionNotFound,
    SkillNotFound,
    SpendLimitNotFound,
    TeamNotFound,
    UnsupportedSchemaVersion,
    WebhookNotFound,
    WorkLimitExceeded,
)
from raytroupe.protocols.errors.jobs import (
    JobCancelled,
    JobError,
    JobFailed,
    JobNotFound,
    JobTimeout,
    PlanError,
    QualityGateFailed,
)
from raytroupe.protocols.errors.refusals import (
    BudgetExceeded,
    Busy,
    Forbidden,
    GuardrailTripped,
    QuotaExceeded,
    Unauthorized,
    UnpricedModel,
)
from raytroupe.protocols.errors.services import (
    BadResponse,
    StateUnavailable,
    Unreachable,
)

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
    "GuardrailNotFound",
    "GuardrailTripped",
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
    "LessonNotFound",
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
    "ScheduleNotFound",
    "ScriptError",
    "SessionNotFound",
    "SkillNotFound",
    "SpendLimitNotFound",
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
    "WebhookNotFound",
    "WorkLimitExceeded",
    "error_class",
]


_BY_CODE: dict[ErrorCode, type[TroupeError]] = {}


def _index(cls: type[TroupeError]) -> None:
    _BY_CODE.setdefault(cls.code, cls)
    for sub in cls.__subclasses__():
        _index(sub)


_index(TroupeError)


def error_class(code: ErrorCode) -> type[TroupeError]:
    """The exception class that stands for ``code`` (``TroupeError`` for codes without one)."""
    return _BY_CODE.get(code, TroupeError)
