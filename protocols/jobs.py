"""Jobs as data: plans, results, events and dead letters."""

from __future__ import annotations

import json
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.envelope import AgentMessage
from raytroupe.protocols.errors import ErrorCode
from raytroupe.protocols.graph_checkpoints import GraphState
from raytroupe.protocols.intent import IntentChoice
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import Usage
from raytroupe.protocols.output_schema import check_output_schema, schema_of, typed_output
from raytroupe.protocols.payloads import ErrorPayload, WorkDone
from raytroupe.protocols.quality import StandardOutput
from raytroupe.protocols.resolution import Resolution, ResolutionStrategy
from raytroupe.protocols.trace import Span

__all__ = [
    "DeadLetter",
    "Feedback",
    "JobEvent",
    "JobResult",
    "JobStatus",
    "JobSummary",
    "JobsQuery",
    "Plan",
    "PlannedSubtask",
    "SubtaskResult",
    "Timings",
    "UsageRow",
]

M = TypeVar("M", bound=BaseModel)

JobStatus = Literal[
    "pending",
    "planning",
    "running",
    "awaiting_approval",
    "awaiting_input",
    "aggregating",
    "succeeded",
    "failed",
    "cancelled",
]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class PlannedSubtask(_Data):
    """One node of a plan."""

    id: Name
    role: Name = Field(description="Role of the agent that should do it.")
    instructions: str = Field(min_length=1)
    depends_on: tuple[Name, ...] = Field(default=(), description="Ids that must finish first.")
    timeout_s: float | None = Field(
        default=None, gt=0.0, description="Deadline of each attempt (default: the team's)."
    )
    required: tuple[str, ...] = Field(
        default=(), description="Fields the (JSON) output must have, non-empty."
    )
    redundancy: int = Field(
        default=1, ge=1, le=16, description="Agents that answer it independently (k)."
    )
    strategy: ResolutionStrategy = Field(
        default="majority", description="How k answers become one (with redundancy > 1)."
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema (2020-12) the subtask's output must satisfy."
    )
    context: str | None = Field(
        default=None,
        max_length=1_000_000,
        description="What the agent is given with its instructions as the job (None: the "
        "job's whole task; empty: nothing). A sized plan gives each part the task's shared "
        "text, not the other parts, and a part that is arithmetic written out in full nothing.",
    )

    @field_validator("output_schema", mode="before")
    @classmethod
    def _model_class(cls, schema: Any) -> Any:
        return schema_of(schema)

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, schema: JsonSchema | None) -> JsonSchema | None:
        return check_output_schema(schema)


class Plan(_Data):
    """A DAG of subtasks: unique ids, known dependencies, no cycles."""

    subtasks: tuple[PlannedSubtask, ...] = Field(min_length=1, max_length=1024)
    repairs: tuple[str, ...] = Field(
        default=(), description="What was fixed in the planner's answer to make this plan."
    )
    fallback: str | None = Field(
        default=None,
        description="Set when the planner gave no usable plan: why; one agent takes the task.",
    )
    sizing: Literal["one", "parts"] | None = Field(
        default=None,
        description="How the orchestrator sized the task without asking the planner model: "
        "one part (one agent, its answer the job's), or its listed independent parts (one "
        "subtask each, answers assembled in order). None: the planner model or the team's "
        "declared plan made it (answers aggregated by the model).",
    )

    @model_validator(mode="after")
    def _is_dag(self) -> Plan:
        ids = [s.id for s in self.subtasks]
        if len(set(ids)) != len(ids):
            raise ValueError("subtask ids are not unique")
        known = set(ids)
        for s in self.subtasks:
            missing = [d for d in s.depends_on if d not in known]
            if missing:
                raise ValueError(f"subtask {s.id!r} depends on unknown {missing}")
        deps = {s.id: set(s.depends_on) for s in self.subtasks}
        done: set[str] = set()
        while deps:
            ready = [i for i, d in deps.items() if d <= done]
            if not ready:
                raise ValueError(f"dependency cycle among {sorted(deps)}")
            for i in ready:
                done.add(i)
                del deps[i]
        return self


class SubtaskResult(WorkDone):
    """A subtask as it ran.

    Its plan, then the agent's work (:class:`WorkDone`), the attempt that produced it and,
    with redundancy, how candidates became one.
    """

    id: str
    role: str
    instructions: str
    depends_on: tuple[str, ...] = ()
    status: Literal["succeeded", "failed", "skipped"]
    attempt: int = 1
    resolution: Resolution | None = Field(
        default=None, description="With redundancy: every candidate and the decision."
    )
    gate_retries: int = Field(default=0, ge=0, description="Answers sent back by the gate.")

    def output_as(self, model: type[M]) -> M:
        """The subtask's output as an instance of ``model``.

        Give the planned subtask ``output_schema=model`` so that its agent is held to it.

        Raises:
            QualityGateFailed: the output is not JSON, or not a valid ``model``.
        """
        return typed_output(model, None, self.output, what=f"subtask {self.id}'s output")


