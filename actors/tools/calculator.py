"""The calculator tool: arithmetic on numbers, parsed with ``ast`` and never ``eval``-ed."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any, Final

from raytroupe.protocols import ToolError, ToolSpec

__all__ = ["CALCULATOR", "evaluate"]

CALCULATOR: Final = ToolSpec(
    name="calculator",
    description=(
        "Evaluate an arithmetic expression: numbers, + - * / // ** and parentheses, "
        "percentages (15% of 80), round() sqrt() abs() min() max()."
    ),
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 500}},
        "required": ["expression"],
        "additionalProperties": False,
    },
)

_BINARY: Final[dict[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Final[dict[type[ast.unaryop], Callable[[Any], Any]]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CURRENCY: Final = re.compile(r"[$\u20ac\u00a3\u00a5](?=\s*[\d.(])")
"""A currency sign before a number."""
_THOUSANDS: Final = re.compile(r"(\d),(\d{3})(?!\d)")
"""A thousands separator (``1,200``; ``1,234,567`` takes two passes)."""
_PERCENT_OF: Final = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b", re.IGNORECASE)
"""``15% of 80``: 15/100 of it."""
_PERCENT: Final = re.compile(r"(\d+(?:\.\d+)?)\s*%(?!\s*[\d.(])")
"""``15%`` not followed by an operand (``17 % 5`` stays the remainder)."""
_UNIT: Final = re.compile(r"(?<=[\d)%])\s*(?![eE][+-]?\d)([A-Za-z]+)(?:\s*/\s*[A-Za-z]+)?")
"""Words right after a number: its unit (``1375 km``, ``0.074 L/km``, ``4 requests``); not
``1e5``'s exponent. A word anywhere else (``a + 1``) is still an error."""
_MAX_UNITS: Final = 8
_FUNCTIONS: Final[dict[str, tuple[Callable[..., Any], int, int]]] = {
    "round": (round, 1, 2),
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "min": (min, 2, 20),
    "max": (max, 2, 20),
}
"""The functions an expression may call: (function, fewest and most arguments)."""
_MAX_EXPONENT: Final = 1000
_MAX_MAGNITUDE: Final = 10**100
_MAX_PLACES: Final = 20
_PLACES: Final = 10
"""Decimal places a float result is given with (``0.1 + 0.2`` is 0.3, not 0.30000000000000004)."""


def evaluate(expression: str) -> int | float:
    """The value of ``expression``; ``^`` is read as ``**``, `` x `` and the times sign as ``*``.

    Written as people (and small models) write prices, it is read as meant: currency signs
    are dropped (``$12.50 * 3``), thousands separators joined (``1,200 * 3``), a percentage
    is a hundredth (``15% of 80``, ``80 * 15%``), units after numbers are dropped
    (``1375 km * 0.074 L/km``) and an equation is read for its arithmetic side (``3 * 4 =
    ?``, ``x = 3 * 4``). A comma that is not one between digits is still an error, and so is
    text with no arithmetic in it. Float results are given to 10 decimal places.

    Raises:
        ToolError: not arithmetic, division by zero, or a result too large to be useful.
    """
    text = _readable(expression)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None
    try:
        value = _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError(f"division by zero in {expression!r}") from None
    except OverflowError:
        raise ToolError(f"{expression!r} overflows") from None
    except RecursionError:
        raise ToolError("expression is nested too deeply") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolError(f"{expression!r} has no finite value")
        value = round(value, _PLACES)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _readable(expression: str) -> str:
    """``expression`` as Python arithmetic (see :func:`evaluate`); parsed by the caller."""
    text = expression.replace("^", "**").replace("\u00d7", "*").replace("\u00f7", "/")
    text = re.sub(r"\s[xX]\s", " * ", text)
    text = _CURRENCY.sub("", text)
    while _THOUSANDS.search(text):
        text = _THOUSANDS.sub(r"\1\2", text)
    text = _PERCENT_OF.sub(r"(\1 / 100) *", text)
    text = _PERCENT.sub(r"(\1 / 100)", text)
    if text.count("=") == 1 and "==" not in text:  # an equation: its side with the numbers
        left, right = text.split("=")
        text = left if re.search(r"\d", left) else right
    for _ in range(_MAX_UNITS):  # "3 dollars per hour": one word after the number each pass
        unitless = _UNIT.sub(lambda m: m.group() if m.group(1) in _FUNCTIONS else "", text)
        if unitless == text:
            break
        text = unitless
    return text.strip()


def _eval(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in {int, float}:
        return float(node.value) if isinstance(node.value, float) else int(node.value)  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        result: int | float = _UNARY[type(node.op)](_eval(node.operand))
        return result
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ToolError(f"exponent {right} is larger than {_MAX_EXPONENT}")
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, complex) or abs(result) > _MAX_MAGNITUDE:
            raise ToolError("result out of range")
        return result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _called(node.func.id, [_eval(arg) for arg in node.args])
    raise ToolError(f"unsupported element in expression: {ast.dump(node)[:80]}")


def _called(name: str, args: list[int | float]) -> int | float:
    if name not in _FUNCTIONS:
        raise ToolError(f"unknown function {name!r} (known: {', '.join(_FUNCTIONS)})")
    function, fewest, most = _FUNCTIONS[name]
    if not fewest <= len(args) <= most:
        raise ToolError(f"{name}() takes {fewest} to {most} numbers, not {len(args)}")
    if name == "round" and len(args) == 2:  # noqa: PLR2004
        places = args[1]
        if not isinstance(places, int) or abs(places) > _MAX_PLACES:  # round(1, -10**9) is slow
            raise ToolError(f"round()'s places must be a whole number from -20 to 20, not {places}")
    try:
        result: int | float = function(*args)
    except ValueError as e:  # sqrt(-1)
        raise ToolError(f"{name}() of {', '.join(map(str, args))}: {e}") from None
    return result
