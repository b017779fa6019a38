"""The offline provider's answers shaped by a JSON Schema, and its grades.

- :func:`shaped` turns a plain answer into JSON that satisfies the request's
  ``response_format`` schema, as a model under constrained decoding would: an object gets
  its properties (all of them), a string the answer (or, with an ``enum``, the value that
  shares the most words with its statements), a number the first number in it (else the
  middle of its bounds, or 0; a bounded number whose name the answer does not hold is that
  middle), a boolean whether it says yes, an array its sentences (within
  ``minItems``/``maxItems``). A property is looked for after its name's first word in the
  answer ("total" -> the number after "total"): a ``date`` is the first date there, in ISO
  form; a property named like an identifier (``..._number``, ``id``, ``code``) the first
  token there with a digit.
- :func:`grade` answers a ``grade`` request (:func:`raytroupe.actors.skills.gate.grade_request`):
  the score is the share of the rubric's content words that the answer holds, the
  rationale names them. Deterministic, and moved by what the answer says.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, Final

from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.output_schema import local_ref

__all__ = ["grade", "shaped"]

_WORD: Final = re.compile(r"[a-z0-9]+")
_NUMBER: Final = re.compile(r"(?<![\w-])-?\d[\d,]*(?:\.\d+)?(?![\w-])")
_ID: Final = re.compile(r"\b[A-Za-z]*[-#]?\d[\w-]*\b")
_ID_WORDS: Final = frozenset({"id", "number", "no", "code", "ref", "reference"})
_MONTH: Final = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_DATE: Final = re.compile(
    rf"\d{{4}}-\d{{2}}-\d{{2}}|{_MONTH} \d{{1,2}},? \d{{4}}|\d{{1,2}} {_MONTH} \d{{4}}"
)
_NAME_WORD_LEN: Final = 3
_SENTENCE_END: Final = re.compile(r"(?<=[.!?;])\s+")
_YES: Final = re.compile(r"\b(yes|true|correct|valid|approved?)\b", re.IGNORECASE)
_CONTENT_WORD_LEN: Final = 4
_MAX_DEPTH: Final = 8
_DEFAULT_ITEMS: Final = 3


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def shaped(schema: JsonSchema, answer: str) -> str:
    """``answer`` as JSON text satisfying ``schema`` (the common keywords of it)."""
    return json.dumps(_fill(schema, answer, schema, 0))


def _resolve(node: JsonSchema, root: JsonSchema) -> JsonSchema:
    node = local_ref(node, root)
    for key in ("anyOf", "oneOf", "allOf"):
        options = node.get(key)
        if isinstance(options, list) and options and isinstance(options[0], dict):
            return {**{k: v for k, v in node.items() if k != key}, **options[0]}
    return node


def _fill(  # noqa: PLR0911 - one return per JSON type
    node: JsonSchema, answer: str, root: JsonSchema, depth: int, name: str = ""
) -> Any:
    node = _resolve(node, root)
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return _closest(node["enum"], answer)
    kind = node.get("type", "object" if "properties" in node else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if depth > _MAX_DEPTH:
        return None
    match kind:
        case "object":
            properties = node.get("properties") or {}
            return {
                key: _fill(sub if isinstance(sub, dict) else {}, answer, root, depth + 1, key)
                for key, sub in properties.items()
            }
        case "array":
            return _items(node, answer, root, depth)
        case "integer" | "number":
            after = _after(name, answer)
            if after is answer and "minimum" in node and "maximum" in node:
                after = ""  # a bounded figure (a confidence) is not any number of the text
            return _number(node, after, integer=kind == "integer")
        case "boolean":
            return bool(_YES.search(answer))
        case "null":
            return None
        case _:
            return _string(node, answer, name)


def _closest(values: list[Any], answer: str) -> Any:
    """The value sharing the most words with the answer's statements (questions aside)."""
    sentences = [
        t for t in _SENTENCE_END.split(answer.strip()) if not t.rstrip("'\" ").endswith("?")
    ]
    wanted = _words(" ".join(sentences) or answer)
    return max(values, key=lambda v: (len(wanted & _words(str(v))), -values.index(v)))


def _items(node: JsonSchema, answer: str, root: JsonSchema, depth: int) -> list[Any]:
    sentences = [s.strip() for s in _SENTENCE_END.split(answer.strip()) if s.strip()] or [answer]
    low = int(node.get("minItems", 1))
    high = int(node.get("maxItems", max(low, _DEFAULT_ITEMS)))
    count = max(low, min(high, len(sentences)))
    given = node.get("items")
    item: dict[str, Any] = given if isinstance(given, dict) else {}
    return [_fill(item, sentences[i % len(sentences)], root, depth + 1) for i in range(count)]


def _after(name: str, answer: str) -> str:
    """The answer from the first word of a property's name on (all of it, if none occurs)."""
    for word in re.split(r"[_\W]+", name.lower()):
        if len(word) >= _NAME_WORD_LEN:
            found = re.search(rf"\b{re.escape(word)}", answer, re.IGNORECASE)
            if found is not None:
                return answer[found.end() :]
    return answer


def _number(node: JsonSchema, answer: str, *, integer: bool) -> float | int:
    found = _NUMBER.search(answer)
    low, high = node.get("minimum"), node.get("maximum")
    middle = (float(low) + float(high)) / 2 if low is not None and high is not None else None
    fallback = middle if middle is not None else float(low or 0)
    value = float(found.group(0).replace(",", "")) if found else fallback
    if "minimum" in node:
        value = max(value, float(node["minimum"]))
    if "maximum" in node:
        value = min(value, float(node["maximum"]))
    return round(value) if integer else value


def _date(text: str, *, with_time: bool) -> str | None:
    for found in _DATE.finditer(text):
        said = found.group(0).replace(",", "")
        for fmt in ("%Y-%m-%d", "%B %d %Y", "%d %B %Y", "%b %d %Y", "%d %b %Y"):
            try:
                day = dt.datetime.strptime(said, fmt)  # noqa: DTZ007 - a calendar date
            except ValueError:
                continue
            return day.isoformat() if with_time else day.date().isoformat()
    return None


def _string(node: JsonSchema, answer: str, name: str = "") -> str:
    after = _after(name, answer) if name else answer
    if node.get("format") in {"date", "date-time"}:
        when = _date(after, with_time=node["format"] == "date-time") or _date(
            answer, with_time=node["format"] == "date-time"
        )
        if when is not None:
            return when
    if set(re.split(r"[_\W]+", name.lower())) & _ID_WORDS:
        token = _ID.search(after) or _ID.search(answer)
        if token is not None:
            return token.group(0)
    text = answer.strip() or "(no answer)"
    low, high = int(node.get("minLength", 0)), node.get("maxLength")
    if high is not None:
        text = text[: int(high)]
    return text.ljust(low, ".")


def grade(prompt: str) -> str:
    """JSON ``{"score", "rationale"}`` for a grade request's user message."""
    rubric, _, rest = prompt.partition("Rubric:\n")[2].partition("\n\nRequest:\n")
    _, _, answer = rest.partition("\n\nAnswer:\n")
    wanted = {w for w in _words(rubric) if len(w) >= _CONTENT_WORD_LEN}
    held = sorted(wanted & _words(answer))
    score = len(held) / len(wanted) if wanted else 1.0
    said = ", ".join(held[:12]) or "none"
    return json.dumps(
        {
            "score": round(score, 3),
            "rationale": f"the answer holds {len(held)} of the rubric's {len(wanted)} "
            f"content words: {said}",
        }
    )
