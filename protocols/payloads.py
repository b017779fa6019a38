"""Envelope payloads: a tagged union, discriminated by ``kind``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.errors import ErrorCode, TroupeError, error_class
from raytroupe.protocols.guardrails import GuardrailDecision
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.knowledge import KnowledgeQuery, Passages
from raytroupe.protocols.llm import (
    Budget,
    ImagePart,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    ToolArguments,
    ToolCall,
    Usage,
)
from raytroupe.protocols.memory import (
    MemoryHits,
    MemoryQuery,
    MemoryWrite,
    Notes,
    NotesQuery,
    NoteWrite,
)
from raytroupe.protocols.spend import SpendAlert
from raytroupe.protocols.trace import Span

__all__ = [
    "Ack",
    "ApprovalDecision",
    "ApprovalRequest",
    "CancelJob",
    "Cancelled",
    "ErrorPayload",
    "Event",
    "Handoff",
    "JobEnded",
    "LLMDeltas",
    "Payload",
    "SubtaskTaken",
    "TaskRequest",
    "TaskResult",
    "ToolResult",
    "WorkDone",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ErrorPayload(_Frozen):
    """A failure, as data: a typed code, a message for people, ``retryable`` for programs."""

    kind: Literal["error"] = "error"
    code: ErrorCode
    message: str
    retryable: bool = False
    detail: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorPayload:
        """Describe ``exc``; anything that is not a ``TroupeError`` becomes ``internal``."""
        if isinstance(exc, TroupeError):
            detail = {k: v for k, v in exc.detail.items() if _plain(v)}
            return cls(code=exc.code, message=exc.message, retryable=exc.retryable, detail=detail)
        return cls(code=ErrorCode.INTERNAL, message=f"{type(exc).__name__}: {exc}")

    def to_exception(self) -> TroupeError:
        """The exception this payload describes, of the class its code stands for."""
        return error_class(self.code)(self.message, **self.detail)


def _plain(value: object) -> bool:
    """True for JSON-like data (None, scalars, lists and str-keyed dicts of them)."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


class TaskRequest(_Frozen):
    """Ask an agent to carry out one subtask of a job."""

    kind: Literal["task_request"] = "task_request"
    task_id: str = Field(min_length=1, description="Subtask id, unique within the job.")
    instructions: str = Field(min_length=1, description="What this subtask must achieve.")
    job: JobContext = Field(
        default_factory=lambda: JobContext(request=""),
        description="The job's context: what it was asked (for one part of a sized task, "
        "what the parts share) and what it is shown beside it.",
    )
    inputs: dict[str, str] = Field(
        default_factory=dict, description="Outputs of the subtasks this one depends on, by id."
    )
    images: tuple[ImagePart, ...] = Field(
        default=(), description="Images given with the job, shown to the agent with its task."
    )
    max_turns: int | None = Field(default=None, gt=0, description="Overrides the agent's limit.")
    budget: Budget | None = Field(
        default=None, description="The job's budget, for every model call made for it."
    )
    candidate: int = Field(
        default=0, ge=0, le=64,
        description="Which candidate of a subtask dispatched redundantly this is (0 when it "
        "is dispatched once): each candidate is a run of its own, its model calls made for it.",
    )  # fmt: skip


StopReason = Literal[
    "final_answer",
    "max_turns",
    "error",
    "budget",
    "deadline",
    "repeated_tool_call",
    "stagnation",
    "cancelled",
    "handoff",
]
"""Why an agent's loop ended."""


class WorkDone(_Frozen):
    """What an agent did for a subtask: who, what came of it, when, at what cost.

    A ``TaskResult`` is this, as the agent reports it; a job's ``SubtaskResult`` is this, as
    the job keeps it (with the subtask's plan and attempt).
    """

    agent: str | None = Field(default=None, description="Agent that produced the result.")
    output: str = ""
    error: ErrorPayload | None = None
    turns: int = Field(default=0, ge=0, description="Model calls made by the agent loop.")
    tool_calls: int = Field(default=0, ge=0)
    stop_reason: StopReason | None = Field(default=None, description="Why the agent's loop ended.")
    providers: tuple[str, ...] = Field(default=(), description="Providers that answered.")
    usage: Usage = Field(default_factory=Usage)
    started_at: float | None = Field(default=None, description="UNIX time the work started.")
    finished_at: float | None = Field(default=None, description="UNIX time it finished.")
    guardrails: tuple[GuardrailDecision, ...] = Field(
        default=(), description="What the job's guardrails redacted in its tool calls."
    )


