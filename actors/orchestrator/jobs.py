"""A job's state while the orchestrator runs it, and how subtask results are built."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import (
    AgentMessage,
    ApprovalDecision,
    ApprovalRequest,
    Budget,
    CancelJob,
    ErrorPayload,
    Feedback,
    ImagePart,
    JobEnded,
    JobEvent,
    JobResult,
    JobStatus,
    LLMRequest,
    MemoryQuery,
    MemoryWrite,
    Plan,
    PlannedSubtask,
    Span,
    SubtaskResult,
    TaskRequest,
    TaskResult,
    TeamSpec,
    TraceContext,
    TroupeError,
    Usage,
    orchestrator_address,
)
from raytroupe.protocols.graph_checkpoints import GraphState
from raytroupe.protocols.intent import IntentChoice
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.policy import unscoped
from raytroupe.protocols.prompts import asked, job_prompt
from raytroupe.protocols.quality import QualityReport
from raytroupe.protocols.skill import SkillSpec

if TYPE_CHECKING:
    from raytroupe.actors.orchestrator.graphs.desk import Waiting

log = structlog.get_logger("raytroupe.orchestrator")

__all__ = [
    "Job",
    "emit",
    "failed",
    "from_task_result",
    "job_message",
    "last_event",
    "set_status",
    "skipped",
    "wait_until",
]


@dataclass
class Job:
    """One job: what was asked, where it is, what happened."""

    id: str
    context: JobContext
    """What was asked, and what the job is shown beside it (journaled; lessons are not: a
    resumed job recalls them again)."""
    team: TeamSpec
    tenant: str
    submitted_at: float
    trace: TraceContext = field(default_factory=TraceContext)
    status: JobStatus = "pending"
    events: list[JobEvent] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    record: Callable[[JobEvent], None] | None = field(default=None, repr=False, compare=False)
    """Where each event is journaled before a watcher sees it (None: nowhere)."""
    result: JobResult | None = None
    usage: Usage = field(default_factory=Usage)
    """Usage of the job's own model calls (planning, aggregation)."""
    budget: Budget | None = None
    stopped: ErrorPayload | None = None
    """Why no further subtask may start (its budget ran out), if it must stop."""
    plan: Plan | None = None
    """The plan, once made (or as journaled, when the job is resumed)."""
    done: dict[str, SubtaskResult] = field(default_factory=dict)
    """Subtasks that finished (before a restart too): they are not run again."""
    taken: dict[str, str] = field(default_factory=dict)
    """The agent that said it runs each subtask (before a restart too): a dispatch of it
    again goes there first (``SubtaskTaken``)."""
    taken_at: dict[str, int] = field(default_factory=dict)
    """The attempt of the dispatch each of those agents took (since this shard started)."""
    runner: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    approvals: dict[str, tuple[ApprovalRequest, asyncio.Future[ApprovalDecision]]] = field(
        default_factory=dict
    )
    """Tool calls held for a human, by approval id."""
    route: IntentChoice | None = None
    """How the team was chosen, when the job named none."""
    spans: list[Span] = field(default_factory=list)
    """The job's trace so far, but for its root (``job.trace``'s span): see ``.tracing``."""
    images: tuple[ImagePart, ...] = ()
    """Images given with the job: every agent sees them with its subtask."""
    submitted_by: str | None = None
    """Who submitted it (an API key's name, ``driver``), for jobs lists."""
    request_id: str | None = None
    """The HTTP request (or other caller's id) that submitted the job, for logs and traces."""
    registered: bool = False
    """The job named a registered team: its agents are provisioned as the catalog has them."""
    admin: bool = False
    """Admitted as an admin's (an admin key, a driver): no policy was applied, and none is
    when it starts again (a fork, a resume; see ``admission.readmit``). Journaled."""
    skill: SkillSpec | None = None
    """The skill version the job runs (it keeps it, whatever the registry does meanwhile)."""
    input: Any = None
    """A skill job's structured input (checked against the skill's input schema)."""
    quality: QualityReport | None = None
    """The quality gate's report on the answer, once there is one."""
    feedback: list[Feedback] = field(default_factory=list)
    """People's verdicts on the answer (kept in the journal too)."""
    waiting: dict[str, Waiting] = field(default_factory=dict)
    """A graph's interrupts waiting for a person, by interrupt id."""
    state: GraphState | None = None
    """A graph job's shared state, once its graph has ended."""
    stream_answer: bool = False
    """Its caller streams the answer: a model call whose text is the answer as it comes (the
    aggregation) streams its tokens as ``llm_delta`` events (agent: the job's orchestrator
    address). Not journaled: a resumed job sends its answer whole."""
    traceparent: str | None = None
    """The caller's OpenTelemetry span (W3C), the parent of the job's root span. Not
    journaled: a resumed job starts a trace of its own."""

    @property
    def prompt(self) -> str:
        """The job as its planner, agents and aggregator read it (see ``prompts.job_prompt``)."""
        return job_prompt(self.context)

    @property
    def asked(self) -> str:
        """What the job was asked: its request and text attachments, without the rest."""
        return asked(self.context)


