"""A graph's edges: which nodes run in the next superstep, given what ran and the state.

Plain code, no I/O: the engine asks :class:`Edges` after each superstep (and after a
person's resume of an ``after`` interrupt, once the edit is in the state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raytroupe.protocols import ErrorCode, ErrorPayload
from raytroupe.protocols.expressions import ExpressionError, evaluate, truthy
from raytroupe.protocols.graph import END, GraphEdge, GraphSpec, edge_text_matches
from raytroupe.protocols.graph_checkpoints import GraphState, GraphTask

__all__ = ["Edges", "GraphFailed", "failed"]


class GraphFailed(Exception):
    """A graph run cannot go on: ``error`` is the job's (its detail names the node)."""

    def __init__(self, error: ErrorPayload) -> None:
        super().__init__(error.message)
        self.error = error


def failed(code: ErrorCode, message: str, node: str | None = None, **detail: Any) -> GraphFailed:
    """The failure of a graph run, naming ``node`` in its detail."""
    if node is not None:
        detail["node"] = node
    return GraphFailed(ErrorPayload(code=code, message=message, detail=detail))


class Edges:
    """The edges of one graph, for a job of ``task`` whose maps give at most ``max_items``."""

    def __init__(self, graph: GraphSpec, task: str, max_items: int) -> None:
        self._graph, self._task, self._max_items = graph, task, max_items
        self._nodes = {n.id: n for n in graph.nodes}

    def names(self, state: Mapping[str, Any], task: GraphTask) -> dict[str, Any]:
        """What an expression sees: the state's fields, ``item`` and ``task``."""
        return {**state, "item": task.item, "task": self._task}

    def feeds(self, node: str) -> list[str]:
        """The first-k join nodes ``node`` has an edge to."""
        return [
            target
            for edge in self._graph.edges
            if edge.source == node
            for target in edge.targets
            if target != END and isinstance(self._nodes[target].join, int)
        ]

    def routed(
        self, ran: Sequence[tuple[GraphTask, str]], state: GraphState, joins: Mapping[str, int]
    ) -> tuple[tuple[GraphTask, ...], dict[str, int]]:
        """The next superstep's tasks, and the joins still waiting (with their arrivals).

        ``ran`` is each task run in the superstep with its text, in order.

        Raises:
            GraphFailed: a condition or a map failed on the state (``invalid_input``).
        """
        due: list[GraphTask] = []
        arrived = dict(joins)
        for task, text in ran:
            edge = self._taken(task, text, state)
            if edge is None:
                continue
            if edge.map is not None:
                due += self._mapped(edge, task, state)
                continue
            for target in edge.targets:
                if target == END:
                    continue
                if self._nodes[target].join is not None:
                    arrived[target] = arrived.get(target, 0) + 1
                elif GraphTask(node=target) not in due:
                    due.append(GraphTask(node=target))
        for join, count in list(arrived.items()):
            wanted = self._nodes[join].join
            if isinstance(wanted, int) and count >= wanted:
                due.append(GraphTask(node=join))
                del arrived[join]
        if not due:  # every branch has finished: the joins waiting for all of them run
            due = [GraphTask(node=j) for j in self._nodes if j in arrived]
            arrived = {}
        return tuple(due), arrived

    def _taken(self, task: GraphTask, text: str, state: GraphState) -> GraphEdge | None:
        for edge in self._graph.edges:
            if edge.source != task.node:
                continue
            if edge.when is not None and not edge_text_matches(edge.when, text):
                continue
            if edge.condition is not None:
                try:
                    if not truthy(edge.condition, self.names(state, task)):
                        continue
                except ExpressionError as e:
                    raise self._failed(edge, "condition", str(e), task) from None
            return edge
        return None

    def _mapped(self, edge: GraphEdge, task: GraphTask, state: GraphState) -> list[GraphTask]:
        assert edge.map is not None  # noqa: S101 - the caller checked
        try:
            items = evaluate(edge.map, self.names(state, task))
        except ExpressionError as e:
            raise self._failed(edge, "map", str(e), task) from None
        if not isinstance(items, list | tuple):
            raise self._failed(edge, "map", f"gave {type(items).__name__}, not a list", task)
        if len(items) > self._max_items:
            why = f"gave {len(items)} items; max_subtasks is {self._max_items}"
            raise self._failed(edge, "map", why, task)
        target = edge.targets[0]
        return [GraphTask(node=target, item=item, index=i) for i, item in enumerate(items)]

    @staticmethod
    def _failed(edge: GraphEdge, part: str, why: str, task: GraphTask) -> GraphFailed:
        where = f"the {part} of edge {edge.source!r} -> {edge.target!r}"
        return failed(ErrorCode.INVALID_INPUT, f"{where} failed: {why}", task.node)
