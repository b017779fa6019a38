"""The answer gate: whether an output is the answer asked for, and the words that send it back.

:func:`gate` lists an output's problems (empty, not JSON, against a JSON Schema, required
fields missing or empty); :func:`checked_gate` runs it off the event loop, within the
tenant's share of answer work; :func:`gate_feedback` words the problems for another try, with
an answer of the wanted shape (:func:`schema_example`) when the schema allows one.
:func:`load_json` reads JSON as it is or from a fenced block.

Used by the planner, dispatch and conflict resolution, graphs, skills and evals; it imports
none of them (only :mod:`raytroupe.protocols` and the offload helper), so any of them can be
imported first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from raytroupe.actors.offload import offloaded
from raytroupe.protocols import WorkLimitExceeded
from raytroupe.protocols.bounded import ANSWER_WORK_S
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.safe_schema import safe_validator

__all__ = ["checked_gate", "gate", "gate_feedback", "load_json", "schema_example"]

_MAX_PROBLEMS: Final = 20
_FENCE: Final = re.compile(r"```[\w-]*[ \t]*\n(.*?)\n?```", re.DOTALL)


def load_json(output: str) -> Any:
    """``output`` parsed as JSON, as it is or from a fenced code block (```json ... ```).

    Raises:
        ValueError: neither is JSON (the whole answer's error).
    """
    try:
        return json.loads(output)
    except json.JSONDecodeError as whole:
        fence = _FENCE.search(output)
        if fence is not None:
            try:
                return json.loads(fence.group(1))
            except json.JSONDecodeError:
                pass
        raise ValueError(f"output is not JSON: {whole}") from None


def _empty(value: object) -> bool:
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, list | dict) and not value)


def gate(output: str, schema: JsonSchema | None = None, required: Sequence[str] = ()) -> list[str]:
    """The problems of ``output`` (empty: it passes).

    An empty output fails. With a ``schema`` or ``required`` fields the output must be JSON
    (a fenced block is accepted); it must validate against ``schema`` (JSON Schema 2020-12,
    which ``PlannedSubtask`` has checked) and be an object whose ``required`` fields are
    present and not empty (``null``, blank string, ``[]``, ``{}``). Schema problems read
    ``at <path>: <message>``, the path ``a/0/b`` or ``<root>``; at most 20 are listed.
    """
    if not output.strip():
        return ["output is empty"]
    if schema is None and not required:
        return []
    try:
        data = load_json(output)
    except ValueError as e:
        return [str(e)]
    problems: list[str] = []
    if schema is not None:
        errors = sorted(
            safe_validator(schema).iter_errors(data),
            key=lambda e: list(map(str, e.absolute_path)),
        )
        problems += [
            f"at {'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in errors
        ]
    if required and not isinstance(data, dict):
        problems.append(f"output is not a JSON object (required fields: {', '.join(required)})")
    elif required:
        problems += [f"required field {f!r} is missing" for f in required if f not in data]
        problems += [
            f"required field {f!r} is empty" for f in required if f in data and _empty(data[f])
        ]
    if len(problems) > _MAX_PROBLEMS:
        problems = [*problems[:_MAX_PROBLEMS], f"... and {len(problems) - _MAX_PROBLEMS} more"]
    return problems


def gate_feedback(problems: Sequence[str], *, schema: JsonSchema | None = None) -> str:
    """The message that sends a rejected output back to its agent, listing ``problems``.

    With a schema, also an answer of exactly the wanted shape (when one can be made that the
    schema accepts): a small model copies a shape far better than it reads a schema.
    """
    listed = "\n".join(f"- {p}" for p in problems)
    text = f"Your answer did not pass the quality check:\n{listed}\n"
    if schema is not None:
        text += f"Reply with JSON only, satisfying this JSON Schema:\n{json.dumps(schema)}\n"
        example = schema_example(schema)
        if example is not None:
            text += (
                f"Your whole answer must have this shape, with your own values, and nothing "
                f"before or after it:\n{example}\n"
            )
    return text + "Answer again in full, fixing every problem."


_EXAMPLE_DEPTH: Final = 6


def schema_example(schema: JsonSchema) -> str | None:
    """A JSON value of ``schema``'s shape that it accepts (None if none could be made)."""
    try:
        value = _example(schema, schema, 0)
        if any(True for _ in safe_validator(schema).iter_errors(value)):
            return None
    except (KeyError, TypeError, ValueError, RecursionError):
        return None
    return json.dumps(value, ensure_ascii=False)


def _example(node: Any, root: JsonSchema, depth: int) -> Any:
    if not isinstance(node, dict) or depth > _EXAMPLE_DEPTH:
        return None
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        return _example(target, root, depth + 1)
    return _shaped(node, root, depth)


def _shaped(node: JsonSchema, root: JsonSchema, depth: int) -> Any:
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list) and node[key]:
            return _example(node[key][0], root, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in node):
        properties = node.get("properties") or {}
        wanted = node.get("required") or list(properties)
        return {k: _example(properties.get(k, {}), root, depth + 1) for k in wanted}
    if kind == "array":
        return [_example(node.get("items", {}), root, depth + 1)] * max(1, node.get("minItems", 1))
    return _scalar(kind, node)


def _scalar(kind: Any, node: JsonSchema) -> Any:
    if kind in {"number", "integer"}:
        low: Any = node.get("minimum", node.get("exclusiveMinimum", 0))
        return int(low) + 1 if "exclusiveMinimum" in node else int(low)
    if kind == "boolean":
        return True
    if kind == "string":
        return "..." + "." * max(0, node.get("minLength", 0) - 3)
    return None


async def checked_gate(
    output: str,
    schema: JsonSchema | None = None,
    required: Sequence[str] = (),
    *,
    tenant: str,
) -> list[str]:
    """:func:`gate`, off the event loop in ``tenant``'s share, within ``ANSWER_WORK_S``.

    The schema may be the tenant's, its patterns the tenant's choice: an answer whose
    checks run out of time fails them, with the limit as its problem.
    """
    if schema is None:
        return gate(output, None, required)  # no patterns: nothing worth a thread
    try:
        return await offloaded(
            tenant, ANSWER_WORK_S, "answer_work_s", gate, output, schema, required
        )
    except WorkLimitExceeded as e:
        return [e.message]