class Timings(_Data):
    """Where a job's time went, in seconds (``*_at`` are UNIX times)."""

    submitted_at: float
    finished_at: float
    provision_s: float = Field(default=0.0, description="Spawning or finding the team's agents.")
    plan_s: float = 0.0
    dispatch_s: float = 0.0
    aggregate_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Submission to finish."""
        return self.finished_at - self.submitted_at


class JobResult(_Data):
    """The outcome of a job."""

    job_id: str
    task: str = Field(description="The task as the caller wrote it (its context is not in it).")
    team: str
    status: Literal["succeeded", "failed", "cancelled"]
    answer: str = ""
    subtasks: tuple[SubtaskResult, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    timings: Timings
    error: ErrorPayload | None = None
    route: IntentChoice | None = Field(
        default=None, description="How the team was chosen, for a job that named none."
    )
    trace: tuple[Span, ...] = Field(
        default=(), description="The job's spans; the first is the root (the job)."
    )
    state: GraphState | None = Field(default=None, description="A graph job's final shared state.")
    output: StandardOutput | None = Field(
        default=None,
        description="The answer in the standard shape (skill, version, quality, typed data, "
        "text, usage, trace id); every finished job has one.",
    )

    def output_as(self, model: type[M]) -> M:
        """The answer as an instance of ``model``: the job's ``output_type``.

        Submitting with ``output_type=model`` held the job's answer to the model's schema
        (the team's quality gate); this reads it back as the model.

        Raises:
            QualityGateFailed: the answer is not JSON, or not a valid ``model``.
        """
        data = self.output.data if self.output is not None else None
        return typed_output(model, data, self.answer, what=f"job {self.job_id}'s answer")

    def trace_json(self) -> str:
        """The trace as a JSON object: ``{"trace_id", "job_id", "spans": [...]}``."""
        trace_id = self.trace[0].trace_id if self.trace else ""
        spans = [s.model_dump(mode="json") for s in self.trace]
        return json.dumps({"trace_id": trace_id, "job_id": self.job_id, "spans": spans})


class JobEvent(_Data):
    """A step of a job, in order (``seq`` starts at 1 and has no gaps)."""

    job_id: str
    seq: int = Field(ge=1)
    at: float
    type: Literal[
        "job_submitted",
        "plan_ready",
        "subtask_started",
        "subtask_finished",
        "job_aggregating",
        "llm_delta",
        "job_succeeded",
        "job_failed",
        "job_cancelled",
        "job_routed",
        "approval_requested",
        "approval_decided",
        "quality_checked",
        "graph_step",
        "graph_interrupted",
        "graph_resumed",
        "graph_waiting",
        "graph_woken",
        "guardrail",
        "spend_alert",
    ]
    subtask_id: str | None = None
    data: dict[str, object] = Field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        """True for the last event of a job."""
        return self.type in {"job_succeeded", "job_failed", "job_cancelled"}


class Feedback(_Data):
    """A person's verdict on a finished job's answer."""

    score: float = Field(ge=0.0, le=1.0, description="0 (useless) to 1 (exactly right).")
    comment: str = Field(default="", max_length=4000)
    by: str = Field(default="", description="Who gave it (the API key's name, or 'driver').")
    at: float = Field(default=0.0, description="UNIX time it was given.")


class DeadLetter(_Data):
    """An envelope the router could not deliver, kept with the reason."""

    at: float
    reason: ErrorCode
    detail: str
    message_id: str | None = None
    message: AgentMessage | None = Field(default=None, description="The envelope, if it decoded.")
    raw: bytes | None = Field(default=None, description="The bytes, if they did not decode.")


class JobSummary(_Data):
    """One line of a jobs list: what it ran, for whom, where it is, what it cost."""

    id: str
    status: JobStatus
    tenant: str
    team: str = Field(description="The team it runs under (a skill's team for a skill job).")
    skill: str | None = Field(default=None, description="The skill, 'name@version', if any.")
    submitted_by: str | None = Field(
        default=None, description="The API key's name, or 'driver' for a Python driver's job."
    )
    user: str | None = Field(default=None, description="The tenant's end user it is for.")
    submitted_at: float
    finished_at: float | None = None
    cost_usd: float | None = Field(default=None, description="Known once the job has finished.")
    tokens: int | None = Field(default=None, description="Known once the job has finished.")
    subtasks: int | None = Field(default=None, description="Subtasks in its result.")
    task: str = Field(default="", description="The task's first 200 characters.")


class JobsQuery(_Data):
    """Which jobs a jobs list shows: newest first, filtered, a page at a time."""

    status: str | None = Field(
        default=None,
        description="One status, or 'live' for every unfinished job. The journal knows only "
        "finished statuses: a live one matches every unfinished job there, and the client "
        "keeps those whose live status it is.",
    )
    text: str | None = Field(
        default=None,
        description="A case-insensitive substring of the id, task, team, skill or submitter.",
    )
    user: str | None = Field(default=None, description="Only this end user's jobs.")
    before: float | None = Field(default=None, description="Submitted before (paging).")
    limit: int = Field(default=100, ge=0)


_COUNTS: Final = (
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


class UsageRow(_Data):
    """Model usage of one agent of one job on one deployment."""

    job_id: str | None
    agent: str
    user: str | None = Field(default=None, description="The job's end user, if it named one.")
    model: str = Field(description="The alias that was asked for.")
    deployment: str = Field(description="The deployment that answered.")
    provider: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached_tokens: int = Field(default=0, description="Of the prompt tokens, read from cache.")
    cache_write_tokens: int = Field(default=0, description="Of them, written to the cache.")
    reasoning_tokens: int = Field(default=0, description="Of the completion tokens, thinking.")

    def __add__(self, other: UsageRow | Usage) -> UsageRow:
        """The row with ``other``'s calls, tokens and cost added (its key stays this one's)."""
        return self.model_copy(update={f: getattr(self, f) + getattr(other, f) for f in _COUNTS})
