r"""The arithmetic a model wrote out in its answer, each step recomputed by the calculator.

Asked to compute, a small model often writes its working (``48 \times 2.35 = 112.80``,
``\frac{555}{1480} \approx 0.380``) and carries a slip from one step to the next: the
modelling is right and a product or quotient is not. :func:`written_steps` finds every step
written as ``expression = number`` (or ``≈``), in plain text or LaTeX, and recomputes its
expression with the calculator's own evaluator; :func:`wrong_steps` keeps the steps whose
stated number is not the value, to the places it was written with. The agent's arithmetic check
(``raytroupe.actors.agent.checks``) names those steps to the model in a corrective turn, and accepts
working whose every step is right. Working that is still wrong when the answer is taken is
recomputed (:func:`recomputed`): each wrong number is replaced by the calculator's value,
wherever the answer carries it on.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Final

from raytroupe.actors.tools.calculator import evaluate
from raytroupe.protocols import ToolError

__all__ = ["Step", "recomputed", "written_steps", "wrong_steps"]

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
    percent: bool = False

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
    # a stated percentage is of the value itself or of a hundredth of it, whichever is nearer
    percent = stated.group(3) == "%" and abs(value * 100 - number) < abs(value - number)
    if percent and not close:
        close = _close(value * 100, number, places)
    return Step(expression, stated.group(1), value, right=close, percent=percent)


def _close(value: float, number: float, places: int) -> bool:
    """Whether ``number``, written with ``places`` decimals, is ``value`` rounded (or exact)."""
    half_unit = 0.5 / 10.0**places
    return abs(value - number) <= half_unit * (1 + 1e-9) + 1e-12 * abs(value)


_FIXES: Final = 8
"""Wrong numbers one answer may have replaced: each fix can make a later step wrong (the
value it carried on changed), which the next fix mends."""


def recomputed(text: str, source: str) -> tuple[str, list[Step]]:
    """``text`` with the numbers its wrong steps state replaced by their values, and the steps.

    A model told its slip and writing the same working again (Qwen 1.5B: ``£215 * 58 + £140
    * 7 = £12,070`` twice) has set up the sum and cannot do it: the calculator does. A wrong
    number is replaced wherever the text states it, so a total carried into the next step
    and the final sentence changes with it, and the steps are recomputed, until none is
    wrong. A number the ``source`` text (the task) states too is left alone, and so is the
    whole text (no steps) when a step cannot be mended that way: it may be a fact, not a slip.
    """
    fixed: list[Step] = []
    mended = text
    for _ in range(_FIXES):
        wrong = wrong_steps(mended)
        if not wrong:
            return mended, fixed
        step = wrong[0]
        mention = _mention(step.stated)
        if mention.search(source):
            break
        mended = mention.sub(_written(step), mended)
        fixed.append(step)
    return text, []


def _mention(stated: str) -> re.Pattern[str]:
    """``stated`` as a whole number of a text (not inside a longer one, commas or not)."""
    digits = re.escape(stated).replace(",", ",?")
    return re.compile(rf"(?<![\d.,]){digits}(?![\d]|[.,]\d)")


def _written(step: Step) -> str:
    """A step's value, written as its wrong number was (thousands commas, decimal places)."""
    value = step.value * 100 if step.percent else step.value
    places = len(step.stated.partition(".")[2])
    shown = f"{value:,.{max(places, 2)}f}" if value != round(value) or places else f"{value:,.0f}"
    if not places and "." in shown:
        shown = shown.rstrip("0").rstrip(".")
    return shown if "," in step.stated else shown.replace(",", "")
