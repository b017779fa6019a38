"""A job as an A2A task: its state and question, its answer, its updates, a message answering it.

What :mod:`raytroupe.deployments.a2a`'s handler says of a job, read through the declared
operations for the caller (``At``); the mapping of states is in that module's docstring.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, Final

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import (
    Artifact,
    Message,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
)

from raytroupe.deployments.openai_answers import _AnswerTokens
from raytroupe.deployments.openai_messages import _target
from raytroupe.protocols import (
    Conflict,
    ErrorCode,
    InvalidInput,
    JobEvent,
    JobNotFound,
    SkillNotFound,
    TeamNotFound,
    TroupeError,
)
from raytroupe.protocols.http import JobView
from raytroupe.protocols.job_order import JobOrder
from raytroupe.protocols.sessions import checked_session_id
from raytroupe.runtime.operations import At, job_reads, jobs, sessions, submit

__all__ = [
    "ENDS", "as_a2a", "context_of", "followed_to_pause", "started", "task_of", "updates",
]  # fmt: skip

_STATES: Final[dict[str, TaskState]] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "planning": TaskState.TASK_STATE_WORKING,
    "running": TaskState.TASK_STATE_WORKING,
    "aggregating": TaskState.TASK_STATE_WORKING,
    "awaiting_approval": TaskState.TASK_STATE_INPUT_REQUIRED,
    "awaiting_input": TaskState.TASK_STATE_INPUT_REQUIRED,
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
ENDS: Final = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)
_PAUSES: Final = frozenset({"approval_requested", "graph_interrupted"})
_ANSWER: Final = "answer"
_OUTPUT: Final = "output"


class as_a2a:  # noqa: N801 - used as a context manager, like contextlib's
    """raytroupe's typed errors as the A2A errors that mean the same."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _tb: Any
    ) -> None:
        if exc is None or isinstance(exc, A2AError) or not isinstance(exc, TroupeError):
            return
        data = {"code": exc.code.value}
        if isinstance(field := exc.detail.get("field"), str):
            data["field"] = field
        if isinstance(exc, JobNotFound):
            raise TaskNotFoundError(exc.message, data) from None
        if isinstance(exc, InvalidInput | TeamNotFound | SkillNotFound):
            raise InvalidParamsError(exc.message, data) from None
        if exc.code is ErrorCode.INTERNAL:
            raise InternalError(exc.message, data) from None
        raise InvalidRequestError(exc.message, data) from None


async def started(at: At, target: str, message: Message) -> tuple[str, str, int]:
    """The job ``message`` starts, or the waiting one it answers.

    (job id, context id, the seq of its last event before: what follows is news).
    """
    if message.task_id:
        context_id, events = await context_of(at, message.task_id)
        await _answered(at, message.task_id, message)
        return message.task_id, context_id, events[-1].seq if events else 0
    texts = [t for t in get_text_parts(message.parts) if t.strip()]
    data = get_data_parts(message.parts)
    team, skill = _target(target)
    if len(data) > 1:
        raise InvalidInput("a message gives a skill one data part (its input), not several")
    given = data[0] if data else None
    if given is not None and skill is None:
        raise InvalidInput("only a skill takes a data part (its input); a team takes text")
    if not texts and given is None:
        raise InvalidInput("the message has no text part (the task) and no data part")
    context_id = checked_session_id(message.context_id or f"a2a-{uuid.uuid4().hex}")
    await sessions.create_session.run_for(at, {"session_id": context_id})
    order = JobOrder(
        task="\n".join(texts), team=team, skill=skill, input=given, session=context_id,
        stream_answer=True,
    )  # fmt: skip
    return await submit.start(at, order), context_id, 0


async def _answered(at: At, job_id: str, message: Message) -> None:
    """``message`` as the answer the job waits for (a graph's input, or a decision)."""
    text = "\n".join(get_text_parts(message.parts)).strip()
    data = get_data_parts(message.parts)
    held = await jobs.approvals.run_for(at, {"job_id": job_id})
    if held:
        approved, reason = _decision(text, data[0] if data else None)
        decide = jobs.approve if approved else jobs.reject
        arguments = {"job_id": job_id, "approval_id": held[0].approval_id, "reason": reason}
        await decide.run_for(at, arguments)
        return
    waits = [w for w in await jobs.interrupts.run_for(at, {}) if w.job_id == job_id]
    if not waits:
        view = await job_reads.job.run_for(at, {"job_id": job_id})
        raise Conflict(
            f"task {job_id} waits for no input ({view.status}): a new message without its "
            "taskId starts a new task",
            job_id=job_id,
        )
    value = data[0] if data else text
    arguments = {"job_id": job_id, "value": value, "interrupt": waits[0].interrupt.id}
    await jobs.resume.run_for(at, arguments)


