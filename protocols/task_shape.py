"""What a task's text says about its shape: how many independent parts it has, what they need.

The orchestrator sizes a job from these before it asks any model
(``raytroupe.actors.orchestrator.sizing``) and an agent checks its arithmetic with them
(``raytroupe.actors.agent.checks``). They read text only, and are conservative: when a task's parts
are not plainly independent, it is one part (one agent with the whole task is never worse than a
wrong split), and only a question that plainly asks for a number needs the calculator.

- :func:`task_parts`: the independent questions of a task that lists them (numbered or
  bulleted items that are questions, or items under a heading such as ``Questions:``), each
  with its marker; the rest of the task is their shared context. Items that refer to each
  other (``the result of 2``, ``the answer above``) are not independent: the task is one part.
- :func:`needs_arithmetic`: whether a text asks for a computed number (an arithmetic
  expression, or numbers with a question such as "how many ..." or "what is the total ...").
- :func:`stands_alone`: whether a part is arithmetic written out in full (``17 * 23 + 4``),
  so the text the parts share is not given with it.
- :func:`numbers_in` / :func:`mentions_number`: the numbers an answer states, so an answer can
  be checked against a calculator's result; :func:`restates_numbers`: whether it only restates
  numbers of the text it was given (a lookup, not a computation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "Part",
    "TaskParts",
    "mentions_number",
    "needs_arithmetic",
    "numbers_in",
    "restates_numbers",
    "stands_alone",
    "task_parts",
]

_MARKS: Final = r"\(?\d{1,3}[.)]|\[\d{1,3}\]|\(?[a-hA-H]\)|[a-h]\.|[-*\u2022]"
"""List markers: ``1.``, ``1)``, ``(1)``, ``[1]``, ``a)``, ``(a)``, ``a.``, ``-``, ``*``,
bullets."""
_ITEM: Final = re.compile(rf"^\s{{0,3}}({_MARKS})\s+(\S.*?)\s*$")
"""A list item: its marker, then its text."""
_WH: Final = re.compile(
    r"^(?:(?:and|or|also)\s+)?(?:(?:by|in|on|at|for|from|to|with|of)\s+)?"
    r"(?:who|whom|whose|what|when|where|which|why|how)\b",
    re.IGNORECASE,
)
"""An item that is a question without its question mark: "• who chooses the films,", "• and
by what percentage admissions went up."."""

_ASKS: Final = re.compile(
    r"\b(questions?|tasks?|answer|answers|parts?|do the following|the following|tell me|"
    r"(?:want|need|like) to know|find out)\b[^\n]*:\s*$",
    re.IGNORECASE,
)
"""A heading that introduces the items as things to answer or do."""

_REFERS: Final = re.compile(
    r"\b(above|below|previous(ly)?|preceding|earlier|former|latter|"
    r"(that|this) (answer|result|number|value)|the (answer|result|number|value)\b(?!\s+of\b)|"
    r"(question|step|part|item|task) \(?#?\d{1,3}\)?|"
    r"(answer|result)s? (of|to|from) (the )?(first|second|third|last|other|\(?\d))\b",
    re.IGNORECASE,
)
"""Words by which one item leans on another: such items are not independent parts."""

_EXPRESSION: Final = re.compile(
    r"\d\s*(?:[*/\u00d7\u00f7^]|\*\*)\s*\(?\s*[\d.]"  # 17 * 23, 3/4, 2^10
    r"|\d\s+[-+xX]\s+\(?\s*\d"  # 17 + 4, 20 - 3, 3 x 4 (spaced: not 2024-25, not 2x)
    r"|\d\s*%\s*of\b",  # 15% of 80
)
"""An arithmetic expression written out."""

_CLOSED: Final = re.compile(r"\d\s*(?:[*/\u00d7\u00f7^]|\*\*)\s*\(?\s*[\d.]|\d\s+[-+xX]\s+\(?\s*\d")
"""An expression of numbers only (``17 * 23 + 4``): no ``15% of`` something else."""

