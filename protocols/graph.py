"""A graph workflow: a state machine over shared, typed state, run in supersteps.

A graph declares its state (a JSON Schema, or a pydantic model by import path, with a
reducer per field). Each superstep runs every node due at once; each node reads the state
and returns an update to the fields it ``writes``; the updates are checked against the
schema and applied by the reducers; then the edges of the nodes that ran choose the next
superstep's nodes (one, several at once, or one per item of a list in the state). Every
superstep ends in a checkpoint: a restarted orchestrator resumes from it, a person can
pause the graph at a node and resume it with a value, and a new job can start from any
checkpoint (a fork).

A graph without a declared state keeps the older contract: each node's text goes to the
field ``output`` and the last node's text is the answer.

The checkpoints themselves are in :mod:`raytroupe.protocols.graph_checkpoints`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.bounded import search
from raytroupe.protocols.expressions import ExpressionError, check_expression
from raytroupe.protocols.graph_checkpoints import GraphState
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.output_schema import check_output_schema

__all__ = [
    "END",
    "REDUCERS",
    "GraphEdge",
    "GraphNode",
    "GraphSpec",
    "ImportPath",
    "StateSpec",
]

END = "end"
"""The target of an edge that finishes the graph (or the branch)."""

EDGE_MATCH_TIMEOUT_S: Final = 0.05
"""Longest a ``when`` pattern may take on one output. Patterns come from team files (a
tenant's too) and outputs from models: a pattern that backtracks without end must not stall
the orchestrator, so it is cut off and counts as no match."""

MAX_GRAPH_NODES: Final = 128
"""Nodes of one graph (each subgraph has as many of its own)."""
MAX_GRAPH_EDGES: Final = 512
"""Edges of one graph: each ``when`` is a pattern run on a node's text."""

MAX_WAIT_S: Final = 30 * 24 * 3600.0
"""Longest a node may wait for its time (``wait_s``, ``wait_until``): thirty days. A
``wait_until`` computed from the state (which models write) further off fails the graph."""

REDUCERS: Final = ("replace", "append", "merge", "add")
"""Built-in reducers: how an update to a field joins its current value."""

DEFAULT_FIELD: Final = "output"
"""The field a graph without a declared state keeps each node's text in."""

ImportPath = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$"),
]
"""``package.module:name``: code the operator installed (a tenant's team may not name any)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class StateSpec(_Frozen):
    """The graph's shared state: its schema, a reducer per field, its first value."""

    json_schema: JsonSchema | None = Field(
        default=None,
        description="JSON Schema (draft 2020-12) of the state: an object whose properties "
        "are its fields.",
    )
    model: ImportPath | None = Field(
        default=None,
        description="A pydantic model ('package.module:Model') whose JSON Schema is the "
        "state's; operator configuration only.",
    )
    reducers: dict[Name, Literal["replace", "append", "merge", "add"] | ImportPath] = Field(
        default_factory=dict,
        description="How an update joins a field: replace (default), append (to a list), "
        "merge (into an object), add (numbers), or a function 'package.module:f' "
        "taking (current, update) (operator configuration only).",
    )
    initial: GraphState = Field(
        default_factory=dict, description="The state when the graph starts (before 'task')."
    )

    @model_validator(mode="after")
    def _consistent(self) -> StateSpec:
        if self.json_schema is not None and self.model is not None:
            raise ValueError("a state has a json_schema or a model, not both")
        if self.json_schema is not None:
            _check_state_schema(self.json_schema, self.reducers, self.initial)
        return self

    @property
    def import_paths(self) -> tuple[str, ...]:
        """The code this state names (a model, reducer functions): the operator's alone."""
        paths = [r for r in self.reducers.values() if r not in REDUCERS]
        return (*([self.model] if self.model else []), *paths)


