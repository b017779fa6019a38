"""Graph expressions: edge conditions and node input mappings, in a closed little language.

An edge's ``condition`` (``approved == false and len(notes) < 3``) and a node's inputs are
written in team files, a tenant's among them, and the values they read (the graph's state
fields, ``item``, ``task``) come from model outputs. They are therefore not Python: ``eval``
(or code compiled from the text) would hand a tenant the process, and a general-purpose
evaluator that allows attribute access and method calls reaches it anyway, through
``().__class__.__base__.__subclasses__()`` and its like. Instead the text is parsed with
:func:`ast.parse` and checked against a short whitelist of node types, then walked by an
evaluator of this module's own that knows JSON-like values only.

Allowed: literals (numbers, strings, lists, tuples, dicts, ``true``/``false``/``null`` and
Python's spellings of them), field names (not starting with ``_``), subscripts ``x[0]`` and
``x["key"]``, comparisons (chained), ``and``/``or``/``not``, ``+ - * / // %``,
``a if c else b`` and calls of :data:`FUNCTIONS` with positional arguments. Nothing else:
no attributes, slices, ``**``, bit operators, lambdas, comprehensions, f-strings, ``:=``,
sets or unpacking. The text, its node count, its nesting and the size of the values that
``+``, ``*`` and ``str()`` build are bounded, so that no expression can stall or exhaust the
orchestrator; every failure, at check or evaluation, is an :class:`ExpressionError`.
"""

from __future__ import annotations

import ast
import functools
import io
import operator
import tokenize
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final, NamedTuple

__all__ = [
    "FUNCTIONS",
    "MAX_LENGTH",
    "MAX_NODES",
    "MAX_VALUE_SIZE",
    "ExpressionError",
    "check_expression",
    "evaluate",
    "truthy",
]

MAX_LENGTH: Final = 1000
"""Longest expression text, in characters."""
MAX_NODES: Final = 200
"""Most expression nodes (operators and contexts are not counted)."""
MAX_VALUE_SIZE: Final = 10_000
"""Longest str, list or dict that ``+``, ``*`` or ``str()`` may build (``*`` counts nested
items and characters too: repeating a list repeats everything in it)."""
_MAX_DEPTH: Final = 50
_MAX_ROUND_DIGITS: Final = 100  # round(1, -10**9) would compute 10**10**9
_MAX_REASON: Final = 200
_LITERALS: Final[Mapping[str, Any]] = {
    "true": True, "false": False, "null": None, "True": True, "False": False, "None": None,
}  # fmt: skip


class ExpressionError(ValueError):
    """An expression that is not allowed, or failed on the values given. str() says why."""


def _kind(value: Any) -> str:
    return "null" if value is None else "list" if isinstance(value, tuple) else type(value).__name__


def _number(value: Any) -> int | float:
    if not isinstance(value, int | float):
        raise ExpressionError(f"expected a number, not {_kind(value)}")
    return value


def _text(value: Any, function: str) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"{function}() takes strings, not {_kind(value)}")
    return value


def _size(value: Any) -> int:
    """Items and characters in ``value``, nested ones too (counted to just past the limit)."""
    total, stack = 0, [value]
    while stack and total <= MAX_VALUE_SIZE:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, list | tuple | Mapping):
            total += len(item)
            if total <= MAX_VALUE_SIZE:
                stack.extend([*item.keys(), *item.values()] if isinstance(item, Mapping) else item)
        elif isinstance(item, int):
            total += item.bit_length() // 64 * 19  # a long integer's digits, roughly
    return total


def _bounded(size: int) -> None:
    if size > MAX_VALUE_SIZE:
        raise ExpressionError(f"the value would be longer than {MAX_VALUE_SIZE}")


def _scalar(value: Any, function: str) -> str | int | float:
    if not isinstance(value, str | int | float):
        raise ExpressionError(f"{function}() takes a number or a string, not {_kind(value)}")
    return value


