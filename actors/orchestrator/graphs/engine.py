"""The graph engine: supersteps over shared state, checkpointed, pausable, resumable.

One :class:`GraphRun` walks one graph of one job (a subgraph node starts another, under its
own namespace). A superstep runs every task due at once (up to the team's ``max_parallel``),
turns each answer into an update (sent back to its node with the problems while invalid),
applies the updates in task order by the reducers, follows the edges of the nodes that ran
and writes a checkpoint. Work done before a restart is not done again: the checkpoint says
which superstep is next, and a node run that finished inside it is in the job's journal.
An agent, team or skill node runs in :mod:`.nodes`; a subgraph runs here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from raytroupe.actors.offload import offloaded
from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk, first_checkpoint
from raytroupe.actors.orchestrator.graphs.nodes import (
    NodeRuns,
    RunChild,
    RunSubtask,
    TaskRun,
    checked,
    task_id,
)
from raytroupe.actors.orchestrator.graphs.routing import Edges, GraphFailed, failed
from raytroupe.actors.orchestrator.graphs.state import StateKeeper
from raytroupe.actors.orchestrator.graphs.timers import Timers
from raytroupe.actors.orchestrator.jobs import Job, emit, skipped
from raytroupe.protocols import (
    ErrorCode,
    ErrorPayload,
    InvalidInput,
    PlannedSubtask,
    SubtaskResult,
    WorkLimitExceeded,
)
from raytroupe.protocols.bounded import ANSWER_WORK_S, EDGES_WORK_S
from raytroupe.protocols.graph import GraphNode, GraphSpec
from raytroupe.protocols.graph_checkpoints import (
    GraphCheckpoint,
    GraphInterrupt,
    GraphState,
    GraphTask,
)

__all__ = ["GraphHost", "GraphOutcome", "GraphRun", "graph_answer"]

log = structlog.get_logger("raytroupe.orchestrator")

MAX_DEPTH: Final = 4
"""Subgraphs within subgraphs, at most."""


@dataclass(frozen=True)
class GraphHost:
    """What a graph run needs of the orchestrator."""

    run_subtask: RunSubtask
    """Dispatch one agent node run (the dispatcher: journaled, retried, within slots)."""
    run_child: RunChild
    """Run a team or skill node as a child job: (job, node, task, input, key) -> its result."""
    desk: GraphDesk
    """Checkpoints, and where paused graphs wait for people."""

    @property
    def store(self) -> CheckpointStore:
        """Where checkpoints are kept."""
        return self.desk.store


@dataclass
class GraphOutcome:
    """Where a graph run ended."""

    state: GraphState
    last: str
    results: list[SubtaskResult] = field(default_factory=list)
    error: ErrorPayload | None = None


class GraphRun:
    """One graph of one job, from its last checkpoint to its end (or its first failure)."""

    def __init__(self, host: GraphHost, job: Job, graph: GraphSpec, namespace: str = "") -> None:
        self._host, self._job, self._graph, self._ns = host, job, graph, namespace
        self._nodes = {n.id: n for n in graph.nodes}
        self._keeper = StateKeeper(graph)
        self._slots = asyncio.Semaphore(job.team.max_parallel)
        self._edges = Edges(graph, job.asked, job.team.max_subtasks)
        self._timers = Timers(job, graph, self._edges, host.store, namespace)
        self._runs = NodeRuns(
            job, graph, namespace, self._keeper, self._edges, slots=self._slots,
            run_subtask=host.run_subtask, run_child=host.run_child,
        )  # fmt: skip

    async def first(self, given: Mapping[str, Any] | None = None) -> GraphCheckpoint:
        """The checkpoint before the first superstep (``given``: a subgraph's inputs).

        Its state is checked against the schema off the loop, within ``ANSWER_WORK_S``.
        """
        try:
            return await offloaded(
                self._job.tenant, ANSWER_WORK_S, "answer_work_s",
                first_checkpoint, self._job.id, self._graph, given, self._ns, self._keeper,
            )  # fmt: skip
        except InvalidInput as e:  # WorkLimitExceeded too
            raise GraphFailed(ErrorPayload.from_exception(e)) from None

    async def run(self, given: Mapping[str, Any] | None = None) -> GraphOutcome:
        """Run from the last checkpoint (or the start) to the end; never raises a job's error."""
        results: list[SubtaskResult] = []
        point = self._host.store.latest(self._job.id, self._ns)
        try:
            if point is None:
                point = await self.first(given)
                self._host.store.put(point)
            while True:
                if point.timer is not None:
                    point = await self._timers.slept(point)
                    continue
                if point.interrupt is not None:
                    point = await self._resumed(point)
                    continue
                if not point.next:
                    return GraphOutcome(point.state, point.last, results)
                if point.step >= self._graph.max_steps:
                    due = ", ".join(t.node for t in point.next)
                    raise failed(
                        ErrorCode.ITERATION_LIMIT,
                        f"the graph took {self._graph.max_steps} supersteps without reaching "
                        f"its end (next: {due})",
                        point.next[0].node,
                        next=due,
                    )
                waiting = self._timers.sleep_before(point) or self._pause_before(point)
                if waiting is not None:
                    point = waiting
                    continue
                point = await self._superstep(point, results)
        except GraphFailed as failure:
            state = point.state if point is not None else {}
            last = point.last if point is not None else ""
            return GraphOutcome(state, last, results, failure.error)

    # -- interrupts ---------------------------------------------------------------------

    def _interrupt(self, step: int, node: str, when: str) -> GraphInterrupt:
        return GraphInterrupt.model_validate(
            {
                "id": f"{self._ns}{step}/{node}/{when}",
                "node": node,
                "when": when,
                "namespace": self._ns,
            }
        )

    def _pause_before(self, point: GraphCheckpoint) -> GraphCheckpoint | None:
        """The checkpoint that pauses before a node due now, if one is marked so."""
        for task in point.next:
            node = self._nodes[task.node]
            if node.interrupt == "before" and task.node not in point.resumed:
                paused = point.model_copy(
                    update={
                        "interrupt": self._interrupt(point.step + 1, task.node, "before"),
                        "at": time.time(),
                    }
                )
                self._host.store.put(paused)
                return paused
        return None

    async def _resumed(self, point: GraphCheckpoint) -> GraphCheckpoint:
        """Wait for the person; the checkpoint with their answer applied."""
        interrupt = point.interrupt
        assert interrupt is not None  # noqa: S101 - the caller checked
        node = self._nodes[interrupt.node]
        value, edit = await self._host.desk.wait(
            self._job, interrupt, point.state, self._keeper, node.resume_field
        )
        state, problems = await checked(
            self._job.tenant, self._keeper.resumed, point.state, value, edit, node.resume_field
        )
        if problems:
            raise failed(
                ErrorCode.INVALID_INPUT,
                f"the resume of {node.id!r} left the state invalid: {'; '.join(problems)}",
                node.id,
                problems=problems,
            )
        update: GraphState = {"interrupt": None, "state": state, "at": time.time()}
        if interrupt.when == "before":
            update["resumed"] = {**point.resumed, node.id: value}
        else:
            ran = [(GraphTask(node=n), t) for n, t in point.routes]
            update["next"], update["joins"] = await self._routed(ran, state, point.joins)
            update["routes"] = ()
        resumed = point.model_copy(update=update)
        self._host.store.put(resumed)
        return resumed

    # -- a superstep ----------------------------------------------------------------------

    async def _superstep(
        self, point: GraphCheckpoint, results: list[SubtaskResult]
    ) -> GraphCheckpoint:
        step = point.step + 1
        runs = [TaskRun(task) for task in point.next]
        await self._run_all(runs, point, step)
        for ran in runs:
            results.extend(ran.results)
        ran_now = [r for r in runs if not r.cancelled]
        state, problems = await checked(
            self._job.tenant, self._keeper.apply, point.state, [r.update for r in ran_now]
        )
        if problems:
            names = ", ".join(r.task.node for r in ran_now)
            raise failed(
                ErrorCode.QUALITY_GATE,
                f"the updates of {names} together left the state invalid: {'; '.join(problems)}",
                ran_now[0].task.node,
                problems=problems,
            )
        last = ran_now[-1].text if ran_now else point.last
        after = next((r for r in ran_now if self._nodes[r.task.node].interrupt == "after"), None)
        update: GraphState = {
            "step": step,
            "at": time.time(),
            "state": state,
            "last": last,
            "resumed": {},
            "woken": (),
        }
        if after is not None:
            update |= {
                "next": (),
                "joins": point.joins,
                "routes": tuple((r.task.node, r.text) for r in ran_now),
                "interrupt": self._interrupt(step, after.task.node, "after"),
            }
        else:
            texts = [(r.task, r.text) for r in ran_now]
            update["next"], update["joins"] = await self._routed(texts, state, point.joins)
            same = state == point.state and last == point.last
            if same and update["next"] == point.next and point.step > 0:
                node = point.next[0].node
                raise failed(
                    ErrorCode.ITERATION_LIMIT,
                    f"node {node!r} would run again on the same state: the graph is in a "
                    "loop that changes nothing",
                    node,
                )
        new = point.model_copy(update=update)
        self._host.store.put(new)
        log.info(
            "graph_step",
            job_id=self._job.id,
            namespace=self._ns,
            step=step,
            ran=[r.task.node for r in ran_now],
            next=[t.node for t in new.next],
        )
        await emit(
            self._job,
            "graph_step",
            data={
                "namespace": self._ns,
                "step": step,
                "ran": [r.task.node for r in ran_now],
                "next": [t.node for t in new.next],
                "interrupt": new.interrupt.id if new.interrupt else None,
            },
        )
        return new

    async def _run_all(self, runs: list[TaskRun], point: GraphCheckpoint, step: int) -> None:
        """Run a superstep's tasks at once; a join of the first k cancels the other feeders."""
        tasks = {asyncio.create_task(self._run_task(ran, point, step)): ran for ran in runs}
        arrived = dict(point.joins)
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    finished.result()  # a node's failure fails the superstep
                    for join in self._edges.feeds(tasks[finished].task.node):
                        arrived[join] = arrived.get(join, 0) + 1
                        wanted = self._nodes[join].join
                        if isinstance(wanted, int) and arrived[join] >= wanted:
                            pending = await self._cut(pending, tasks, join, step)
        finally:
            for task in tasks:
                task.cancel()

    async def _cut(
        self,
        pending: set[asyncio.Task[None]],
        tasks: dict[asyncio.Task[None], TaskRun],
        join: str,
        step: int,
    ) -> set[asyncio.Task[None]]:
        """Cancel the runs still heading for ``join``; the runs left to wait for."""
        cut = {t for t in pending if join in self._edges.feeds(tasks[t].task.node)}
        for task in cut:
            task.cancel()
            ran = tasks[task]
            ran.cancelled = True
        await asyncio.gather(*cut, return_exceptions=True)
        for task in cut:
            ran = tasks[task]
            sub = PlannedSubtask(
                id=task_id(self._ns, ran.task, step),
                role="graph",
                instructions=f"node {ran.task.node}",
            )
            error = ErrorPayload(
                code=ErrorCode.CANCELLED, message=f"join {join!r} had its first branches"
            )
            ran.results.append(skipped(sub, error))
            await emit(self._job, "subtask_finished", sub.id, {"status": "skipped"})
        return pending - cut

    async def _run_task(self, ran: TaskRun, point: GraphCheckpoint, step: int) -> None:
        node = self._nodes[ran.task.node]
        resume = point.resumed.get(node.id)
        match node.kind:
            case "graph":
                await self._run_subgraph(ran, node, point, step)
            case "team" | "skill":
                await self._runs.run_child(ran, node, point, step, resume)
            case "agent":
                await self._runs.run_agent(ran, node, point, step, resume)

    async def _routed(
        self, ran: Sequence[tuple[GraphTask, str]], state: GraphState, joins: Mapping[str, int]
    ) -> tuple[tuple[GraphTask, ...], dict[str, int]]:
        """The next superstep's tasks: the ``when`` edges (the tenant's patterns), off the loop.

        Raises:
            GraphFailed: a condition or map failed, or (``work_limit``) the edges' patterns
                ran past ``EDGES_WORK_S`` on the texts.
        """
        try:
            return await offloaded(
                self._job.tenant, EDGES_WORK_S, "edges_work_s", self._edges.routed,
                ran, state, joins,
            )  # fmt: skip
        except WorkLimitExceeded as e:
            raise failed(ErrorCode.WORK_LIMIT, e.message) from None

    async def _run_subgraph(
        self, ran: TaskRun, node: GraphNode, point: GraphCheckpoint, step: int
    ) -> None:
        assert node.graph is not None  # noqa: S101 - its kind says so
        namespace = (
            f"{self._ns}{node.id}.{step}"
            + ("" if ran.task.index is None else f".{ran.task.index}")
            + "/"
        )
        if namespace.count("/") > MAX_DEPTH:
            why = f"subgraphs nest deeper than {MAX_DEPTH}"
            raise failed(ErrorCode.INVALID_INPUT, why, node.id)
        given = self._runs.given(node, point.state, ran.task)
        child = GraphRun(self._host, self._job, node.graph, namespace)
        outcome = await child.run(given)
        ran.results.extend(outcome.results)
        if outcome.error is not None:
            raise GraphFailed(outcome.error)
        ran.text = outcome.last
        ran.update = {mine: outcome.state.get(theirs) for mine, theirs in node.outputs.items()}
        _, problems = await checked(self._job.tenant, self._keeper.apply, point.state, [ran.update])
        if problems:
            raise failed(
                ErrorCode.QUALITY_GATE,
                f"the outputs of subgraph {node.id!r} do not fit the state: {'; '.join(problems)}",
                node.id,
                problems=problems,
            )


def graph_answer(graph: GraphSpec, outcome: GraphOutcome) -> str:
    """The job's answer: the state's ``answer`` field (as text), or the last node's text."""
    if graph.answer is None:
        return outcome.last
    value = outcome.state.get(graph.answer)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