class GraphNode(_Frozen):
    """One step of the graph: an agent of ``role``, a subgraph, or a registered team or skill.

    ``instructions`` is a template: ``{task}`` is the job's task, ``{state}`` the whole
    state as JSON, ``{state.<field>}`` one field, ``{item}`` a map step's item and
    ``{resume}`` the value a person resumed it with. A template naming no state is given
    the whole state beside it instead.
    """

    id: Name
    role: Name | None = Field(default=None, description="An agent node: the role that runs it.")
    instructions: str = Field(default="", description="The node's prompt (a template).")
    graph: GraphSpec | None = Field(
        default=None, description="A subgraph node: the graph it runs, with its own state."
    )
    team: Name | None = Field(default=None, description="A registered team run as the node.")
    skill: str | None = Field(
        default=None,
        max_length=200,
        description="A registered skill ('name' or 'name@version') run as the node.",
    )
    writes: tuple[Name, ...] = Field(
        default=(),
        description="State fields its answer updates. One text field: the answer is its "
        "value; otherwise the answer is a JSON object of updates to these fields.",
    )
    inputs: dict[str, str] = Field(
        default_factory=dict,
        description="Expressions over the state: an agent's inputs (given instead of the "
        "whole state), a subgraph's first state, or a skill's structured input.",
    )
    outputs: dict[Name, Name] = Field(
        default_factory=dict,
        description="Subgraph: this state's fields (keys) from its final state's (values).",
    )
    interrupt: Literal["before", "after"] | None = Field(
        default=None,
        description="Pause the graph before the node runs, or after its update, until a "
        "person resumes it (with a value, a state edit, or neither).",
    )
    resume_field: Name | None = Field(
        default=None, description="The state field a resume value is written to."
    )
    wait_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_WAIT_S,
        description="Wait this many seconds before the node runs. A durable timer: the time "
        "it ends is checkpointed, a restart waits only what is left, and nothing runs "
        "meanwhile.",
    )
    wait_until: str | None = Field(
        default=None,
        max_length=1000,
        description="Wait before the node runs until the UNIX time this expression over the "
        "state gives (e.g. 'deadline - 3600'); a time gone by does not wait. Durable, as "
        "wait_s.",
    )
    join: Literal["all"] | Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description="'all': run once every other branch has finished; k: run once k "
        "branches arrived (those still running toward it are cancelled).",
    )
    max_update_attempts: int = Field(
        default=2, ge=1, le=5, description="Tries at a valid update, problems sent back."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> GraphNode:
        kinds = [k for k in ("role", "graph", "team", "skill") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                f"graph node {self.id!r} must have exactly one of role, graph, team or skill"
                f" (has {', '.join(kinds) or 'none'})"
            )
        if self.role is not None and not self.instructions.strip():
            raise ValueError(f"graph node {self.id!r} has a role but no instructions")
        if self.graph is None and self.outputs:
            raise ValueError(f"graph node {self.id!r}: outputs map a subgraph's state only")
        if self.graph is not None and self.writes:
            raise ValueError(f"graph node {self.id!r}: a subgraph writes through its outputs")
        if self.inputs and self.team is not None:
            raise ValueError(f"graph node {self.id!r}: a team node's input is its task")
        for field, expression in self.inputs.items():
            _checked(expression, f"input {field!r} of node {self.id!r}")
        if self.wait_s is not None and self.wait_until is not None:
            raise ValueError(f"graph node {self.id!r} has both wait_s and wait_until")
        if self.wait_until is not None:
            _checked(self.wait_until, f"wait_until of node {self.id!r}")
        return self

    @property
    def waits(self) -> bool:
        """Whether it waits for a time before it runs."""
        return self.wait_s is not None or self.wait_until is not None

    @property
    def kind(self) -> Literal["agent", "graph", "team", "skill"]:
        """What runs the node."""
        if self.graph is not None:
            return "graph"
        if self.team is not None:
            return "team"
        return "skill" if self.skill is not None else "agent"


class GraphEdge(_Frozen):
    """After ``source``, go to ``target`` if ``when`` and ``condition`` hold.

    The edges of a node are tried in order; the first that holds is taken, to all of its
    targets at once (a fan-out). No edge holding ends that branch. ``when`` is a regex
    (any case) found in the node's text; ``condition`` an expression over the state
    (:mod:`raytroupe.protocols.expressions`); ``map`` an expression giving a list: the target runs
    once per item, all at once (``{item}`` in its template).
    """

    source: Name
    target: Name | tuple[Name, ...] = Field(description=f"Node ids, or {END!r}.")
    when: str | None = Field(default=None, max_length=500)
    condition: str | None = Field(default=None, max_length=1000)
    map: str | None = Field(default=None, max_length=1000)

    @property
    def targets(self) -> tuple[str, ...]:
        """Where it leads."""
        return (self.target,) if isinstance(self.target, str) else self.target

    @property
    def always(self) -> bool:
        """Whether it holds whatever the node said and the state is."""
        return self.when is None and self.condition is None


class GraphSpec(_Frozen):
    """Nodes, edges (loops allowed), the state, and a limit on supersteps."""

    nodes: tuple[GraphNode, ...] = Field(min_length=1, max_length=MAX_GRAPH_NODES)
    edges: tuple[GraphEdge, ...] = Field(default=(), max_length=MAX_GRAPH_EDGES)
    start: Name | tuple[Name, ...] = Field(description="The first superstep's nodes.")
    max_steps: int = Field(
        default=20, ge=1, le=1000, description="Supersteps, at most (one node each when the "
        "graph never fans out)."
    )  # fmt: skip
    state: StateSpec | None = Field(
        default=None, description=f"Shared state (default: one text field {DEFAULT_FIELD!r})."
    )
    answer: Name | None = Field(
        default=None,
        description="The state field that is the job's answer (default: the last node's text).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> GraphSpec:
        ids = {n.id: n for n in self.nodes}
        if len(ids) != len(self.nodes):
            raise ValueError("graph node ids are not unique")
        if END in ids:
            raise ValueError(f"{END!r} is reserved for the end of the graph")
        for start in self.starts:
            if start not in ids:
                raise ValueError(f"start {start!r} is not a node")
        seen_always: set[str] = set()
        for edge in self.edges:
            unknown = [t for t in edge.targets if t not in ids and t != END]
            if edge.source not in ids or unknown:
                raise ValueError(f"edge {edge.source!r} -> {edge.target!r} names an unknown node")
            if edge.source in seen_always:
                raise ValueError(
                    f"edge {edge.source!r} -> {edge.target!r} is never taken: an earlier "
                    f"edge from {edge.source!r} always holds"
                )
            if edge.always:
                seen_always.add(edge.source)
            self._check_edge(edge)
        fields = self.fields
        for node in self.nodes:
            for name in (*node.writes, *node.outputs, *filter(None, (node.resume_field,))):
                if fields is not None and name not in fields:
                    raise ValueError(
                        f"graph node {node.id!r} names {name!r}, not a field of the state"
                    )
        if self.answer is not None and fields is not None and self.answer not in fields:
            raise ValueError(f"answer {self.answer!r} is not a field of the state")
        return self

    def _check_edge(self, edge: GraphEdge) -> None:
        where = f"edge {edge.source!r} -> {edge.target!r}"
        if edge.map is not None:
            if len(edge.targets) != 1 or edge.targets[0] == END:
                raise ValueError(f"{where}: a map step has one target node")
            _checked(edge.map, f"map of {where}")
        if edge.condition is not None:
            _checked(edge.condition, f"condition of {where}")
        if edge.when is not None:
            import regex  # noqa: PLC0415 - 1.2 MB every process would carry for graphs only

            try:
                regex.compile(edge.when)
            except (regex.error, RecursionError) as e:  # groups nested hundreds deep recurse
                raise ValueError(f"edge condition {edge.when!r} is not a regex: {e}") from None

    @property
    def starts(self) -> tuple[str, ...]:
        """The first superstep's nodes."""
        return (self.start,) if isinstance(self.start, str) else self.start

    @property
    def fields(self) -> frozenset[str] | None:
        """The state's declared fields (None: not known without importing its model)."""
        if self.state is None:
            return frozenset({DEFAULT_FIELD})
        schema = self.state.json_schema
        if schema is None:
            return None if self.state.model is not None else frozenset()
        return frozenset(schema.get("properties", {}))

    def walk(self) -> tuple[GraphNode, ...]:
        """Its nodes and, depth first, its subgraphs' nodes."""
        out: list[GraphNode] = []
        for node in self.nodes:
            out.append(node)
            if node.graph is not None:
                out.extend(node.graph.walk())
        return tuple(out)

    @property
    def import_paths(self) -> tuple[str, ...]:
        """The code it (or a subgraph) names: the operator's alone to name."""
        own = self.state.import_paths if self.state is not None else ()
        nested = [p for n in self.nodes if n.graph is not None for p in n.graph.import_paths]
        return (*own, *nested)


def _check_state_schema(schema: JsonSchema, reducers: dict[str, str], initial: GraphState) -> None:
    """A state schema is an object schema; its reducers name its fields; ``initial`` fits it."""
    from raytroupe.protocols.safe_schema import safe_validator  # noqa: PLC0415

    check_output_schema(schema, "the state's json_schema")
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise ValueError("the state's json_schema must be an object with properties")
    unknown = sorted(set(reducers) - set(schema["properties"]))
    if unknown:
        raise ValueError(f"reducers name fields the state does not have: {', '.join(unknown)}")
    # the first problem is enough, and each one may have cost a pattern its time limit
    problem = next(iter(safe_validator(schema).iter_errors(initial)), None)
    if problem is not None:
        raise ValueError(f"the state's initial value does not fit its schema: {problem.message}")


def _checked(expression: str, where: str) -> None:
    try:
        check_expression(expression)
    except ExpressionError as e:
        raise ValueError(f"{where}: {e}") from None


def edge_text_matches(pattern: str, output: str) -> bool:
    """Whether ``pattern`` is found in ``output`` (any case); a pattern out of time is not.

    Raises:
        WorkLimitExceeded: the graph step this runs in is out of time (see
            :mod:`raytroupe.protocols.bounded`).
    """
    import regex  # noqa: PLC0415 - see GraphSpec's check

    found = search(pattern, output, flags=regex.IGNORECASE, timeout=EDGE_MATCH_TIMEOUT_S)
    return bool(found)


GraphNode.model_rebuild()
