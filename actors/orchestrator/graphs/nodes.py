"""A graph's node runs: an agent, a team or a skill as one task of a superstep.

:class:`NodeRuns` runs the tasks of :class:`~raytroupe.actors.orchestrator.graphs.engine.GraphRun`
that are not subgraphs: an agent node's subtask (its answer sent back with its problems while
it is no valid update), a registered team or skill as a child job of the same tenant; and it
says what a node is given (its inputs, evaluated on the state). :func:`checked` checks the
state against its schema off the loop, and :func:`task_id` names a task's run, for both.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, ParamSpec, TypeVar

import structlog

from raytroupe.actors.answer_gate import gate_feedback
from raytroupe.actors.offload import offloaded
from raytroupe.actors.orchestrator.graphs.routing import Edges, failed
from raytroupe.actors.orchestrator.graphs.state import StateKeeper, render, uses_state
from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.protocols import (
    ErrorCode,
    ErrorPayload,
    JobResult,
    PlannedSubtask,
    SubtaskResult,
    TroupeError,
    WorkLimitExceeded,
)
from raytroupe.protocols.bounded import ANSWER_WORK_S
from raytroupe.protocols.expressions import ExpressionError, evaluate
from raytroupe.protocols.graph import DEFAULT_FIELD, GraphNode, GraphSpec
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphState, GraphTask

__all__ = ["NodeRuns", "RunChild", "RunSubtask", "TaskRun", "checked", "task_id"]

P = ParamSpec("P")
T = TypeVar("T")

log = structlog.get_logger("raytroupe.orchestrator")

_MAX_ID: Final = 64

RunSubtask = Callable[
    [Job, PlannedSubtask, dict[str, str], asyncio.Semaphore], Awaitable[SubtaskResult]
]
RunChild = Callable[[Job, GraphNode, str, Any, str], Awaitable[JobResult]]


@dataclass
class TaskRun:
    """One task's run in a superstep."""

    task: GraphTask
    text: str = ""
    update: GraphState = field(default_factory=dict)
    results: list[SubtaskResult] = field(default_factory=list)
    cancelled: bool = False


def task_id(namespace: str, task: GraphTask, step: int) -> str:
    """The id of ``task``'s run in superstep ``step`` (a subtask's: within ``_MAX_ID``)."""
    base = f"{task.node}.{step}" + ("" if task.index is None else f".{task.index}")
    full = f"{namespace.replace('/', '.')}{base}"
    if len(full) <= _MAX_ID:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:12]
    return f"{full[: _MAX_ID - 13]}-{digest}"


def _retry_id(base: str, attempt: int) -> str:
    suffix = f".u{attempt}"
    return base[: _MAX_ID - len(suffix)] + suffix


async def checked(
    tenant: str, check: Callable[P, tuple[T, list[str]]], *args: P.args, **kwargs: P.kwargs
) -> tuple[T, list[str]]:
    """A check of the state against its schema (the tenant's patterns), off the loop.

    Raises:
        GraphFailed: (``work_limit``) the check ran past ``ANSWER_WORK_S``.
    """
    try:
        return await offloaded(tenant, ANSWER_WORK_S, "answer_work_s", check, *args, **kwargs)
    except WorkLimitExceeded as e:
        raise failed(ErrorCode.WORK_LIMIT, e.message) from None


