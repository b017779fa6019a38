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
    description="Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses.",
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
_MAX_EXPONENT: Final = 1000
_MAX_MAGNITUDE: Final = 10**100


def evaluate(expression: str) -> int | float:
    """The value of ``expression``; ``^`` is read as ``**``, `` x `` and the times sign as ``*``.

    Written as people (and small models) write prices, it is read as meant: currency signs
    are dropped (``$12.50 * 3``) and thousands separators joined (``1,200 * 3``); a comma
    that is not one between digits is still an error.

    Raises:
        ToolError: not arithmetic, division by zero, or a result too large to be useful.
    """
    text = expression.replace("^", "**").replace("\u00d7", "*").replace("\u00f7", "/")
    text = re.sub(r"\s[xX]\s", " * ", text)
    text = _CURRENCY.sub("", text)
    while _THOUSANDS.search(text):
        text = _THOUSANDS.sub(r"\1\2", text)
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
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{expression!r} has no finite value")
    return int(value) if isinstance(value, float) and value.is_integer() else value


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
    raise ToolError(f"unsupported element in expression: {ast.dump(node)[:80]}")
