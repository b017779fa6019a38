"""A graph's checkpoints: where a running graph stands after a superstep, and where it waits.

Every superstep of a graph (:mod:`raytroupe.protocols.graph`) ends in a
:class:`GraphCheckpoint`; a restarted orchestrator resumes from the last one, a person resumes
a graph waiting at a :class:`GraphInterrupt`, and a new job may start from any (a fork).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.addresses import Name

__all__ = [
    "GraphCheckpoint",
    "GraphInterrupt",
    "GraphTask",
    "GraphTimer",
    "Interrupted",
]


GraphState: TypeAlias = dict[str, Any]
"""A graph job's state, or an update to it: fields by name, each a JSON value. What they must
be is the graph's state schema (or model), checked as the state is made and each update
merged."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class GraphTask(_Frozen):
    """One run of a node due in a superstep (a map step's run carries its item)."""

    node: Name
    item: Any = None
    index: int | None = Field(default=None, ge=0, description="Its place in a map step.")


class GraphInterrupt(_Frozen):
    """Where a graph waits for a person."""

    id: str = Field(description="'<namespace>/<step>/<node>/<when>': what a resume names.")
    node: Name
    when: Literal["before", "after"]
    namespace: str = Field(default="", description="The subgraph path ('' for the graph).")


class GraphTimer(_Frozen):
    """Where a graph sleeps until a time: before ``node`` (``wait_s``, ``wait_until``)."""

    node: Name
    wake_at: float = Field(description="UNIX time it goes on: set once, kept across restarts.")


class Interrupted(NamedTuple):
    """A graph waiting for a person: its job's id, the interrupt, the state it waits with."""

    job_id: str
    interrupt: GraphInterrupt
    state: GraphState


class GraphCheckpoint(_Frozen):
    """The graph after a superstep: what a resume, a restart or a fork starts from."""

    job_id: str
    namespace: str = Field(default="", description="The subgraph path ('' for the graph).")
    step: int = Field(ge=0, description="Supersteps done (0: before the first).")
    at: float
    state: GraphState
    next: tuple[GraphTask, ...] = Field(description="The next superstep's runs.")
    joins: dict[str, int] = Field(
        default_factory=dict, description="Join nodes waiting, and the branches arrived."
    )
    routes: tuple[tuple[Name, str], ...] = Field(
        default=(),
        description="Nodes whose edges are yet to be followed (after an 'after' interrupt), "
        "with their text.",
    )
    last: str = Field(default="", description="The text of the last node run.")
    interrupt: GraphInterrupt | None = Field(
        default=None, description="Where it waits for a person, if it does."
    )
    resumed: dict[str, Any] = Field(
        default_factory=dict,
        description="Nodes due next that a person already let through, with their values.",
    )
    timer: GraphTimer | None = Field(
        default=None, description="Where it sleeps until a time, if it does."
    )
    woken: tuple[Name, ...] = Field(
        default=(), description="Nodes due next whose wait for a time is over."
    )
