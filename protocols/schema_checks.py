"""The shape a JSON Schema from a caller must have before anything evaluates it.

``jsonschema`` evaluates a schema recursively and resolves its references as it goes, so a
schema that passes the metaschema can still fail later, deep in a request or a job, with an
error that is no validation error:

- a ``$ref`` cycle that never consumes the value (``{"$ref": "#"}``, two ``$defs`` that
  refer to each other through ``allOf``) recurses until Python's stack runs out;
- a ``$ref`` to a pointer or anchor that leads nowhere raises a referencing error, and one
  to another document has jsonschema fetch it over the network (refused in
  :func:`raytroupe.protocols.output_schema.check_output_schema`);
- ``$dynamicRef`` resolves through the dynamic scope, and ``$id`` in a subschema moves where
  ``#/...`` points: neither is needed by a schema that describes one answer;
- ``$schema`` naming another draft in a subschema switches the validator to that draft's,
  whose ``pattern`` is matched with :mod:`re`, without the time limit of
  :mod:`raytroupe.protocols.safe_schema`;
- nesting a hundred deep exhausts the stack of the metaschema check itself, and a pattern
  such as ``a{99999999999}`` makes :func:`re.compile` raise ``OverflowError``.

:func:`check_schema_shape` (before the metaschema check) and :func:`check_schema_references`
(after it) refuse each of these with a :class:`ValueError` naming the problem and where it
is. What a schema cannot prevent, a value the validator cannot check (nested deeper than the
stack allows, an integer no float holds), :func:`guarded` turns into a validation error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any, Final
from urllib.parse import unquote

from jsonschema.exceptions import ValidationError
from referencing.exceptions import Unresolvable

from raytroupe.protocols.json_data import JsonSchema, is_unicode

__all__ = [
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "check_schema_references",
    "check_schema_shape",
    "guarded",
    "multiple_of",
]

MAX_SCHEMA_DEPTH: Final = 32
"""Objects and arrays nested in a schema, at most (each object property takes two)."""
MAX_SCHEMA_NODES: Final = 20_000
"""Values in a schema, at most (YAML aliases counted each time they appear)."""
_MAX_INT_BITS: Final = 1023
"""An integer keyword must fit a float: ``multipleOf`` divides floats by it."""
_DIALECTS: Final = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    }
)
_DYNAMIC: Final = ("$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor")
_IN_PLACE_ONE: Final = ("not", "if", "then", "else")
"""Keywords whose subschema applies to the value itself (not to a part of it)."""
_IN_PLACE_MANY: Final = ("allOf", "anyOf", "oneOf")

Path = tuple[str | int, ...]


def _pointer(path: Path) -> str:
    """``path`` as a JSON pointer fragment (``#/$defs/a``)."""
    # backslashreplace: a key with a lone surrogate would make the message unencodable
    parts = (
        str(p).encode("utf-8", "backslashreplace").decode().replace("~", "~0").replace("/", "~1")
        for p in path
    )
    return "#" + "".join(f"/{p}" for p in parts)


def _compile_error(pattern: str) -> str | None:
    """Why :func:`re.compile` fails on ``pattern`` other than with ``re.error``, if it does."""
    try:
        re.compile(pattern)
    except re.error:
        return None  # the metaschema check says so, in its words
    except (OverflowError, RecursionError, MemoryError) as e:
        return str(e) or type(e).__name__
    return None


def check_schema_shape(schema: Any, field: str = "schema") -> None:
    """Refuse what would crash the metaschema check: depth, size, numbers, patterns.

    Walks ``schema`` without recursion.

    Raises:
        ValueError: nested deeper than :data:`MAX_SCHEMA_DEPTH`, more than
            :data:`MAX_SCHEMA_NODES` values, a number that is not finite or no float holds,
            text that is not Unicode (a lone surrogate), or a ``pattern`` (a
            ``patternProperties`` name) :mod:`re` cannot compile at all.
    """
    stack: list[tuple[Any, Path]] = [(schema, ())]
    seen = 0
    while stack:
        node, path = stack.pop()
        seen += 1
        if seen > MAX_SCHEMA_NODES:
            raise ValueError(f"{field} has more than {MAX_SCHEMA_NODES} values")
        if isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"{field} holds {node} at {_pointer(path)}: numbers must be finite")
        if isinstance(node, int) and node.bit_length() > _MAX_INT_BITS:
            raise ValueError(f"{field} holds an integer at {_pointer(path)} no float holds")
        if isinstance(node, str) and not is_unicode(node):
            raise ValueError(f"{field} holds text at {_pointer(path)} that is not Unicode")
        if not isinstance(node, dict | list):
            continue
        if len(path) >= MAX_SCHEMA_DEPTH:
            raise ValueError(
                f"{field} nests deeper than {MAX_SCHEMA_DEPTH} levels (at {_pointer(path[:8])}"
                "/...): use $defs and $ref"
            )
        if isinstance(node, list):
            stack.extend((item, (*path, n)) for n, item in enumerate(node))
            continue
        for pattern in _patterns(node):
            why = _compile_error(pattern)
            if why is not None:
                raise ValueError(
                    f"{field} has a pattern at {_pointer(path)} that cannot be used: {why}"
                )
        stack.extend((value, (*path, str(key))) for key, value in node.items())
        stack.extend((key, path) for key in node if isinstance(key, str))


