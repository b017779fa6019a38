"""The output standardizer: any job's answer as one :class:`StandardOutput`.

``data`` is the answer's JSON (a fenced block counts), normalized where its schema says
what a value is, so that clients read one type whatever the model wrote:

- ``number``/``integer``: ``"1,234.5"`` -> ``1234.5``, ``"42"`` -> ``42``;
- ``boolean``: ``yes/no``, ``true/false``, ``y/n``, ``1/0``, ``on/off`` in any case;
- ``string`` with ``format: date`` -> ``YYYY-MM-DD``; ``date-time`` -> ISO 8601 (from ISO,
  ``2024/06/01``, ``June 1, 2024``, ``1 June 2024``, ``Jun 1 2024``; others left as written);
- ``enum``: the listed value that matches ignoring case and surrounding space.

A value that cannot be normalized is left as the model wrote it (the gate judged it).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Final

from raytroupe.actors.answer_gate import load_json
from raytroupe.protocols import JobResult
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.output_schema import local_ref
from raytroupe.protocols.quality import QualityReport, StandardOutput
from raytroupe.protocols.skill import SkillSpec

__all__ = ["normalize", "standard_output"]

_TRUE: Final = frozenset({"yes", "true", "y", "1", "on"})
_FALSE: Final = frozenset({"no", "false", "n", "0", "off"})
_NUMBER: Final = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?$")
_DATE_FORMATS: Final = ("%Y/%m/%d", "%B %d, %Y", "%B %d %Y", "%d %B %Y", "%b %d, %Y",
                        "%b %d %Y", "%d %b %Y")  # fmt: skip
_MAX_DEPTH: Final = 16


def standard_output(
    result: JobResult,
    *,
    skill: SkillSpec | None = None,
    quality: QualityReport | None = None,
    schema: JsonSchema | None = None,
) -> StandardOutput:
    """``result``'s answer in the standard shape (``schema``: the answer's output schema)."""
    try:
        data = load_json(result.answer) if result.answer.strip() else None
    except ValueError:
        data = None
    if data is not None and schema is not None:
        data = normalize(data, schema)
    trace_id = next((s.trace_id for s in result.trace if s.trace_id), None)
    return StandardOutput(
        skill=skill.name if skill else None,
        version=skill.version if skill else None,
        team=result.team,
        produced_at=result.timings.finished_at,
        quality=quality,
        data=data,
        text=result.answer,
        usage=result.usage,
        trace_id=trace_id,
    )


def normalize(value: Any, schema: JsonSchema, root: JsonSchema | None = None) -> Any:
    """``value`` with its numbers, booleans, dates and enums as ``schema`` types them."""
    return _normalize(value, schema, root or schema, 0)


def _normalize(value: Any, node: dict[str, Any], root: dict[str, Any], depth: int) -> Any:  # noqa: PLR0911 - one return per kind
    node = local_ref(node, root)
    if depth > _MAX_DEPTH:
        return value
    if isinstance(node.get("enum"), list):
        return _enum(value, node["enum"])
    kinds = node.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if isinstance(value, dict) and isinstance(node.get("properties"), dict):
        props = node["properties"]
        return {k: _normalize(v, props[k], root, depth + 1) if isinstance(props.get(k), dict)
                else v for k, v in value.items()}  # fmt: skip
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_normalize(v, node["items"], root, depth + 1) for v in value]
    if isinstance(value, str):
        if kinds & {"number", "integer"}:
            return _number(value, integer="number" not in kinds)
        if "boolean" in kinds:
            return _boolean(value)
        if node.get("format") in {"date", "date-time"}:
            return _date(value, with_time=node["format"] == "date-time")
    if isinstance(value, float) and "integer" in kinds and value.is_integer():
        return int(value)
    return value


def _enum(value: Any, options: list[Any]) -> Any:
    if value in options or not isinstance(value, str):
        return value
    wanted = value.strip().casefold()
    return next((o for o in options if isinstance(o, str) and o.casefold() == wanted), value)


def _number(text: str, *, integer: bool) -> Any:
    stripped = text.strip()
    if not stripped or not _NUMBER.match(stripped):
        return text
    number = float(stripped.replace(",", ""))
    return int(number) if integer and number.is_integer() else number


def _boolean(text: str) -> Any:
    said = text.strip().casefold()
    return True if said in _TRUE else False if said in _FALSE else text


def _date(text: str, *, with_time: bool) -> str:
    stripped = text.strip()
    try:
        parsed = dt.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
        for fmt in _DATE_FORMATS:
            try:
                parsed = dt.datetime.strptime(stripped, fmt)  # noqa: DTZ007 - a calendar date
                break
            except ValueError:
                continue
    if parsed is None:
        return text
    return parsed.isoformat() if with_time else parsed.date().isoformat()