_POINTS_AWAY: Final = re.compile(
    r"\b(given|listed|stated|mentioned|these|those|the (text|passage|context|list|table))\b",
    re.IGNORECASE,
)
"""Words by which a question points at text outside it."""

_YEAR_RANGE: Final = re.compile(r"\b(1[5-9]|20)\d\d\s*[-\u2013]\s*(1[5-9]|20)?\d\d\b")
"""A range of years (``2024 - 2025``, ``1990-95``): not a subtraction."""

_QUANTITY: Final = (
    r"(the |their |its |his |her |our |my |your )?"
    r"(new |final |total |combined |overall |average |mean |remaining |net )?"
    r"(total|sum|average|mean|product|difference|cost|price|amount|bill|balance|value|"
    r"result|number|percentage|profit|change|speed|rate|area|volume|distance)\b"
)
_ASKS_NUMBER: Final = re.compile(
    r"\bhow (many|much|long|far|old|fast|heavy)\b"
    r"|\b(calculate|compute|work out|add up|figure out)\b"
    r"|\bby how (many|much)\b"
    rf"|\bwhat (is|was|will be|are|were|would be) {_QUANTITY}"
    rf"|\b(find|determine|give|tell me|state) (me )?{_QUANTITY}"
    r"|\bwhat\b[^?.!]{0,80}\b(cost|weigh|earn|pay|owe|spend|save|charge|come to)s?\b"
    r"|\b(by |at )?what (percent|percentage|fraction|speed|rate|price)\b"
    r"|\b(in total|altogether|in all|combined)\s*\?",
    re.IGNORECASE,
)
"""A question (or instruction) that asks for a computed number."""

_WORD_VALUES: Final = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "hundred": 100, "thousand": 1000, "dozen": 12,
}  # fmt: skip
"""The values of number words; ``half``, ``twice`` and the like state no number by themselves."""

_NUMBER_WORD: Final = re.compile(
    rf"\b({'|'.join(_WORD_VALUES)}|half|twice|double|triple)\b", re.IGNORECASE
)
"""A number written as a word ("the six of us"), counted when a question may need arithmetic."""

_NUMBER: Final = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
"""A number as written in prose (``1,234.5``, ``-3``, ``12``)."""


@dataclass(frozen=True)
class Part:
    """One independent question of a task, with the marker it was listed with (``1.``)."""

    marker: str
    text: str


@dataclass(frozen=True)
class TaskParts:
    """A task's independent parts and the context they share.

    One part: the whole request (``context`` empty: the task is its own context).
    """

    parts: tuple[Part, ...]
    context: str

    @property
    def split(self) -> bool:
        """Whether the task has more than one independent part."""
        return len(self.parts) > 1


def task_parts(task: str) -> TaskParts:
    """The independent parts of ``task`` (see the module's docstring).

    A task is split only by one list whose items are all questions (end with ``?``, or open
    with who, what, how ...: "• who chooses the films,") or sit under a heading that asks for
    them (``Questions:``, ``Tasks:``, ``Answer the following:``, ``Tell me:``),
    with no item leaning on another. Anything else, a task with two such lists included, is
    one part. The context of the parts is the task without the list (and its heading).

    ``task`` is what was asked (``prompts.asked``): a job's history and examples are fields
    of its context, never part of it.
    """
    whole = TaskParts(parts=(Part(marker="", text=task.strip()),), context="")
    lines = task.splitlines()
    blocks = [b for b in _blocks(lines) if _asked(lines, b)]
    if len(blocks) != 1:
        return whole
    start, end, heading = blocks[0]
    items = [_ITEM.match(lines[i]) for i in range(start, end)]
    parts = tuple(Part(marker=m.group(1), text=m.group(2)) for m in items if m is not None)
    if len(parts) < 2 or any(_REFERS.search(p.text) for p in parts):  # noqa: PLR2004
        return whole
    kept = lines[: heading if heading is not None else start] + lines[end:]
    return TaskParts(parts=parts, context="\n".join(kept).strip())