class NodeRuns:
    """The agent, team and skill nodes' runs of one graph of one job (its ``GraphRun``'s).

    Args:
        job: the job the graph is run for.
        graph: the graph (a subgraph's own, under ``namespace``).
        namespace: the graph's namespace in the job (a subgraph's; ``""`` at the top).
        keeper: the state's schema and reducers.
        edges: the graph's edges (the names an input expression is evaluated on).
        slots: the agent node runs at once, at most (the team's ``max_parallel``).
        run_subtask: dispatches one agent node run (journaled, retried, within slots).
        run_child: runs a team or skill node as a child job.
    """

    def __init__(
        self,
        job: Job,
        graph: GraphSpec,
        namespace: str,
        keeper: StateKeeper,
        edges: Edges,
        *,
        slots: asyncio.Semaphore,
        run_subtask: RunSubtask,
        run_child: RunChild,
    ) -> None:
        self._job, self._graph, self._ns = job, graph, namespace
        self._keeper, self._edges, self._slots = keeper, edges, slots
        self._run_subtask, self._run_child = run_subtask, run_child

    async def run_agent(
        self, ran: TaskRun, node: GraphNode, point: GraphCheckpoint, step: int, resume: Any
    ) -> None:
        """An agent's answer, turned into an update: sent back with its problems while invalid.

        ``{task}`` is what the job was asked; the agent sees the rest of its context beside.
        """
        base = task_id(self._ns, ran.task, step)
        instructions = render(
            node.instructions,
            task=self._job.asked,
            state=point.state,
            item=ran.task.item,
            resume=resume,
        )
        said = self._keeper.answer_format(node)
        if said is not None:
            instructions = f"{instructions}\n\n{said}"
        inputs = self._inputs(node, point.state, ran.task, resume)
        problems: list[str] = []
        for attempt in range(1, node.max_update_attempts + 1):
            sub_id = base if attempt == 1 else _retry_id(base, attempt)
            sub = PlannedSubtask(id=sub_id, role=node.role or "", instructions=instructions)
            result = self._job.done.get(sub_id)
            if result is None or result.status != "succeeded":  # else: done before a restart
                result = await self._run_subtask(self._job, sub, inputs, self._slots)
            ran.results.append(result)
            if result.status != "succeeded":
                error = result.error or ErrorPayload(code=ErrorCode.JOB_FAILED, message="failed")
                raise failed(error.code, f"node {node.id!r} failed: {error.message}", node.id)
            ran.text = result.output
            ran.update, problems = await checked(
                self._job.tenant, self._checked_update, node, result.output, point.state
            )
            if not problems:
                return
            log.info(
                "graph_update_rejected", job_id=self._job.id, node=node.id, problems=problems[:3]
            )
            inputs = {
                **inputs,
                "your rejected answer": result.output,
                "why it was rejected": gate_feedback(problems),
            }
        raise failed(
            ErrorCode.QUALITY_GATE,
            f"node {node.id!r} gave no valid update in {node.max_update_attempts} tries: "
            f"{'; '.join(problems)}",
            node.id,
            problems=problems,
        )

    def _checked_update(
        self, node: GraphNode, text: str, state: GraphState
    ) -> tuple[GraphState, list[str]]:
        update, problems = self._keeper.update(node, text)
        if not problems:
            _, problems = self._keeper.apply(state, [update])
        return update, problems

    def given(self, node: GraphNode, state: GraphState, task: GraphTask) -> GraphState:
        """The node's ``inputs``, each expression evaluated on the state."""
        given: GraphState = {}
        for name, expression in node.inputs.items():
            try:
                given[name] = evaluate(expression, self._edges.names(state, task))
            except ExpressionError as e:
                why = f"input {name!r} of {node.id!r} failed: {e}"
                raise failed(ErrorCode.INVALID_INPUT, why, node.id) from None
        return given

    def _inputs(
        self, node: GraphNode, state: GraphState, task: GraphTask, resume: Any
    ) -> dict[str, str]:
        """What an agent node is given beside its prompt: the state, unless placed in it."""
        inputs: dict[str, str] = {}
        if node.inputs:  # what it asks for, instead of the whole state
            given = self.given(node, state, task)
            inputs |= {name: _text(value) for name, value in given.items() if value is not None}
        elif self._graph.state is None:  # the older contract: the previous node's text
            if state.get(DEFAULT_FIELD):
                inputs["previous output"] = str(state[DEFAULT_FIELD])
        elif not uses_state(node.instructions):
            inputs["state"] = json.dumps(state, ensure_ascii=False, default=str)
        if task.index is not None and "{item}" not in node.instructions:
            inputs["item"] = _text(task.item)
        if resume is not None and "{resume}" not in node.instructions:
            inputs["a person's answer"] = _text(resume)
        return inputs

    async def run_child(
        self, ran: TaskRun, node: GraphNode, point: GraphCheckpoint, step: int, resume: Any
    ) -> None:
        """A registered team or skill as the node: a child job of the same tenant.

        ``{task}`` is the job's whole prompt (its history and examples too): the child job's
        request is all the child is given.
        """
        task = render(
            node.instructions or "{task}",
            task=self._job.prompt,
            state=point.state,
            item=ran.task.item,
            resume=resume,
        )
        given = self.given(node, point.state, ran.task) or None
        key = f"{self._ns}{task_id(self._ns, ran.task, step)}"
        try:
            result = await self._run_child(self._job, node, task, given, key)
        except TroupeError as e:  # refused at the door: a policy, an unknown team, too deep
            why = f"node {node.id!r} could not start its job: {e}"
            raise failed(e.code, why, node.id) from None
        sub = PlannedSubtask(
            id=task_id(self._ns, ran.task, step),
            role=node.team or "skill",
            instructions=task[:2000] or node.id,
        )
        ran.results.append(
            SubtaskResult(
                id=sub.id,
                role=sub.role,
                instructions=sub.instructions,
                status="succeeded" if result.status == "succeeded" else "failed",
                output=result.answer,
                error=result.error,
                usage=result.usage,
                agent=f"job:{result.job_id}",
            )
        )
        if result.status != "succeeded":
            why = result.error.message if result.error else result.status
            raise failed(
                result.error.code if result.error else ErrorCode.JOB_FAILED,
                f"node {node.id!r} (job {result.job_id}) {result.status}: {why}",
                node.id,
                child=result.job_id,
            )
        ran.text = result.answer
        ran.update, problems = self._checked_update(node, result.answer, point.state)
        if problems:
            raise failed(
                ErrorCode.QUALITY_GATE,
                f"node {node.id!r}'s answer is no valid update: {'; '.join(problems)}",
                node.id,
                problems=problems,
            )


def _text(value: Any) -> str:
    """A value as an input's text: itself, a list of texts one per line, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(f"- {v}" for v in value)
    return json.dumps(value, ensure_ascii=False, default=str)
