"""What a job's output must be: JSON Schemas checked before use, answers read as models.

An ``output_schema`` (of a plan's subtask, a team, a skill, an eval) is checked once, when it is
given (:func:`check_output_schema`); Python code may give a pydantic model class instead
(:func:`schema_of`); an answer is read back as a model with :func:`typed_output`.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

from raytroupe.protocols.errors import QualityGateFailed
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.schema_checks import check_schema_references, check_schema_shape

__all__ = [
    "check_output_schema",
    "local_ref",
    "schema_of",
    "typed_output",
]

M = TypeVar("M", bound=BaseModel)


def schema_of(value: Any) -> Any:
    """A pydantic model class as its JSON Schema (an ``output_type``); anything else as is.

    So that Python code may give ``output_schema=SomeModel`` wherever a schema is asked for.
    """
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value.model_json_schema()
    return value


def typed_output(model: type[M], data: Any, text: str, *, what: str) -> M:
    """An answer as an instance of ``model``: its JSON ``data`` if any, else ``text`` parsed.

    Raises:
        QualityGateFailed: the answer is not JSON, or not a valid ``model``
            (``detail['problems']``: where and why, at most ten).
    """
    if data is None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise QualityGateFailed(
                f"{what} is not JSON, so not a {model.__name__}: {exc.msg} at {exc.pos}",
                problems=[{"path": "(answer)", "message": exc.msg}],
            ) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"path": "/".join(str(p) for p in e["loc"]) or "(answer)", "message": e["msg"]}
            for e in exc.errors()[:10]
        ]
        raise QualityGateFailed(
            f"{what} is not a valid {model.__name__}: "
            + "; ".join(f"{p['path']}: {p['message']}" for p in problems),
            problems=problems,
        ) from None


def check_output_schema(
    schema: JsonSchema | None, field: str = "output_schema"
) -> JsonSchema | None:
    """``schema``, if it is a valid JSON Schema (2020-12) that refers to nothing outside it.

    A ``$ref`` to another document would be resolved while a job runs (or fail there): only
    references within the schema itself (``#/...``) are taken, and only those that lead
    somewhere and end (:mod:`raytroupe.protocols.schema_checks`).

    Raises:
        ValueError: not a valid schema, a reference to another document, or a schema that
            could not be evaluated to an end (see :mod:`raytroupe.protocols.schema_checks`).
    """
    if schema is None:
        return None
    check_schema_shape(schema, field)  # what would crash the metaschema check
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "<root>"
        raise ValueError(f"{field} is not a valid JSON Schema (at {where}): {e.message}") from None
    if _combines(schema, "unevaluatedProperties", "patternProperties"):
        raise ValueError(
            f"{field} combines unevaluatedProperties with patternProperties, which would be "
            "matched without a time limit: use additionalProperties"
        )
    outside = sorted(ref for ref in _references(schema) if not ref.startswith("#"))
    if outside:
        raise ValueError(
            f"{field} refers to other documents ({', '.join(outside)}); only references "
            "within the schema ('#/...') are allowed"
        )
    check_schema_references(schema, field)
    return schema


def local_ref(node: JsonSchema, root: JsonSchema) -> JsonSchema:
    """``node``, or the subschema of ``root`` its ``$ref`` (``#/...``) points at ({} if none)."""
    ref = node.get("$ref")
    if not (isinstance(ref, str) and ref.startswith("#/")):
        return node
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, dict) else {}
    return target if isinstance(target, dict) else {}


def _combines(node: Any, *keywords: str) -> bool:
    """Whether some (sub)schema of ``node`` has every one of ``keywords``."""
    if isinstance(node, dict):
        return all(k in node for k in keywords) or any(
            _combines(v, *keywords) for v in node.values()
        )
    if isinstance(node, list):
        return any(_combines(v, *keywords) for v in node)
    return False


def _references(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in {"$ref", "$dynamicRef"} and isinstance(v, str)]
        return found + [r for v in node.values() for r in _references(v)]
    if isinstance(node, list):
        return [r for v in node for r in _references(v)]
    return []