def _blocks(lines: list[str]) -> list[tuple[int, int, int | None]]:
    """Runs of consecutive list items: (first line, line after the last, heading line or None).

    Blank lines between items do not end a run; the heading is the non-blank line just before
    the first item, when it ends with a colon.
    """
    blocks: list[tuple[int, int, int | None]] = []
    i = 0
    while i < len(lines):
        if not _ITEM.match(lines[i]):
            i += 1
            continue
        start = end = i
        while end < len(lines) and (_ITEM.match(lines[end]) or not lines[end].strip()):
            end += 1
        while end > start and not lines[end - 1].strip():
            end -= 1
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        heading = before if before >= 0 and lines[before].rstrip().endswith(":") else None
        blocks.append((start, end, heading))
        i = end
    return blocks


def _asked(lines: list[str], block: tuple[int, int, int | None]) -> bool:
    """Whether a run of items is a list of things to answer: all questions, or so headed."""
    start, end, heading = block
    texts = [m.group(2) for i in range(start, end) if (m := _ITEM.match(lines[i]))]
    if len(texts) < 2:  # noqa: PLR2004 - one item is not a list
        return False
    if all(t.endswith("?") or _WH.match(t) for t in texts):
        return True
    return heading is not None and bool(_ASKS.search(lines[heading]))


def needs_arithmetic(text: str, context: str = "") -> bool:
    """Whether ``text`` asks for a computed number (see the module's docstring).

    The numbers may be in ``context`` (one part of a task asking "what is the total cost?"
    of prices given in the text the parts share). Both are what was asked: a session's
    history or examples ask nothing now, and are never passed.
    """
    if _EXPRESSION.search(_YEAR_RANGE.sub(" ", text)):
        return True
    numbers = sum(len(numbers_in(t)) + len(_NUMBER_WORD.findall(t)) for t in (text, context))
    return numbers >= 2 and bool(_ASKS_NUMBER.search(text))  # noqa: PLR2004


def stands_alone(text: str) -> bool:
    """Whether ``text`` is arithmetic written out in full, needing no other text to answer.

    "How many requests are 17 * 23 + 4 requests?" does; "What is 15% of the total above?"
    and "Multiply 3 * 4 by the price given" do not. Given a passage it does not need, a
    small model was seen reading the passage for numbers instead of computing.
    """
    closed = _CLOSED.search(_YEAR_RANGE.sub(" ", text))
    return bool(closed) and not _REFERS.search(text) and not _POINTS_AWAY.search(text)


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text``, in order (thousands separators read as such)."""
    found = []
    for raw in _NUMBER.findall(text):
        try:
            found.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return found


def mentions_number(text: str, value: float) -> bool:
    """Whether ``text`` states ``value`` (exactly, or rounded to 2 decimal places or fewer)."""
    for stated in numbers_in(text):
        if stated == value:
            return True
        for places in (0, 1, 2):
            if round(value, places) == stated and round(stated, places) == stated:
                return True
    return False


def restates_numbers(answer: str, source: str) -> bool:
    """Whether ``answer`` states numbers, and only numbers ``source`` states too.

    Such an answer looked a number up ("each wheel is aged for six weeks") and computed none:
    a question read as arithmetic ("how long ...?" of a passage with numbers) may be a
    question of fact. A number written as a word is its value (``six`` is ``6``).
    """
    stated = _all_numbers(answer)
    return bool(stated) and stated <= _all_numbers(source)


_MARKER: Final = re.compile(rf"^\s*(?:{_MARKS})\s", re.MULTILINE)
"""A list item's marker (``1.``, ``2)``): the answer's layout, not a number it states."""


def _all_numbers(text: str) -> set[float]:
    """The numbers ``text`` states, in digits or as words (``six`` and ``6`` are one)."""
    text = _MARKER.sub(" ", text)
    words = (_WORD_VALUES.get(w.lower()) for w in _NUMBER_WORD.findall(text))
    return {*numbers_in(text), *(float(v) for v in words if v is not None)}