def _subschemas(node: Any, path: Path) -> Iterator[tuple[Any, Path]]:
    """Every value of ``node`` with its path, ``node`` first (no recursion)."""
    stack: list[tuple[Any, Path]] = [(node, path)]
    while stack:
        value, at = stack.pop()
        yield value, at
        if isinstance(value, dict):
            stack.extend((v, (*at, str(k))) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*at, n)) for n, v in enumerate(value))


def _target(root: Any, ref: str, anchors: Mapping[str, Path]) -> tuple[Any, Path] | None:
    """What a local ``$ref`` points at, as jsonschema resolves it (None: nothing)."""
    fragment = ref[1:]
    if not fragment:
        return root, ()
    if not fragment.startswith("/"):
        path = anchors.get(fragment)
        return None if path is None else (_at(root, path), path)
    node, path = root, ()
    for raw in unquote(fragment)[1:].split("/"):
        if isinstance(node, list):
            if not (raw.isascii() and raw.isdigit() and int(raw) < len(node)):
                return None
            node, path = node[int(raw)], (*path, int(raw))
        elif isinstance(node, dict):
            part = raw.replace("~1", "/").replace("~0", "~")
            if part not in node:
                return None
            node, path = node[part], (*path, part)
        else:
            return None
    return node, path


def _at(root: Any, path: Path) -> Any:
    node = root
    for part in path:
        node = node[part]
    return node


def _in_place(node: JsonSchema, path: Path, refs: Mapping[Path, Path]) -> Iterator[Path]:
    """Paths of the subschemas ``node`` applies to the same value (its in-place edges)."""
    if path in refs:
        yield refs[path]
    for keyword in _IN_PLACE_ONE:
        if isinstance(node.get(keyword), dict):
            yield (*path, keyword)
    for keyword in _IN_PLACE_MANY:
        if isinstance(node.get(keyword), list):
            yield from (
                (*path, keyword, n) for n, s in enumerate(node[keyword]) if isinstance(s, dict)
            )
    if isinstance(node.get("dependentSchemas"), dict):
        deps = node["dependentSchemas"]
        yield from ((*path, "dependentSchemas", k) for k, s in deps.items() if isinstance(s, dict))


def _cycle(nodes: Mapping[Path, JsonSchema], refs: Mapping[Path, Path]) -> list[Path] | None:
    """A loop of in-place subschemas (each applies the next to the same value), if any."""
    done: set[Path] = set()
    for start in sorted(nodes, key=_pointer):  # the same loop named each time
        if start in done:
            continue
        trail: list[Path] = [start]
        on_trail = {start}
        edges = [iter(list(_in_place(nodes[start], start, refs)))]
        while edges:
            nxt = next(edges[-1], None)
            if nxt is None:
                done.add(trail[-1])
                on_trail.discard(trail.pop())
                edges.pop()
            elif nxt in on_trail:
                return [*trail[trail.index(nxt) :], nxt]
            elif nxt not in done and nxt in nodes:
                trail.append(nxt)
                on_trail.add(nxt)
                edges.append(iter(list(_in_place(nodes[nxt], nxt, refs))))
    return None


def check_schema_references(schema: Any, field: str = "schema") -> None:
    """Refuse references that could not be followed to an end, and dialect switches.

    ``schema`` has passed :func:`check_schema_shape` and the metaschema check, and refers
    to no other document.

    Raises:
        ValueError: ``$dynamicRef`` (or ``$recursiveRef``, or their anchors), ``$id`` below
            the root, ``$schema`` naming a dialect other than 2020-12, an anchor defined
            twice, a ``$ref`` that points at nothing (or at no schema), a loop of ``$ref``,
            ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else`` or
            ``dependentSchemas`` that applies a subschema to the value it started from, or
            a pattern the ``regex`` module cannot compile.
    """
    nodes: dict[Path, JsonSchema] = {}
    anchors: dict[str, Path] = {}
    for node, path in _subschemas(schema, ()):
        if isinstance(node, dict):
            nodes[path] = node
            _check_keywords(node, path, field)
            anchor = node.get("$anchor")
            if isinstance(anchor, str) and anchors.setdefault(anchor, path) != path:
                raise ValueError(f"{field} defines the anchor {anchor!r} twice")
    refs: dict[Path, Path] = {}
    for path, node in nodes.items():
        ref = node.get("$ref")
        if not isinstance(ref, str):
            continue
        found = _target(schema, ref, anchors)
        if found is None or not isinstance(found[0], dict | bool):
            what = "nothing" if found is None else f"a {type(found[0]).__name__}"
            raise ValueError(
                f"{field}'s $ref {ref!r} at {_pointer(path)} points at {what} in the "
                "schema, not a subschema"
            )
        if isinstance(found[0], dict):
            refs[path] = found[1]
    loop = _cycle(nodes, refs)
    if loop is not None:
        chain = " -> ".join(_pointer(p) for p in loop)
        raise ValueError(
            f"{field} applies itself to the same value without end ({chain}): each $ref "
            "loop must pass through a keyword that looks inside the value (properties, items)"
        )


