"""The HTTP API's own bodies: what its routes take and answer, beside the protocol's models.

The server (``raytroupe.deployments``) and the client SDK (``raytroupe.Client``) both use
these, so the two cannot drift apart. Pure data: pydantic, nothing of FastAPI or Ray.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

from raytroupe.protocols.envelope import AgentMessage
from raytroupe.protocols.errors import ErrorCode
from raytroupe.protocols.graph_checkpoints import GraphInterrupt, GraphState
from raytroupe.protocols.inputs import Attachment
from raytroupe.protocols.jobs import DeadLetter, JobResult, JobStatus, JobSummary
from raytroupe.protocols.llm import Budget, ToolArguments
from raytroupe.protocols.sessions import (
    HISTORY_TOKENS,
    MAX_HISTORY_TOKENS,
    MIN_HISTORY_TOKENS,
    SessionId,
)
from raytroupe.protocols.skill import SkillInfo, SkillProblemInfo
from raytroupe.protocols.team import AgentSpec, TeamSpec
from raytroupe.protocols.trace import Span

__all__ = [
    "MAX_DOCUMENTS",
    "PROBLEM_BASE",
    "AgentPut",
    "Cancelled",
    "DailyUsage",
    "DeadLetterView",
    "Decided",
    "Decision",
    "EvalAccepted",
    "Forked",
    "Health",
    "JobAccepted",
    "JobSummaries",
    "JobTrace",
    "JobView",
    "Me",
    "PendingApproval",
    "PendingInput",
    "Problem",
    "ProblemError",
    "Readiness",
    "Resumed",
    "SkillApplied",
    "SkillListing",
]

MAX_DOCUMENTS: Final = 64
"""Documents one request may ingest."""

PROBLEM_BASE: Final = "https://raytroupe.dev/problems/"
"""A problem's ``type`` is this followed by its ``code``."""


# --- problems (every error answer) ---------------------------------------------------------


class ProblemError(BaseModel):
    """The member OpenAI clients read (their SDKs show ``error.message``)."""

    message: str
    type: str = Field(description="The problem's code.")
    code: str
    param: str | None = Field(default=None, description="The refused field, if one was.")


class Problem(BaseModel):
    """An error answer (RFC 9457 problem details, ``application/problem+json``).

    ``code`` is the machine-readable error code: one of :class:`ErrorCode`'s values, or one
    of the gate's (``unauthorized``, ``rate_limited``, ``body_too_large``,
    ``invalid_request``, ``invalid_request_id``, ``forbidden``, ``internal``, and HTTP's own
    phrases such as ``not_found``).
    """

    model_config = ConfigDict(extra="allow")

    type: str = Field(description=f"{PROBLEM_BASE}<code>")
    title: str
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="What went wrong, for people.")
    code: str
    error: ProblemError
    request_id: str | None = Field(default=None, description="Finds the request in the logs.")
    retryable: bool | None = Field(default=None, description="Trying again later may work.")
    problems: list[str] | None = Field(default=None, description="Each problem of the input.")
    fields: list[str] | None = Field(default=None, description="The input fields concerned.")
    field: str | None = Field(default=None, description="The refused field.")
    policy: str | None = Field(default=None, description="The policy that refused it.")
    retry_after_s: int | None = Field(default=None, description="When to come back (429).")
    limit: str | None = Field(
        default=None, description="The limit that refused it (work_limit, busy)."
    )


# --- jobs ----------------------------------------------------------------------------------


class _JobRequest(BaseModel):
    """Deprecated: a job to start. The body of ``POST /v1/jobs`` is ``submit``'s parameters."""

    model_config = ConfigDict(extra="forbid")

    team: TeamSpec | Annotated[str, Field(min_length=1, max_length=64)] | None = Field(
        default=None,
        description="A team definition, or the name of a registered team; with neither a team "
        "nor a skill, the job is routed among the skills and teams the key may run.",
    )
    skill: Annotated[str, Field(min_length=1, max_length=81)] | None = Field(
        default=None, description="A registered skill, 'name' or 'name@version'."
    )
    input: Any = Field(
        default=None,
        description="A skill's structured input (checked by its input_schema), or a graph "
        "team's first state (an object of its state's fields).",
    )
    task: str = Field(
        default="",
        max_length=200_000,
        validate_default=True,
        description="What is asked (may be empty when a skill's input is given).",
    )
    attachments: list[Attachment] = Field(
        default_factory=list, max_length=32, description="Text files and images for the job."
    )
    budget: Budget | None = Field(default=None, description="Overrides the team's budget.")
    session_id: SessionId | None = Field(
        default=None,
        description="A session of the caller's tenant: the job sees its history and becomes "
        "its next turn.",
    )

    @field_validator("task")
    @classmethod
    def _something_asked(cls, task: str, info: ValidationInfo) -> str:
        """A task, unless a skill's input says it all (``input`` is validated before it)."""
        if not task.strip() and info.data.get("input") is None:
            raise ValueError("a job needs a task (or, for a skill, an input)")
        return task


class JobAccepted(BaseModel):
    """A job that was accepted and is starting."""

    id: str
    status: JobStatus
    events_url: str
    url: str


class JobView(BaseModel):
    """A job: where it is, and its result once it has one."""

    id: str
    status: JobStatus
    result: JobResult | None = None


class Cancelled(BaseModel):
    """The outcome of a cancel request."""

    id: str
    cancelled: bool
    status: JobStatus


class Decision(BaseModel):
    """A human's answer to a tool call waiting for approval."""

    model_config = ConfigDict(extra="forbid")

    approved: bool
    reason: str = Field(default="", max_length=2000)


