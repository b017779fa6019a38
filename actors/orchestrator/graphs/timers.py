"""Durable timers: a graph node that waits for a time before it runs (``wait_s``, ``wait_until``).

The time is worked out once, when the node comes due, and written in a checkpoint
(``GraphCheckpoint.timer``) before the graph sleeps. The sleep is a timer on the job shard's
event loop: no process, thread, agent or slot is held while it lasts. A shard that restarts,
or a whole deployment started again, finds the checkpoint and sleeps only what is left of
the time (none, if it went by meanwhile); the node then runs once.
"""

from __future__ import annotations

import asyncio
import math
import time

from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore
from raytroupe.actors.orchestrator.graphs.routing import Edges, failed
from raytroupe.actors.orchestrator.jobs import Job, emit
from raytroupe.protocols import ErrorCode
from raytroupe.protocols.expressions import ExpressionError, evaluate
from raytroupe.protocols.graph import MAX_WAIT_S, GraphNode, GraphSpec
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphTask, GraphTimer

__all__ = ["Timers"]


class Timers:
    """The waits of one graph run (a graph or subgraph of one job)."""

    def __init__(
        self, job: Job, graph: GraphSpec, edges: Edges, store: CheckpointStore, namespace: str
    ) -> None:
        self._job, self._edges, self._store, self._ns = job, edges, store, namespace
        self._nodes = {n.id: n for n in graph.nodes}

    def sleep_before(self, point: GraphCheckpoint) -> GraphCheckpoint | None:
        """The checkpoint that sleeps before a node due now that waits for a time, if one does.

        Raises:
            GraphFailed: a ``wait_until`` that gives no time, or one more than
                :data:`~raytroupe.protocols.graph.MAX_WAIT_S` away (the state is written by
                models: their deadline may not hold a job for years).
        """
        for task in point.next:
            node = self._nodes[task.node]
            if node.waits and task.node not in point.woken:
                timer = GraphTimer(node=task.node, wake_at=self._wake_at(node, point, task))
                sleeping = point.model_copy(update={"timer": timer, "at": time.time()})
                self._store.put(sleeping)
                return sleeping
        return None

    async def slept(self, point: GraphCheckpoint) -> GraphCheckpoint:
        """Sleep until the checkpoint's timer is due, then the checkpoint that goes on."""
        timer = point.timer
        assert timer is not None  # noqa: S101 - the caller checked
        where: dict[str, object] = {"namespace": self._ns, "node": timer.node}
        await emit(self._job, "graph_waiting", data={**where, "wake_at": timer.wake_at})
        await asyncio.sleep(max(0.0, timer.wake_at - time.time()))
        woken = point.model_copy(
            update={"timer": None, "woken": (*point.woken, timer.node), "at": time.time()}
        )
        self._store.put(woken)
        await emit(self._job, "graph_woken", data=where)
        return woken

    def _wake_at(self, node: GraphNode, point: GraphCheckpoint, task: GraphTask) -> float:
        now = time.time()
        if node.wait_s is not None:
            return now + node.wait_s
        assert node.wait_until is not None  # noqa: S101 - node.waits
        try:
            value = evaluate(node.wait_until, self._edges.names(point.state, task))
        except ExpressionError as e:
            raise failed(
                ErrorCode.INVALID_INPUT, f"wait_until of {node.id!r}: {e}", node.id
            ) from None
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise failed(
                ErrorCode.INVALID_INPUT,
                f"wait_until of {node.id!r} gave {value!r}, not a UNIX time",
                node.id,
            )
        if value > now + MAX_WAIT_S:
            raise failed(
                ErrorCode.INVALID_INPUT,
                f"wait_until of {node.id!r} is {value - now:.0f} s away: more than "
                f"{MAX_WAIT_S:.0f} s",
                node.id,
            )
        return float(value)