def set_status(job: Job, status: JobStatus) -> None:
    """Set the job's status, keeping the dashboard's jobs-by-status gauge in step."""
    metrics.job_status(job.status, status)
    job.status = status


async def wait_until(job: Job, ready: Callable[[], bool], timeout: float | None) -> None:
    """Wait for ``ready()`` on the job's condition, at most ``timeout`` seconds."""
    if ready() or (timeout is not None and timeout <= 0):
        return
    async with job.changed:
        try:
            await asyncio.wait_for(job.changed.wait_for(ready), timeout)
        except TimeoutError:
            return


def _subtask(sub: PlannedSubtask, **fields: Any) -> SubtaskResult:
    return SubtaskResult(
        id=sub.id,
        role=sub.role,
        instructions=sub.instructions,
        depends_on=sub.depends_on,
        **fields,
    )


def from_task_result(sub: PlannedSubtask, done: TaskResult, attempt: int) -> SubtaskResult:
    """The subtask as an agent reported it."""
    return _subtask(sub, attempt=attempt, **done.model_dump(exclude={"kind", "task_id", "spans"}))


def failed(sub: PlannedSubtask, error: ErrorPayload, attempt: int) -> SubtaskResult:
    """A subtask no agent could carry out (undeliverable, or the agent answered nonsense)."""
    return _subtask(sub, status="failed", error=error, attempt=attempt)


def skipped(sub: PlannedSubtask, error: ErrorPayload | None = None) -> SubtaskResult:
    """A subtask not run: a dependency did not succeed, or the job had to stop (``error``)."""
    return _subtask(sub, status="skipped", error=error)


def job_message(
    job: Job,
    recipient: str,
    payload: LLMRequest | TaskRequest | CancelJob | JobEnded | MemoryQuery | MemoryWrite,
    *,
    attempt: int = 1,
    deadline: float | None = None,
) -> AgentMessage:
    """An envelope from the orchestrator about ``job`` (its tenant, a span of its trace).

    Its sender is the job's orchestrator shard (``orchestrator``, ``orchestrator-<k>``): the
    model calls it makes are that shard's in the usage report, and its envelopes travel
    through that shard's router shard.
    """
    return AgentMessage(
        sender=orchestrator_address(job.id),
        recipient=recipient,
        job_id=job.id,
        attempt=attempt,
        deadline=deadline,
        trace=job.trace.child(),
        tenant=job.tenant,
        user=job.context.user,
        key=job.submitted_by,
        team=unscoped(job.team.name, job.tenant),
        payload=payload,
    )


def last_event(result: JobResult) -> tuple[str, dict[str, object]]:
    """The type and data of a job's last event, as its result says how it ended."""
    kind = {"succeeded": "job_succeeded", "cancelled": "job_cancelled"}.get(
        result.status, "job_failed"
    )
    if result.error is None:
        return kind, {"error": None}
    return kind, {"error": result.error.message, "code": result.error.code.value}


async def emit(
    job: Job,
    kind: str,
    subtask_id: str | None = None,
    data: dict[str, object] | None = None,
    *,
    result: JobResult | None = None,
) -> None:
    """Append an event to the job's log (and its result, for the last one); wake waiters.

    The event is journaled first (``job.record``), so that no watcher has seen an event the
    job's next process would not have: its log goes on after it, none twice. A journal that
    fails is logged, and the job goes on (its log in this process stays whole).
    """
    async with job.changed:
        event = JobEvent.model_validate(
            {
                "job_id": job.id,
                "seq": len(job.events) + 1,
                "at": time.time(),
                "type": kind,
                "subtask_id": subtask_id,
                "data": data or {},
            }
        )
        if job.record is not None:
            try:
                job.record(event)
            except TroupeError as exc:
                log.warning("job_event_not_journaled", job_id=job.id, seq=event.seq,
                            type=kind, code=exc.code.value)  # fmt: skip
        job.events.append(event)
        if result is not None:
            job.result = result
        job.changed.notify_all()
