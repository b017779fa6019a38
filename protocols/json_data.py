r"""JSON values callers send as data (a graph's state edit, a resume value), as they may be.

JSON may escape half of a surrogate pair (``"\ud800"``), and Python's parser reads it, or
the same bytes written raw in CESU-8, as a lone surrogate: text no UTF-8 encoder takes. Kept
in a graph checkpoint or a journal row, such a value fails there, after the request was
accepted (a 500); a value nested hundreds deep does the same to the recursive encoders and
validators it meets. :data:`JsonData` refuses both where the value comes in.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, TypeAlias

from pydantic import AfterValidator

__all__ = [
    "MAX_DATA_DEPTH",
    "JsonData",
    "JsonObject",
    "JsonSchema",
    "check_json_data",
    "is_unicode",
]

MAX_DATA_DEPTH: Final = 64
"""Objects and arrays nested in one value, at most."""


def is_unicode(text: str) -> bool:
    """Whether ``text`` encodes to UTF-8 (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_json_data(value: Any) -> Any:
    """``value``, if its text is Unicode and it nests at most :data:`MAX_DATA_DEPTH` deep.

    Walks ``value`` without recursion.

    Raises:
        ValueError: a string (or an object's key) holds a lone surrogate, or the value
            nests deeper than :data:`MAX_DATA_DEPTH`.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str) and not is_unicode(node):
            raise ValueError("the value holds text that is not Unicode (a lone surrogate)")
        if not isinstance(node, dict | list):
            continue
        if depth >= MAX_DATA_DEPTH:
            raise ValueError(f"the value nests deeper than {MAX_DATA_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((key, depth) for key in node)
            node = list(node.values())
        stack.extend((item, depth + 1) for item in node)
    return value


JsonData = Annotated[Any, AfterValidator(check_json_data)]
"""Any JSON value, checked by :func:`check_json_data`."""
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json_data)]
"""A JSON object, its keys and values checked by :func:`check_json_data`."""

JsonSchema: TypeAlias = dict[str, Any]
"""A JSON Schema (draft 2020-12): a JSON object whose keywords only a validator reads, so no
narrower type describes it. One a caller gives is checked by
:func:`~raytroupe.protocols.output_schema.check_output_schema` (size, depth, refs, patterns)."""