class TaskResult(WorkDone):
    """What an agent produced for one subtask, with who, when and at what cost."""

    kind: Literal["task_result"] = "task_result"
    task_id: str
    agent: str = Field(description="Name of the agent that did the work.")
    status: Literal["succeeded", "failed"]
    stop_reason: StopReason = Field(default="final_answer", description="Why the loop ended.")
    started_at: float = Field(description="UNIX time the agent started the subtask.")
    finished_at: float = Field(description="UNIX time the agent finished it.")
    spans: tuple[Span, ...] = Field(
        default=(), description="The agent's model and tool calls (unparented)."
    )


class ToolResult(_Frozen):
    """The one result shape of every tool: ``{ok, data, error, metadata}``."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    tool: str
    ok: bool
    data: Any = None
    error: ErrorPayload | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Event(_Frozen):
    """Something worth telling a watcher: progress, tokens, state changes."""

    kind: Literal["event"] = "event"
    name: str = Field(min_length=1)
    data: dict[str, Any] = Field(default_factory=dict)


class CancelJob(_Frozen):
    """Stop the job's work here: its subtasks at an agent, its model calls in the pool."""

    kind: Literal["cancel_job"] = "cancel_job"


class Cancelled(_Frozen):
    """The answer to ``CancelJob``: how much of the job's work was stopped."""

    kind: Literal["cancelled"] = "cancelled"
    stopped: int = Field(ge=0, description="Subtasks (at an agent) or model calls (in the pool).")


class JobEnded(_Frozen):
    """The job has its outcome: what was kept for it alone (working memory) may go."""

    kind: Literal["job_ended"] = "job_ended"
    keep_notes: bool = Field(
        default=False, description="Keep the job's notes as long-term memories of its tenant."
    )


class Ack(_Frozen):
    """Received, and nothing more to say."""

    kind: Literal["ack"] = "ack"


class LLMDeltas(_Frozen):
    """Streamed pieces of one agent's model answer, in order, for the job's event stream."""

    kind: Literal["llm_deltas"] = "llm_deltas"
    agent: str
    deltas: tuple[LLMDelta, ...] = Field(min_length=1)


class SubtaskTaken(_Frozen):
    """An agent's word to the job's orchestrator that it runs a subtask; and the answer.

    Journaled: a dispatch again after the orchestrator restarted goes to that agent first,
    which joins its run or resumes it (a teammate would start it over). The orchestrator
    answers with the agent that runs the subtask: the asker, or, when the asker had the
    dispatch through its role (``by_role``) and another agent of the role took that same
    dispatch first (a router that died sent it again), that agent, to which the asker hands
    the dispatch: one run, not two.
    """

    kind: Literal["subtask_taken"] = "subtask_taken"
    task_id: str = Field(min_length=1, max_length=200)
    agent: str = Field(min_length=1, max_length=200)
    by_role: bool = Field(
        default=False, description="The dispatch came through the role, not by name."
    )


class Handoff(_Frozen):
    """A tool sandbox's answer to the ``handoff`` tool: another agent took the subtask over.

    Its answer is the subtask's answer; the calling agent's loop ends with it.
    """

    kind: Literal["handoff"] = "handoff"
    call_id: str
    to_agent: str = Field(description="The agent that took the subtask over.")
    output: str = Field(description="Its answer.")


class ApprovalRequest(_Frozen):
    """A tool that needs a human asks for approval of one exact call."""

    kind: Literal["approval_request"] = "approval_request"
    approval_id: str = Field(description="Bound to the job, subtask, step, tool and arguments.")
    task_id: str | None = None
    agent: str
    tool: str
    arguments: ToolArguments = Field(default_factory=dict)


class ApprovalDecision(_Frozen):
    """A human's answer to an ``ApprovalRequest``."""

    kind: Literal["approval_decision"] = "approval_decision"
    approval_id: str
    approved: bool
    reason: str = ""
    decided_at: float = 0.0


Payload = Annotated[
    TaskRequest
    | TaskResult
    | LLMRequest
    | LLMResponse
    | ToolCall
    | ToolResult
    | Event
    | MemoryWrite
    | MemoryQuery
    | MemoryHits
    | KnowledgeQuery
    | Passages
    | NoteWrite
    | NotesQuery
    | Notes
    | ApprovalRequest
    | ApprovalDecision
    | CancelJob
    | Cancelled
    | JobEnded
    | Ack
    | LLMDeltas
    | SpendAlert
    | SubtaskTaken
    | Handoff
    | ErrorPayload,
    Field(discriminator="kind"),
]
"""Every payload an ``AgentMessage`` can carry."""