def _check_keywords(node: JsonSchema, path: Path, field: str) -> None:
    """One (sub)schema's dynamic references, ``$id``, ``$schema`` and patterns."""
    import regex  # noqa: PLC0415 - 1.2 MB that only schemas need

    where = _pointer(path)
    dynamic = [k for k in _DYNAMIC if isinstance(node.get(k), str | bool)]
    if dynamic:
        raise ValueError(f"{field} uses {dynamic[0]} at {where}: only $ref is supported")
    if path and isinstance(node.get("$id"), str):
        raise ValueError(
            f"{field} has $id at {where}: only the root may have one (it would move where "
            "'#/...' references point)"
        )
    dialect = node.get("$schema")
    if isinstance(dialect, str) and dialect not in _DIALECTS:
        raise ValueError(
            f"{field} names the dialect {dialect!r} at {where}: schemas are draft 2020-12"
        )
    for pattern in _patterns(node):
        try:
            regex.compile(pattern)
        except (regex.error, OverflowError, RecursionError) as e:
            raise ValueError(f"{field} has a pattern at {where} that cannot be used: {e}") from None


def _patterns(node: JsonSchema) -> list[str]:
    """The regular expressions of one (sub)schema: ``pattern``, ``patternProperties`` names."""
    found = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
    if isinstance(node.get("patternProperties"), dict):
        found += [p for p in node["patternProperties"] if isinstance(p, str)]
    return found


# -- keywords that cannot raise ------------------------------------------------------------

Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterator[ValidationError]]


def guarded(keyword: Keyword) -> Keyword:
    """``keyword`` (a jsonschema keyword function), turning what it raises into a failure.

    A value nested deeper than the stack allows (through a recursive ``$ref``), a number no
    float holds, or a reference that cannot be resolved fails validation (closed) instead
    of raising out of ``iter_errors``. Other errors (a time limit) pass through.
    """

    def checked(
        validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[ValidationError]:
        try:
            yield from keyword(validator, value, instance, schema)
        except RecursionError:
            yield ValidationError("the value is nested too deeply to be checked")
        except (OverflowError, ZeroDivisionError, ValueError):
            yield ValidationError(f"{_kind(instance)} cannot be checked against this schema")
        except Unresolvable as e:
            yield ValidationError(f"the schema's reference cannot be resolved: {e}")

    checked.__name__ = getattr(keyword, "__name__", "keyword")
    return checked


def _kind(instance: Any) -> str:
    return "the number" if isinstance(instance, int | float) else "the value"


def multiple_of(
    validator: Any,
    divisor: Any,
    instance: Any,
    schema: Mapping[str, Any],  # noqa: ARG001 - jsonschema's keyword signature
) -> Iterator[ValidationError]:
    """``multipleOf`` exactly, on integers of any size and on floats that are not finite.

    jsonschema divides an integer by a float divisor as floats, which raises
    ``OverflowError`` for an integer past 1e308 (JSON has them: ``1`` and 400 zeros).
    """
    if not validator.is_type(instance, "number"):
        return
    if isinstance(instance, float) and not math.isfinite(instance):
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")
        return
    if isinstance(divisor, float):
        try:  # as jsonschema does (so 4.0 is a multiple of 0.1), exact only past floats
            quotient = instance / divisor
            failed = int(quotient) != quotient
        except OverflowError:
            failed = (Fraction(instance) / Fraction(divisor)).denominator != 1
    else:
        failed = bool(instance % divisor)
    if failed:
        yield ValidationError(f"{_short(instance)} is not a multiple of {divisor}")


def _short(number: Any) -> str:
    """``number`` for a message (an integer of thousands of digits is not spelled out)."""
    if isinstance(number, int) and number.bit_length() > 64:  # noqa: PLR2004
        return f"an integer of {number.bit_length()} bits"
    return repr(number)