def _decision(text: str, data: Any) -> tuple[bool, str]:
    """(approved, reason) from a data part ``{"approved", "reason"}`` or ``approve``/``reject``."""
    if isinstance(data, dict) and isinstance(data.get("approved"), bool):
        reason = data.get("reason")
        return data["approved"], reason if isinstance(reason, str) else ""
    word, _, rest = text.partition(" ")
    match word.lower().rstrip(".,:!"):
        case "approve" | "approved" | "yes":
            return True, rest.strip()
        case "reject" | "rejected" | "no":
            return False, rest.strip() or "rejected over A2A"
    raise InvalidInput(
        "the task waits for a decision on a tool call: say 'approve' or 'reject <reason>' "
        '(or send a data part {"approved": true|false, "reason": "..."})'
    )


async def context_of(at: At, job_id: str) -> tuple[str, list[JobEvent]]:
    """The job's context id (its session, or the job's own id) and its events so far."""
    stream = await job_reads.events.run_for(at, {"job_id": job_id, "follow": False})
    events = [e async for e in stream if e is not None]
    first = events[0].data.get("session") if events else None
    return (first if isinstance(first, str) else job_id), events


async def followed_to_pause(at: At, job_id: str, after: int) -> None:
    """Follow the job's events after ``after`` until it ends or waits for a person."""
    stream = await job_reads.events.run_for(at, {"job_id": job_id, "after": after})
    async for event in stream:
        if event is None:
            continue
        if event.terminal or (event.type in _PAUSES and await _waits(at, job_id)):
            break


async def _waits(at: At, job_id: str) -> bool:
    view = await job_reads.job.run_for(at, {"job_id": job_id})
    return view.status in {"awaiting_approval", "awaiting_input"}


async def task_of(at: At, job_id: str, context_id: str) -> Task:
    """The job as an A2A task: its state, its question or error, its answer."""
    view = await job_reads.job.run_for(at, {"job_id": job_id})
    summary = await job_reads.summary.run_for(at, {"job_id": job_id})
    asked = Message(
        message_id=f"{job_id}-task", role=Role.ROLE_USER, task_id=job_id, context_id=context_id,
        parts=[new_text_part(view.result.task if view.result else summary.task)],
    )  # fmt: skip
    status = await _status(at, view, context_id)
    task = Task(id=job_id, context_id=context_id, status=status, history=[asked])
    if view.result is not None and view.result.status == "succeeded":
        task.artifacts.extend(_answer(view))
    return task


async def _status(at: At, view: JobView, context_id: str) -> TaskStatus:
    """The task's status: its state, and a message saying what is asked or what failed."""
    state = _STATES[view.status]
    said = ""
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        said = await _asked(at, view.id)
    elif view.result is not None and view.result.error is not None:
        said = f"{view.result.error.code.value}: {view.result.error.message}"
    status = TaskStatus(state=state)
    status.timestamp.GetCurrentTime()
    if said:
        status.message.CopyFrom(_agent_says(view.id, context_id, said, f"{view.id}-status"))
    return status


async def _asked(at: At, job_id: str) -> str:
    """What the waiting job asks a person."""
    held = await jobs.approvals.run_for(at, {"job_id": job_id})
    if held:
        call = held[0]
        return (
            f"approve or reject: agent {call.agent} would call {call.tool} with "
            f"{call.arguments}. Answer 'approve' or 'reject <reason>'."
        )
    waits = [w for w in await jobs.interrupts.run_for(at, {}) if w.job_id == job_id]
    if waits:
        wait = waits[0].interrupt
        return f"the graph waits {wait.when} node {wait.node!r} for input: send the value"
    return "the task waits for a person"