class Decided(BaseModel):
    """A held tool call that was approved or rejected."""

    job_id: str
    approval_id: str
    approved: bool


class Resumed(BaseModel):
    """The interrupt a resume answered."""

    job_id: str
    interrupt: GraphInterrupt


class Forked(BaseModel):
    """A job started from a checkpoint of another."""

    job_id: str
    forked_from: str
    step: int


class JobSummaries(BaseModel):
    """A page of the jobs list, newest first."""

    jobs: list[JobSummary]
    more: bool = Field(description="Older jobs match too: ask again with before=<oldest>.")


class JobTrace(BaseModel):
    """A job's trace so far: the root span first."""

    trace_id: str
    job_id: str
    spans: list[Span]


# --- teams and agents ----------------------------------------------------------------------


class AgentPut(BaseModel):
    """An agent to add to a registered team (or the new configuration of one)."""

    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, max_length=64, description="The registered team it is in.")
    agent: AgentSpec


# --- the console: the caller, waiting work, usage, dead letters ----------------------------


class Me(BaseModel):
    """The caller, as its key says: what the console shows and which pages it offers."""

    name: str
    tenant: str
    admin: bool


class PendingApproval(BaseModel):
    """A tool call held for a person, with the job it belongs to."""

    job_id: str
    approval_id: str
    task_id: str | None
    agent: str
    tool: str
    arguments: ToolArguments


class PendingInput(BaseModel):
    """A graph waiting for a person's input: the interrupt and the state it waits with."""

    job_id: str
    interrupt: GraphInterrupt
    state: GraphState


class DailyUsage(BaseModel):
    """Model usage of one tenant on one model, on one day (UTC, by the job's submission)."""

    tenant: str
    day: str
    model: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class DeadLetterView(BaseModel):
    """A dead letter as people read it: when, why, whose (never the envelope's payload).

    ``message`` and ``raw`` (the envelope, or its bytes if they did not decode) are kept in
    the process that read the router, the driver's: they are no fields, so no answer of the
    HTTP API (and no schema of its document) carries them.
    """

    at: float
    reason: ErrorCode
    detail: str
    message_id: str | None
    job_id: str | None
    sender: str | None
    recipient: str | None
    tenant: str | None
    _message: AgentMessage | None = PrivateAttr(default=None)
    _raw: bytes | None = PrivateAttr(default=None)

    @property
    def message(self) -> AgentMessage | None:
        """The envelope, where the router's dead letter was read in this process."""
        return self._message

    @property
    def raw(self) -> bytes | None:
        """The bytes that did not decode, where the dead letter was read in this process."""
        return self._raw

    @classmethod
    def of(cls, letter: DeadLetter) -> DeadLetterView:
        """The view of a dead letter the router kept (its envelope in hand)."""
        message = letter.message
        view = cls(
            at=letter.at, reason=letter.reason, detail=letter.detail,
            message_id=letter.message_id,
            job_id=None if message is None else message.job_id,
            sender=None if message is None else message.sender,
            recipient=None if message is None else message.recipient,
            tenant=None if message is None else message.tenant,
        )  # fmt: skip
        view._message, view._raw = message, letter.raw
        return view


# --- skills --------------------------------------------------------------------------------


class SkillListing(BaseModel):
    """Registered skills, and (for admins) skill files that could not be loaded.

    The driver's ``skills()`` answered the list of skills itself before: iterating,
    indexing and measuring a listing still reach ``skills``, and warn that it is deprecated.
    """

    skills: list[SkillInfo]
    problems: list[SkillProblemInfo] = Field(default_factory=list)

    def __iter__(self) -> Iterator[SkillInfo]:  # type: ignore[override]
        return iter(self._as_list("iterating"))

    def __len__(self) -> int:
        return len(self._as_list("len()"))

    def __getitem__(self, index: int) -> SkillInfo:
        return self._as_list("indexing")[index]

    def _as_list(self, what: str) -> list[SkillInfo]:
        warnings.warn(
            f"{what} the answer of skills() is deprecated: it is a SkillListing, use .skills",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.skills


class SkillApplied(BaseModel):
    """A skill version registered (or made current again)."""

    name: str
    version: str
    created: bool = Field(description="True if this version is new to the registry.")


# --- evals, knowledge, sessions ------------------------------------------------------------


class EvalAccepted(BaseModel):
    """A run that started."""

    id: str
    url: str


# --- operations ----------------------------------------------------------------------------


class Health(BaseModel):
    """Liveness: the process answers."""

    status: str


class Readiness(BaseModel):
    """Readiness: whether each system actor answers."""

    status: str = Field(description="'ready' or 'not ready'.")
    checks: dict[str, bool] = Field(description="Each system actor, and whether it answered.")


class _SessionCreate(BaseModel):
    """Deprecated: a session to start (``POST /v1/sessions`` takes create_session's fields)."""

    model_config = ConfigDict(extra="forbid")

    id: SessionId | None = Field(default=None, description="Its id (default: a fresh one).")
    title: str = Field(default="", max_length=200)
    history_tokens: int = Field(
        default=HISTORY_TOKENS, ge=MIN_HISTORY_TOKENS, le=MAX_HISTORY_TOKENS
    )


_RETIRED: Final = {
    "JobRequest": ("submit", _JobRequest),
    "SessionCreate": ("create_session", _SessionCreate),
}


def __getattr__(name: str) -> Any:
    """The request models whose operations now declare their bodies: still there, warning."""
    if name in _RETIRED:
        op, model = _RETIRED[name]
        warnings.warn(
            f"raytroupe.protocols.http.{name} is deprecated: the body of {op} is its parameters",
            DeprecationWarning,
            stacklevel=2,
        )
        return model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
