"""Argument validation against a tool's JSON Schema, with safe coercion of common model slips.

Models often send ``"3"`` for an integer, ``"true"`` for a boolean, ``3.0`` for an integer,
or the whole argument object as a JSON string. Those are coerced when, and only when, the
schema asks for the other type and the conversion is exact; anything else is reported back as
``InvalidArguments`` with one line per problem, so the model can correct itself.
"""

from __future__ import annotations

import json
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from raytroupe.protocols import ConfigError, InvalidArguments
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolArguments
from raytroupe.protocols.safe_schema import safe_validator

__all__ = ["check_schema", "coerce", "validate_arguments"]

_TRUE: Final = frozenset({"true", "yes", "1"})
_FALSE: Final = frozenset({"false", "no", "0"})


def check_schema(schema: JsonSchema, *, tool: str) -> None:
    """Refuse a tool whose parameter schema is not valid JSON Schema.

    Raises:
        ConfigError: the schema is invalid.
    """
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        raise ConfigError(f"tool {tool!r} has an invalid schema: {e.message}") from None


def _types(schema: JsonSchema) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else set()


def _int(text: str) -> int:
    return int(text)


def _number(text: str) -> float:
    return float(text)


def _bool(text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(text)


def _null(text: str) -> None:
    if text.lower() not in {"null", "none", ""}:
        raise ValueError(text)


def _json(text: str) -> Any:
    return json.loads(text)


_FROM_STRING: Final = (
    ("integer", _int),
    ("number", _number),
    ("boolean", _bool),
    ("null", _null),
    ("object", _json),
    ("array", _json),
)


def coerce(value: Any, schema: JsonSchema) -> Any:
    """``value`` converted to what ``schema`` wants, where that is exact; else unchanged."""
    alternatives = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(alternatives, list) and "type" not in schema:
        return _coerce_alternatives(value, [a for a in alternatives if isinstance(a, dict)])
    return _coerce_typed(value, schema)


def _coerce_typed(value: Any, schema: JsonSchema) -> Any:
    wanted = _types(schema)
    if isinstance(value, str) and "string" not in wanted:
        for kind, convert in _FROM_STRING:
            if kind in wanted:
                try:
                    converted = convert(value.strip())
                except ValueError:  # JSONDecodeError is one too
                    continue
                return coerce(converted, schema) if kind in {"object", "array"} else converted
        return value
    if isinstance(value, float) and "integer" in wanted and value.is_integer():
        return int(value)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return {k: coerce(v, props[k]) if k in props else v for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce(v, schema["items"]) for v in value]
    return value


def _coerce_alternatives(value: Any, alternatives: list[dict[str, Any]]) -> Any:
    """``value`` as the first alternative (``X | None`` in Python) it becomes valid for.

    A value valid for one as it is stays unchanged; alternatives with a ``$ref`` are skipped.
    """
    checkable = [a for a in alternatives if "$ref" not in json.dumps(a)]
    if any(safe_validator(a).is_valid(value) for a in checkable):
        return value
    for alternative in checkable:
        converted = coerce(value, alternative)
        if safe_validator(alternative).is_valid(converted):
            return converted
    return value


def validate_arguments(arguments: Any, schema: JsonSchema, *, tool: str) -> ToolArguments:
    """The arguments, valid for ``schema`` (coerced where safe).

    Raises:
        InvalidArguments: still invalid; ``detail['errors']`` lists ``{path, message}``.
    """
    validator = safe_validator(schema)
    if isinstance(arguments, str):
        arguments = coerce(arguments, {"type": "object"})
    if not list(validator.iter_errors(arguments)):
        return dict(arguments)
    fixed = coerce(arguments, schema)
    errors = sorted(validator.iter_errors(fixed), key=lambda e: list(e.absolute_path))
    if not errors:
        return dict(fixed)
    problems = [
        {"path": "/".join(str(p) for p in e.absolute_path) or "(arguments)", "message": e.message}
        for e in errors[:10]
    ]
    lines = "; ".join(f"{p['path']}: {p['message']}" for p in problems)
    raise InvalidArguments(f"invalid arguments for {tool!r}: {lines}", tool=tool, errors=problems)
