r"""The arithmetic a model wrote out in its answer, each step recomputed by the calculator.

Asked to compute, a small model often writes its working (``48 \times 2.35 = 112.80``,
``\frac{555}{1480} \approx 0.380``) and carries a slip from one step to the next: the
modelling is right and a product or quotient is not. :func:`written_steps` finds every step
written as ``expression = number`` (or ``≈``), in plain text or LaTeX, and recomputes its
expression with the calculator's own evaluator; :func:`wrong_steps` keeps the steps whose
stated number is not the value, to the places it was written with. The agent's arithmetic check
(``actors.agent.checks``) names those steps to the model in a corrective turn, and accepts
working whose every step is right.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Final

from raytroupe.actors.tools.calculator import evaluate
from raytroupe.protocols import ToolError

__all__ = ["Step", "written_steps", "wrong_steps"]

_LATEX: Final = (
    (re.compile(r"\\([$%])"), r"\1"),  # \$19.50, 12.5\%
    (re.compile(r"\\(?:text|mathrm)\s*\{[^{}]*\}(?:\s*\^\s*\{?\d\}?)?"), " "),  # m^2: a unit
    (re.compile(r"\\left\s*[(\[]|\\right\s*[)\]]"), lambda m: "(" if "left" in m[0] else ")"),
    (
        re.compile(
            r"\\(times|cdot)\b|[\u00d7\u00b7\u22c5]|(?<=\d)\s+[xX]\s+(?=[\d$\u20ac\u00a3(])"
        ),
        " * ",
    ),
    (re.compile(r"\\div\b|\u00f7"), " / "),
    (re.compile(r"\\approx\b|\u2248"), " \u2248 "),
    (re.compile(r"\\[,;! ]|\\quad\b"), " "),
    (re.compile(r"\\[\[\]()]|\$\$|\$(?![\d.(])|\\boxed\b|[{}]"), "\n"),
)
"""LaTeX as small models write arithmetic, to the calculator's plain form (``\\frac`` apart)."""

_FRAC: Final = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_RELATION: Final = re.compile(r"(?<![=<>!])(?:=|\u2248)(?!=)")
_RUN: Final = re.compile(r"[\d\s.,+\-*/()%^$\u20ac\u00a3]+$")
"""The arithmetic that ends a stretch of text: digits, operators, parentheses, signs."""
_OPERATOR: Final = re.compile(r"[\d)%]\s*(?:[-+*/^]|\*\*)\s*[-(\d$\u20ac\u00a3]")
_STATED: Final = re.compile(
    r"^\s*[$\u20ac\u00a3]?\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?)(?![\d,.]*\d)\s*(%?)(?!\s*(?:[-+*/^(]|\d))"
)
"""The number a step states: not the start of another expression (``= 110.40 * 0.85``)."""
_MAX_STEPS: Final = 40


@dataclass(frozen=True)
class Step:
    """One step of written working: its expression, the number stated for it, its value."""

    expression: str
    stated: str
    value: int | float
    right: bool

    @property
    def shown(self) -> str:
        """The value as the calculator gives it (``0.375``, ``112.8``, ``395``)."""
        return str(self.value)


def written_steps(text: str) -> list[Step]:
    """Each ``expression = number`` step of ``text`` (at most 40), with its recomputed value.

    Only a step whose left side is arithmetic the calculator reads, with an operator between
    numbers, counts (``Total = 12`` and ``x = 3`` are not steps). A number written as a
    percentage is right as the value or as a hundredth of it (``555 / 1480 = 37.5%``).
    """
    steps: list[Step] = []
    for line in _plain(text).splitlines():
        pieces = _RELATION.split(line)
        for left, right in itertools.pairwise(pieces):
            step = _step(left, right)
            if step is not None:
                steps.append(step)
            if len(steps) >= _MAX_STEPS:
                return steps
    return steps


def wrong_steps(text: str) -> list[Step]:
    """The steps of ``text`` whose stated number is not their value."""
    return [s for s in written_steps(text) if not s.right]


def _plain(text: str) -> str:
    for _ in range(4):  # \frac inside \frac: the innermost first
        text = _FRAC.sub(r"((\1) / (\2))", text)
    for pattern, plain in _LATEX:
        text = pattern.sub(plain, text)
    return text


_REACH: Final = 200
"""Characters before a relation that a step's expression may take: bounds the scan of a
long line a model wrote (or was made to write) to a fixed cost per step."""


def _step(left: str, right: str) -> Step | None:
    run = _RUN.search(left[-_REACH:])
    stated = _STATED.match(right)
    if run is None or stated is None:
        return None
    last = re.split(r"[.,:;]\s+", run.group())[-1]  # not across "= 391. 391 + 4" or ", "
    expression = " ".join(last.strip().lstrip("*/+^,. ").split())
    if not _OPERATOR.search(expression) or not re.match(r"[-(\d$\u20ac\u00a3]", expression):
        return None
    try:
        value = evaluate(expression)
    except ToolError:
        return None
    number = float(stated.group(1).replace(",", ""))
    places = len(stated.group(2) or "")
    close = _close(value, number, places)
    if stated.group(3) == "%" and not close:
        close = _close(value * 100, number, places)
    return Step(expression=expression, stated=stated.group(1), value=value, right=close)


def _close(value: float, number: float, places: int) -> bool:
    """Whether ``number``, written with ``places`` decimals, is ``value`` rounded (or exact)."""
    half_unit = 0.5 / 10.0**places
    return abs(value - number) <= half_unit * (1 + 1e-9) + 1e-12 * abs(value)