def _round(value: Any, digits: Any = None) -> int | float:
    if digits is None:
        return round(_number(value))
    if isinstance(digits, bool) or not isinstance(digits, int) or abs(digits) > _MAX_ROUND_DIGITS:
        raise ExpressionError(
            f"round()'s digits must be an integer from -{_MAX_ROUND_DIGITS} to {_MAX_ROUND_DIGITS}"
        )
    return round(_number(value), digits)


def _str(value: Any) -> str:
    _bounded(_size(value))
    text = str(value)
    _bounded(len(text))
    return text


_FUNCTION_TABLE: Final[dict[str, tuple[Callable[..., Any], int, int]]] = {
    "len": (len, 1, 1),
    "min": (lambda *a: min(a[0] if len(a) == 1 else a), 1, MAX_NODES),
    "max": (lambda *a: max(a[0] if len(a) == 1 else a), 1, MAX_NODES),
    "abs": (lambda x: abs(_number(x)), 1, 1),
    "sum": (lambda xs: sum(_number(x) for x in xs), 1, 1),
    "any": (any, 1, 1),
    "all": (all, 1, 1),
    "round": (_round, 1, 2),
    "str": (_str, 1, 1),
    "int": (lambda x: int(_scalar(x, "int")), 1, 1),
    "float": (lambda x: float(_scalar(x, "float")), 1, 1),
    "bool": (bool, 1, 1),
    "lower": (lambda s: _text(s, "lower").lower(), 1, 1),
    "upper": (lambda s: _text(s, "upper").upper(), 1, 1),
    "strip": (lambda s: _text(s, "strip").strip(), 1, 1),
    "contains": (lambda whole, part: part in whole, 2, 2),
    "startswith": (lambda s, p: _text(s, "startswith").startswith(_text(p, "startswith")), 2, 2),
    "endswith": (lambda s, p: _text(s, "endswith").endswith(_text(p, "endswith")), 2, 2),
}
FUNCTIONS: Final[frozenset[str]] = frozenset(_FUNCTION_TABLE)
"""The functions an expression may call."""

