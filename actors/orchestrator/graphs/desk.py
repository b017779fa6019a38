"""Where paused graphs wait for people, and what people may do to a graph job.

A graph paused at an interrupt reports ``awaiting_input`` with its state; a resume (a value,
a state edit, or neither) is checked against the state's schema, journaled, then wakes the
graph. A restarted orchestrator resumes the job to the same interrupt and finds the
journaled answer, or waits again. Checkpoints can be listed, and a new job started from any
of them with an edited state (a fork).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raytroupe.actors.offload import on_loop
from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore, Resume
from raytroupe.actors.orchestrator.graphs.state import StateKeeper
from raytroupe.actors.orchestrator.jobs import Job, emit, set_status
from raytroupe.protocols import Conflict, InvalidInput
from raytroupe.protocols.bounded import ANSWER_WORK_S
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.graph_checkpoints import (
    GraphCheckpoint,
    GraphInterrupt,
    GraphState,
    GraphTask,
)

__all__ = ["GraphDesk", "Waiting", "first_checkpoint"]


def first_checkpoint(
    job_id: str,
    graph: GraphSpec,
    given: Mapping[str, Any] | None = None,
    namespace: str = "",
    keeper: StateKeeper | None = None,
) -> GraphCheckpoint:
    """The checkpoint before a graph's first superstep: its initial state with ``given``.

    Raises:
        InvalidInput: ``given`` (a job's input, a subgraph's inputs) does not fit the state.
    """
    keeper = keeper or StateKeeper(graph)
    state, problems = keeper.edit(keeper.initial(), given or {})
    if problems:
        raise InvalidInput(
            f"the graph's first state is invalid: {'; '.join(problems)}",
            field="input",
            problems=problems,
        )
    return GraphCheckpoint(
        job_id=job_id,
        namespace=namespace,
        step=0,
        at=time.time(),
        state=state,
        next=tuple(GraphTask(node=n) for n in graph.starts),
    )


@dataclass
class Waiting:
    """One interrupt a job's graph waits at."""

    interrupt: GraphInterrupt
    state: GraphState
    keeper: StateKeeper
    resume_field: str | None
    answered: asyncio.Future[Resume]


class GraphDesk:
    """The orchestrator's side of graph checkpoints, interrupts and forks."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    async def wait(
        self,
        job: Job,
        interrupt: GraphInterrupt,
        state: GraphState,
        keeper: StateKeeper,
        resume_field: str | None,
    ) -> Resume:
        """The answer to ``interrupt``: journaled already, or once a person gives it."""
        known = self.store.resumed(job.id, interrupt.id)
        if known is not None:
            return known
        future: asyncio.Future[Resume] = asyncio.get_running_loop().create_future()
        job.waiting[interrupt.id] = Waiting(interrupt, state, keeper, resume_field, future)
        set_status(job, "awaiting_input")
        await emit(
            job,
            "graph_interrupted",
            data={
                "interrupt": interrupt.model_dump(mode="json"),
                "state": state,
            },
        )
        try:
            return await future
        finally:
            job.waiting.pop(interrupt.id, None)
            if not job.waiting and job.status == "awaiting_input":
                set_status(job, "running")

    async def resume(
        self, job: Job, value: Any, edit: GraphState | None, interrupt_id: str | None
    ) -> GraphInterrupt:
        """Answer an interrupt the job waits at (the only one, if ``interrupt_id`` is None).

        Raises:
            Conflict: the job waits at no interrupt (or not at ``interrupt_id``), or
                several and none was named.
            InvalidInput: the edit or the value would leave the state invalid
                (``detail['problems']``); nothing was recorded.
            WorkLimitExceeded: checking it took over ``ANSWER_WORK_S``; nothing was recorded.
            Busy: the tenant has as many checks in hand and waiting as it may.
        """
        waiting = self._waiting(job, interrupt_id)
        # the edit against the state's schema (the tenant's patterns): off the loop, in time
        _, problems = await on_loop().run(
            job.tenant, ANSWER_WORK_S, "answer_work_s",
            waiting.keeper.resumed, waiting.state, value, edit, waiting.resume_field,
        )  # fmt: skip
        if problems:
            raise InvalidInput(
                f"the resume would leave the graph's state invalid: {'; '.join(problems)}",
                field="state",
                problems=problems,
            )
        if not self.store.resume(job.id, waiting.interrupt.id, value, edit):
            raise Conflict(f"interrupt {waiting.interrupt.id!r} was answered already")
        if not waiting.answered.done():
            waiting.answered.set_result((value, edit))
        await emit(
            job,
            "graph_resumed",
            data={
                "interrupt": waiting.interrupt.id,
                "node": waiting.interrupt.node,
                "when": waiting.interrupt.when,
                "value": value,
                "state": edit,
                "at": time.time(),
            },
        )
        return waiting.interrupt

    @staticmethod
    def _waiting(job: Job, interrupt_id: str | None) -> Waiting:
        if interrupt_id is not None:
            waiting = job.waiting.get(interrupt_id)
            if waiting is None:
                raise Conflict(
                    f"job {job.id} is not waiting at interrupt {interrupt_id!r}",
                    waiting=sorted(job.waiting),
                )
            return waiting
        if not job.waiting:
            raise Conflict(f"job {job.id} is not waiting for input (status {job.status})")
        if len(job.waiting) > 1:
            raise Conflict(
                f"job {job.id} waits at {len(job.waiting)} interrupts: name one",
                waiting=sorted(job.waiting),
            )
        return next(iter(job.waiting.values()))

    def start(self, job_id: str, graph: GraphSpec, given: Mapping[str, Any]) -> None:
        """Record a graph job's first checkpoint, with its input in the state.

        Raises:
            InvalidInput: the input does not fit the state (the front desk checked it).
        """
        if self.store.latest(job_id) is None:  # a fork's first is its own
            self.store.put(first_checkpoint(job_id, graph, given))

    def checkpoints(self, job_id: str) -> list[GraphCheckpoint]:
        """Every checkpoint of the job (none for a job that is not a graph's)."""
        return self.store.all(job_id)

    def fork_point(
        self, job_id: str, graph: GraphSpec, step: int, edit: GraphState | None, new_id: str
    ) -> GraphCheckpoint:
        """Checkpoint ``step`` of ``job_id`` with ``edit`` applied, as ``new_id``'s first.

        Raises:
            InvalidInput: no such checkpoint, or the edit leaves the state invalid.
        """
        point = self.store.get(job_id, step)
        if point is None:
            steps = [c.step for c in self.store.all(job_id) if not c.namespace]
            raise InvalidInput(
                f"job {job_id} has no checkpoint {step} (it has: {steps or 'none'})",
                field="step",
            )
        state, problems = StateKeeper(graph).edit(point.state, edit or {})
        if problems:
            raise InvalidInput(
                f"the edit would leave the graph's state invalid: {'; '.join(problems)}",
                field="state",
                problems=problems,
            )
        return point.model_copy(update={"job_id": new_id, "state": state, "at": time.time()})
