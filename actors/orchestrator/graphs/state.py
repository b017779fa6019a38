"""A graph's state: its schema, reducers, node prompts and how answers become updates.

Plain functions and one class, no I/O: the engine (:mod:`.engine`) calls them between
supersteps, and unit tests call them directly.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from raytroupe.actors.answer_gate import gate, load_json, schema_example
from raytroupe.protocols import ConfigError
from raytroupe.protocols.graph import DEFAULT_FIELD, GraphNode, GraphSpec
from raytroupe.protocols.graph_checkpoints import GraphState
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.safe_schema import safe_validator

__all__ = ["StateKeeper", "render", "uses_state"]

Reducer = Callable[[Any, Any], Any]

_MAX_PROBLEMS: Final = 10
_PLACEHOLDER: Final = re.compile(r"\{(task|state|item|resume)(?:\.([A-Za-z_]\w{0,63}))?\}")
_MAX_RENDERED: Final = 50_000
"""Characters of one value rendered into a prompt, at most (the rest is cut, and said so)."""

_DEFAULT_SCHEMA: Final[JsonSchema] = {
    "type": "object",
    "properties": {DEFAULT_FIELD: {"type": "string"}},
}


def _imported(path: str, what: str) -> Any:
    module, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"the graph's {what} {path!r} cannot be imported: {e}") from None


def _replace(_: Any, new: Any) -> Any:
    return new


def _append(current: Any, new: Any) -> Any:
    if current is None:
        current = []
    if not isinstance(current, list):
        raise TypeError(f"append needs a list, the field holds {type(current).__name__}")
    return [*current, *(new if isinstance(new, list) else [new])]


def _merge(current: Any, new: Any) -> Any:
    current = {} if current is None else current
    if not isinstance(current, dict) or not isinstance(new, dict):
        raise TypeError("merge needs objects on both sides")
    return {**current, **new}


def _add(current: Any, new: Any) -> Any:
    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    if not number(new) or not (current is None or number(current)):
        raise TypeError("add needs numbers")
    return (current or 0) + new


_BUILT_IN: Final[dict[str, Reducer]] = {
    "replace": _replace,
    "append": _append,
    "merge": _merge,
    "add": _add,
}


class StateKeeper:
    """The state of one graph: checks updates, applies them by reducer, renders prompts.

    Raises:
        ConfigError: (on creation) the state's model or a reducer function cannot be
            imported, or the model is not a pydantic model.
    """

    def __init__(self, graph: GraphSpec) -> None:
        spec = graph.state
        schema: JsonSchema = _DEFAULT_SCHEMA
        self._initial: GraphState = {}
        self._reducers: dict[str, Reducer] = {}
        self._appended: set[str] = set()
        if spec is not None:
            self._appended = {f for f, r in spec.reducers.items() if r == "append"}
            self._initial = spec.initial
            if spec.model is not None:
                model = _imported(spec.model, "state model")
                if not hasattr(model, "model_json_schema"):
                    raise ConfigError(f"the graph's state model {spec.model!r} is not pydantic")
                schema = model.model_json_schema()
            else:
                schema = spec.json_schema or {"type": "object", "properties": {}}
            for field, reducer in spec.reducers.items():
                self._reducers[field] = (
                    _BUILT_IN[reducer] if reducer in _BUILT_IN else _imported(reducer, "reducer")
                )
        self.schema = schema
        self.fields: frozenset[str] = frozenset(schema.get("properties", {}))
        self._validator = safe_validator(schema)

    def initial(self) -> GraphState:
        """The state a run starts with."""
        return copy.deepcopy(self._initial)

    def problems(self, state: Mapping[str, Any]) -> list[str]:
        """What is wrong with ``state`` against the schema (empty: nothing)."""
        errors = sorted(
            self._validator.iter_errors(dict(state)), key=lambda e: list(map(str, e.path))
        )
        said = [f"at {'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors]
        return said[:_MAX_PROBLEMS]

    def apply(
        self, state: Mapping[str, Any], updates: Sequence[Mapping[str, Any]]
    ) -> tuple[GraphState, list[str]]:
        """``state`` with ``updates`` applied in order by each field's reducer, and problems.

        The new state is whole only when there are no problems; the caller keeps the old
        one otherwise (nothing half-applied).
        """
        new = copy.deepcopy(dict(state))
        problems: list[str] = []
        for update in updates:
            for field, value in update.items():
                if field not in self.fields:
                    problems.append(f"{field!r} is not a field of the state")
                    continue
                reducer = self._reducers.get(field, _replace)
                try:
                    new[field] = reducer(new.get(field), copy.deepcopy(value))
                except Exception as e:  # noqa: BLE001 - an operator's reducer may raise anything
                    problems.append(f"{field!r} could not be updated: {type(e).__name__}: {e}")
        problems += self.problems(new) if not problems else []
        return new, problems[:_MAX_PROBLEMS]

    def edit(
        self, state: Mapping[str, Any], edit: Mapping[str, Any]
    ) -> tuple[GraphState, list[str]]:
        """``state`` with ``edit``'s fields replaced (a person's edit: no reducer), and problems."""
        unknown = [f"{f!r} is not a field of the state" for f in edit if f not in self.fields]
        if unknown:
            return dict(state), unknown
        new = {**copy.deepcopy(dict(state)), **copy.deepcopy(dict(edit))}
        return new, self.problems(new)

    def resumed(
        self,
        state: Mapping[str, Any],
        value: Any,
        edit: Mapping[str, Any] | None,
        field: str | None,
    ) -> tuple[GraphState, list[str]]:
        """``state`` after a resume: ``edit`` replaced, ``value`` reduced into ``field``."""
        new, problems = self.edit(state, edit or {})
        if not problems and field is not None and value is not None:
            new, problems = self.apply(new, [{field: value}])
        return new, problems

    def text_field(self, node: GraphNode) -> str | None:
        """The field a node's plain-text answer goes to: it writes one field, of text.

        A list of texts appended to counts too: the answer is one more item.
        """
        writes = self.writes(node)
        if len(writes) != 1:
            return None
        schema = self.schema.get("properties", {}).get(writes[0], {})
        kind = schema.get("type")
        if kind == "array" and writes[0] in self._appended:
            kind = (schema.get("items") or {}).get("type")
        return writes[0] if kind in {None, "string"} else None

    def writes(self, node: GraphNode) -> tuple[str, ...]:
        """The fields a node's answer may update."""
        if node.writes:
            return node.writes
        return (DEFAULT_FIELD,) if self.schema is _DEFAULT_SCHEMA else ()

    def update_schema(self, node: GraphNode) -> JsonSchema:
        """The JSON Schema of a node's update: an object of some of the fields it writes."""
        properties = self.schema.get("properties", {})

        def one(field: str) -> GraphState:  # an appended list takes one item, or several
            own = properties.get(field, {})
            item = own.get("items") if field in self._appended else None
            return {"anyOf": [own, item]} if isinstance(item, dict) else own

        schema: JsonSchema = {
            "type": "object",
            "properties": {f: one(f) for f in self.writes(node)},
            "additionalProperties": False,
        }
        if "$defs" in self.schema:  # a pydantic model's nested models
            schema["$defs"] = self.schema["$defs"]
        return schema

    def update(self, node: GraphNode, text: str) -> tuple[GraphState, list[str]]:
        """The update a node's answer ``text`` makes, and its problems (empty: none).

        A node writing one text field gives its text; one writing nothing gives nothing;
        otherwise the answer must be a JSON object of updates to the fields it writes.
        """
        field = self.text_field(node)
        if field is not None:
            if not text.strip():
                return {}, ["the answer is empty"]
            listed = self.schema.get("properties", {}).get(field, {}).get("type") == "array"
            return {field: [text.strip()] if listed else text.strip()}, []
        if not self.writes(node):
            return {}, []
        schema = self.update_schema(node)
        problems = gate(text, schema)
        if problems:
            return {}, problems
        return load_json(text), []

    def answer_format(self, node: GraphNode) -> str | None:
        """What a node writing JSON is told about its answer's shape (None: plain text)."""
        if self.text_field(node) is not None or not self.writes(node):
            return None
        schema = self.update_schema(node)
        said = (
            "Answer with a JSON object only, updating these fields of the shared state: "
            f"{', '.join(self.writes(node))}. Its JSON Schema: {json.dumps(schema)}"
        )
        example = schema_example(schema)
        return said + (f"\nFor example: {example}" if example else "")


def uses_state(template: str) -> bool:
    """Whether a node's template places the state (or a field of it) itself."""
    return any(m.group(1) == "state" for m in _PLACEHOLDER.finditer(template))


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > _MAX_RENDERED:
        return f"{text[:_MAX_RENDERED]}... [{len(text) - _MAX_RENDERED} characters cut]"
    return text


def render(
    template: str,
    *,
    task: str,
    state: Mapping[str, Any],
    item: Any = None,
    resume: Any = None,
) -> str:
    """``template`` with its placeholders filled; any other braces are left as they are.

    ``{task}``, ``{state}`` (the whole state as JSON), ``{state.<field>}`` (empty if unset),
    ``{item}`` and ``{resume}``. Values are placed once: text inside them is not read
    again as placeholders.
    """

    def fill(match: re.Match[str]) -> str:
        name, field = match.group(1), match.group(2)
        if name == "task" and field is None:
            return task
        if name == "state":
            value = dict(state) if field is None else state.get(field)
            return "" if value is None else _shown(value)
        if name in {"item", "resume"} and field is None:
            value = item if name == "item" else resume
            return "" if value is None else _shown(value)
        return match.group(0)

    return _PLACEHOLDER.sub(fill, template)
