"""The caller's mistakes: input that cannot be used as it is (``InvalidInput`` and below)."""

from __future__ import annotations

from raytroupe.protocols.errors.base import ErrorCode, TroupeError

__all__ = [
    "AgentNotFound",
    "ConfigError",
    "Conflict",
    "ExperimentNotFound",
    "GuardrailNotFound",
    "InvalidAddress",
    "InvalidInput",
    "InvalidRequest",
    "KnowledgeNotFound",
    "LessonNotFound",
    "MalformedEnvelope",
    "ScheduleNotFound",
    "SessionNotFound",
    "SkillNotFound",
    "SpendLimitNotFound",
    "TeamNotFound",
    "UnsupportedSchemaVersion",
    "WebhookNotFound",
    "WorkLimitExceeded",
]


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


class LessonNotFound(ConfigError):
    """The tenant has no lesson of that id for the skill (reflection's, see ``lessons``)."""

    code = ErrorCode.LESSON_NOT_FOUND


class WebhookNotFound(ConfigError):
    """The tenant has no webhook (or A2A push config) of that id."""

    code = ErrorCode.WEBHOOK_NOT_FOUND


class ScheduleNotFound(ConfigError):
    """The tenant has no schedule of that name."""

    code = ErrorCode.SCHEDULE_NOT_FOUND


class GuardrailNotFound(ConfigError):
    """No guardrail (or no such version of one) is set under that name."""

    code = ErrorCode.GUARDRAIL_NOT_FOUND


class SpendLimitNotFound(ConfigError):
    """No spend limit set at run time has that name."""

    code = ErrorCode.SPEND_LIMIT_NOT_FOUND


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