def _agent_says(job_id: str, context_id: str, text: str, message_id: str) -> Message:
    return Message(
        message_id=message_id, role=Role.ROLE_AGENT, task_id=job_id, context_id=context_id,
        parts=[new_text_part(text)],
    )  # fmt: skip


def _answer(view: JobView) -> list[Artifact]:
    """The answer (text) and the standard output envelope (data), as two artifacts."""
    result = view.result
    if result is None:  # pragma: no cover - a succeeded job has a result
        return []
    said = [Artifact(artifact_id=_ANSWER, name=_ANSWER, parts=[new_text_part(result.answer)])]
    if result.output is not None:
        output = result.output.model_dump(mode="json")
        part = new_data_part(output, media_type="application/json")
        said.append(Artifact(artifact_id=_OUTPUT, name=_OUTPUT, parts=[part]))
    return said


async def updates(
    at: At, job_id: str, context_id: str, after: int
) -> AsyncIterator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """The job's events after ``after`` as A2A updates, until it ends or waits.

    A typed error while following it ends the stream with the A2A error that means the same.
    """
    with as_a2a():
        async for update in _updates(at, job_id, context_id, after):
            yield update


async def _updates(
    at: At, job_id: str, context_id: str, after: int
) -> AsyncIterator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    tokens = _AnswerTokens(job_id)
    streamed = False
    stream = await job_reads.events.run_for(at, {"job_id": job_id, "after": after})
    async for event in stream:
        if event is None:
            continue
        if pieces := tokens.take(event):
            for piece in pieces:
                yield _chunk(job_id, context_id, piece, append=streamed, last=False)
                streamed = True
            continue
        if event.terminal:
            view = await job_reads.job.run_for(at, {"job_id": job_id})
            for update in _ended(view, context_id, tokens if streamed else None):
                yield update
            yield TaskStatusUpdateEvent(
                task_id=job_id, context_id=context_id, status=await _status(at, view, context_id)
            )
            return
        if event.type in _PAUSES and await _waits(at, job_id):
            view = await job_reads.job.run_for(at, {"job_id": job_id})
            status = await _status(at, view, context_id)
            yield TaskStatusUpdateEvent(task_id=job_id, context_id=context_id, status=status)
            return
        if said := _step(event):
            status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
            status.timestamp.GetCurrentTime()
            status.message.CopyFrom(_agent_says(job_id, context_id, said, f"{job_id}-{event.seq}"))
            yield TaskStatusUpdateEvent(task_id=job_id, context_id=context_id, status=status)


def _step(event: JobEvent) -> str:
    """What a step of the job says to a caller following it ('' for most records)."""
    sid = event.subtask_id or ""
    match event.type:
        case "plan_ready":
            listed = event.data.get("subtasks")
            count = len(listed) if isinstance(listed, list) else 0
            return f"planned {count} subtask(s)" if count else "planned"
        case "subtask_started":
            return f"subtask {sid} started"
        case "subtask_finished":
            return f"subtask {sid} finished"
        case "job_aggregating":
            return "writing the answer"
        case "graph_resumed" | "approval_decided":
            return event.type.replace("_", " ")
    return ""


def _chunk(
    job_id: str, context_id: str, text: str, *, append: bool, last: bool
) -> TaskArtifactUpdateEvent:
    artifact = Artifact(artifact_id=_ANSWER, name=_ANSWER, parts=[new_text_part(text)])
    return TaskArtifactUpdateEvent(
        task_id=job_id, context_id=context_id, artifact=artifact, append=append, last_chunk=last
    )


def _ended(
    view: JobView, context_id: str, tokens: _AnswerTokens | None
) -> list[TaskArtifactUpdateEvent]:
    """The answer's artifacts once the job has succeeded: what had not streamed, then the rest."""
    result = view.result
    if result is None or result.status != "succeeded":
        return []
    rest = None if tokens is None else tokens.rest(result.answer)
    if rest is None:  # nothing streamed, or a check replaced what did: the whole answer
        said = [_chunk(view.id, context_id, result.answer, append=False, last=True)]
    else:
        said = [_chunk(view.id, context_id, rest, append=True, last=True)]
    for artifact in _answer(view)[1:]:
        said.append(TaskArtifactUpdateEvent(
            task_id=view.id, context_id=context_id, artifact=artifact, last_chunk=True
        ))  # fmt: skip
    return said