_ARITHMETIC: Final[dict[type[ast.AST], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}  # fmt: skip
_COMPARISONS: Final[dict[type[ast.AST], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip
_ALLOWED: Final = frozenset({
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Subscript, ast.Compare, ast.BoolOp,
    ast.UnaryOp, ast.BinOp, ast.IfExp, ast.List, ast.Tuple, ast.Dict, ast.Call, ast.And, ast.Or,
    ast.Not, ast.UAdd, ast.USub, *_ARITHMETIC, *_COMPARISONS,
})  # fmt: skip
_REFUSED: Final[dict[type[ast.AST], str]] = {
    ast.Attribute: "attribute access", ast.Lambda: "lambda", ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator", ast.JoinedStr: "an f-string",
    ast.FormattedValue: "an f-string", ast.NamedExpr: "':='", ast.Starred: "'*' unpacking",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Set: "a set literal",
    ast.Slice: "a slice", ast.Pow: "'**'", ast.BitAnd: "'&'", ast.BitOr: "'|'",
    ast.BitXor: "'^'", ast.LShift: "'<<'", ast.RShift: "'>>'", ast.Invert: "'~'",
    ast.MatMult: "'@'",
}  # fmt: skip


class _Checked(NamedTuple):
    body: ast.expr
    names: frozenset[str]  # the fields it reads


def _check(node: ast.AST, depth: int, names: set[str]) -> None:
    """Refuse ``node`` unless it and all below it are allowed; collect the fields read."""
    if depth > _MAX_DEPTH:
        raise ExpressionError(f"the expression is nested deeper than {_MAX_DEPTH}")
    children: list[ast.AST] = list(ast.iter_child_nodes(node))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            _check(node.func, depth + 1, names)  # names what is wrong (an attribute, ...)
            raise ExpressionError(f"only {', '.join(sorted(FUNCTIONS))} may be called")
        if node.func.id not in FUNCTIONS:
            raise ExpressionError(f"calls to {node.func.id!r} are not allowed")
        if node.keywords:
            raise ExpressionError("keyword arguments are not allowed")
        children = list(node.args)
    elif isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExpressionError(f"names starting with '_' are not allowed: {node.id!r}")
        if node.id not in _LITERALS:
            names.add(node.id)
    elif isinstance(node, ast.Constant) and not isinstance(node.value, str | int | float | None):
        raise ExpressionError(f"{type(node.value).__name__} constants are not allowed")
    elif isinstance(node, ast.Dict) and None in node.keys:
        raise ExpressionError("'**' unpacking is not allowed")
    elif type(node) not in _ALLOWED:
        raise ExpressionError(f"{_REFUSED.get(type(node), type(node).__name__)} is not allowed")
    for child in children:
        _check(child, depth + 1, names)


def _bracket_depth(tokens: list[tokenize.TokenInfo]) -> int:
    depth = deepest = 0
    for token in tokens:
        if token.type == tokenize.OP and token.string in {"(", "[", "{"}:
            depth += 1
            deepest = max(deepest, depth)
        elif token.type == tokenize.OP and token.string in {")", "]", "}"}:
            depth -= 1
    return deepest


@functools.lru_cache(maxsize=1024)
def _checked(text: str) -> _Checked:
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression is longer than {MAX_LENGTH} characters")
    source = text.strip()  # a team file's block scalar ends with a newline
    if not source:
        raise ExpressionError("the expression is empty")
    try:
        tree = ast.parse(source, mode="eval")
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except SyntaxError as e:
        where = f" (column {e.offset})" if e.offset else ""
        raise ExpressionError(f"not an expression: {e.msg or 'invalid syntax'}{where}") from None
    except (RecursionError, MemoryError):  # what the parser raises on deep nesting
        raise ExpressionError(f"the expression is nested deeper than {_MAX_DEPTH}") from None
    except (ValueError, tokenize.TokenError) as e:
        raise ExpressionError(f"not an expression: {e.args[0] if e.args else e}") from None
    if _bracket_depth(tokens) > _MAX_DEPTH:  # parentheses make no nodes but nest the parser
        raise ExpressionError(f"the expression is nested deeper than {_MAX_DEPTH}")
    if sum(isinstance(node, ast.expr) for node in ast.walk(tree)) > MAX_NODES:
        raise ExpressionError(f"the expression has more than {MAX_NODES} nodes")
    names: set[str] = set()
    _check(tree, 0, names)
    return _Checked(tree.body, frozenset(names))


def _subscript(node: ast.Subscript, names: Mapping[str, Any]) -> Any:
    container, key = _eval(node.value, names), _eval(node.slice, names)
    if isinstance(container, Mapping):
        return container.get(key)
    if not isinstance(container, list | tuple | str):
        raise ExpressionError(f"{_kind(container)} cannot be subscripted")
    if isinstance(key, bool) or not isinstance(key, int):
        raise ExpressionError(f"a {_kind(container)} index must be an integer, not {_kind(key)}")
    if not -len(container) <= key < len(container):
        raise ExpressionError(f"index {key} is out of range (length {len(container)})")
    return container[key]


def _compare(node: ast.Compare, names: Mapping[str, Any]) -> bool:
    left = _eval(node.left, names)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _eval(right_node, names)
        if not _COMPARISONS[type(op)](left, right):
            return False
        left = right
    return True


def _boolean(node: ast.BoolOp, names: Mapping[str, Any]) -> Any:
    stop_at = isinstance(node.op, ast.Or)  # `or` stops at the first true value, `and` at a false
    value = None
    for operand in node.values:
        value = _eval(operand, names)
        if bool(value) is stop_at:
            break
    return value


def _unary(node: ast.UnaryOp, names: Mapping[str, Any]) -> Any:
    value = _eval(node.operand, names)
    if isinstance(node.op, ast.Not):
        return not value
    return -_number(value) if isinstance(node.op, ast.USub) else +_number(value)


def _binary(node: ast.BinOp, names: Mapping[str, Any]) -> Any:
    left, right = _eval(node.left, names), _eval(node.right, names)
    if isinstance(node.op, ast.Mult) and isinstance(right, str | list | tuple):
        left, right = right, left
    if isinstance(node.op, ast.Mult) and isinstance(left, str | list | tuple):
        if isinstance(right, bool) or not isinstance(right, int):
            raise ExpressionError(f"a {_kind(left)} can be repeated a whole number of times only")
        _bounded(_size(left) * right)
        return left * right if isinstance(left, str) else list(left) * right
    if not isinstance(node.op, ast.Add) or isinstance(left, int | float):
        return _ARITHMETIC[type(node.op)](_number(left), _number(right))
    if isinstance(left, str) and isinstance(right, str):
        _bounded(len(left) + len(right))
        return left + right
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        _bounded(len(left) + len(right))
        return [*left, *right]
    raise ExpressionError(f"cannot add {_kind(left)} and {_kind(right)}")


def _call(node: ast.Call, names: Mapping[str, Any]) -> Any:
    name = node.func.id  # type: ignore[attr-defined]  # a Name: checked
    function, least, most = _FUNCTION_TABLE[name]
    if not least <= len(node.args) <= most:
        expected = str(least) if least == most else f"{least} to {most}"
        plural = "" if expected == "1" else "s"
        raise ExpressionError(f"{name}() takes {expected} argument{plural}, not {len(node.args)}")
    return function(*(_eval(arg, names) for arg in node.args))


def _name(node: ast.Name, names: Mapping[str, Any]) -> Any:
    return _LITERALS[node.id] if node.id in _LITERALS else names.get(node.id)


def _dict(node: ast.Dict, names: Mapping[str, Any]) -> dict[Any, Any]:
    pairs = zip(node.keys, node.values, strict=True)
    return {_eval(k, names): _eval(v, names) for k, v in pairs}  # type: ignore[arg-type]


_EVALUATORS: Final[dict[type[ast.AST], Callable[[Any, Mapping[str, Any]], Any]]] = {
    ast.Constant: lambda node, _: node.value,
    ast.IfExp: lambda node, names: _eval(node.body if _eval(node.test, names) else node.orelse,
                                         names),
    ast.List: lambda node, names: [_eval(e, names) for e in node.elts],
    ast.Tuple: lambda node, names: [_eval(e, names) for e in node.elts],
    ast.Name: _name, ast.Dict: _dict, ast.Subscript: _subscript, ast.Compare: _compare,
    ast.BoolOp: _boolean, ast.UnaryOp: _unary, ast.BinOp: _binary, ast.Call: _call,
}  # fmt: skip


def _eval(node: ast.expr, names: Mapping[str, Any]) -> Any:
    return _EVALUATORS[type(node)](node, names)


def _parsed(text: str) -> _Checked:
    if not isinstance(text, str):
        raise ExpressionError(f"an expression is a string, not {_kind(text)}")
    return _checked(text)


def check_expression(text: str, names: Collection[str] | None = None) -> None:
    """Raise :class:`ExpressionError` if ``text`` is not an allowed expression.

    Args:
        text: The expression.
        names: The fields it may read; a name that is neither one of them nor a literal
            (``true``, ``null``, ...) is refused. None allows any field.
    """
    fields = _parsed(text).names
    unknown = sorted(fields.difference(names)) if names is not None else []
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise ExpressionError(f"unknown field{plural} {', '.join(map(repr, unknown))}")


def evaluate(text: str, names: Mapping[str, Any]) -> Any:
    """The value of ``text``, its bare names looked up in ``names`` (a missing one is None).

    Raises:
        ExpressionError: ``text`` is not allowed, or failed on these values (a type error,
            division by zero, an index out of range, a value over :data:`MAX_VALUE_SIZE`
            ...). Never another exception.
    """
    return _run(_parsed(text).body, names, truth=False)


def truthy(text: str, names: Mapping[str, Any]) -> bool:
    """Whether ``text`` is true on ``names`` (an edge's condition): ``bool(evaluate(...))``."""
    return bool(_run(_parsed(text).body, names, truth=True))


def _run(body: ast.expr, names: Mapping[str, Any], *, truth: bool) -> Any:
    try:
        value = _eval(body, names)
        return bool(value) if truth else value
    except ExpressionError:
        raise
    except Exception as e:  # noqa: BLE001 - values may be any object: all failures are the text's
        reason = str(e) or type(e).__name__
        cut = reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON] + "..."
        raise ExpressionError(cut) from None
