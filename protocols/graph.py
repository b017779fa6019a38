"""A graph workflow: nodes run by role, edges chosen by the output, loops under a hard limit."""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocols.addresses import Name

__all__ = ["END", "GraphEdge", "GraphNode", "GraphSpec"]

END = "end"
"""The target of an edge that finishes the graph."""

EDGE_MATCH_TIMEOUT_S: Final = 0.05
"""Longest a ``when`` pattern may take on one output. Patterns come from team files (a
tenant's too) and outputs from models: a pattern that backtracks without end must not stall
the orchestrator, so it is cut off and counts as no match."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class GraphNode(_Frozen):
    """One step: an agent of ``role`` carries out ``instructions`` ({task} is the job's task)."""

    id: Name
    role: Name
    instructions: str = Field(min_length=1)


class GraphEdge(_Frozen):
    """After ``source``, go to ``target`` if ``when`` (a regex, any case) is found in its output.

    Edges are tried in order; one without ``when`` always matches. No match ends the graph.
    A pattern that takes longer than :data:`EDGE_MATCH_TIMEOUT_S` counts as no match.
    """

    source: Name
    target: Name = Field(description=f"A node id, or {END!r}.")
    when: str | None = None


class GraphSpec(_Frozen):
    """Nodes, conditional edges (loops allowed) and a hard limit on the steps taken."""

    nodes: tuple[GraphNode, ...] = Field(min_length=1)
    edges: tuple[GraphEdge, ...] = ()
    start: Name
    max_steps: int = Field(default=20, ge=1, le=1000, description="Nodes run, at most.")

    @model_validator(mode="after")
    def _consistent(self) -> GraphSpec:
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("graph node ids are not unique")
        if END in ids:
            raise ValueError(f"{END!r} is reserved for the end of the graph")
        if self.start not in ids:
            raise ValueError(f"start {self.start!r} is not a node")
        for edge in self.edges:
            if edge.source not in ids or (edge.target not in ids and edge.target != END):
                raise ValueError(f"edge {edge.source!r} -> {edge.target!r} names an unknown node")
            if edge.when is not None:
                import regex  # noqa: PLC0415 - 1.2 MB every process would carry for graphs only

                try:
                    regex.compile(edge.when)
                except regex.error as e:
                    raise ValueError(f"edge condition {edge.when!r} is not a regex: {e}") from None
        return self

    def next(self, node: str, output: str) -> str:
        """The node after ``node`` given its output (``END`` when no edge matches)."""
        for edge in self.edges:
            if edge.source == node and (edge.when is None or _found(edge.when, output)):
                return edge.target
        return END


def _found(pattern: str, output: str) -> bool:
    import regex  # noqa: PLC0415 - see GraphSpec's check

    try:
        return (
            regex.search(pattern, output, regex.IGNORECASE, timeout=EDGE_MATCH_TIMEOUT_S)
            is not None
        )
    except TimeoutError:
        return False
