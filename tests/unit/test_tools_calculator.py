import pytest

from raytroupe.actors.tools import CALCULATOR, evaluate
from raytroupe.protocols import ErrorCode, ToolError


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 * 23 + 4", 395),
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("2 ** 3 ** 2", 512),
        ("2^10", 1024),
        ("3 x 4", 12),
        ("6 \u00d7 7", 42),
        ("9 \u00f7 2", 4.5),
        ("7 / 2", 3.5),
        ("8 / 2", 4),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("-3 + 5", 2),
        ("--3", 3),
        ("+4", 4),
        ("-(2 + 3)", -5),
        ("1.5 * 2", 3),
        ("0.1 + 0.2", 0.1 + 0.2),
        ("10 ** -2", 0.01),
        ("$12.50 * 3", 37.5),  # prices as written: the currency sign dropped
        ("\u20ac3 + \u00a32", 5),
        ("1,200 * 3", 3600),  # thousands separators joined
        ("1,234,567 + 1", 1234568),
    ],
)
def test_evaluate_arithmetic(expression, value):
    result = evaluate(expression)
    assert result == value
    assert type(result) is type(value)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("7 // 0.0", "division by zero"),
        ("2 ** 10000", "exponent 10000 is larger than 1000"),
        ("2 ** -5000", "exponent -5000 is larger"),
        ("10 ** 99 * 10 ** 99", "out of range"),
        ("9 ** 999", "out of range"),
        ("1e308 * 10", "out of range"),
        ("10.0 ** 400", "overflows"),
        ("(-8) ** 0.5", "out of range"),
        ("__import__('os')", "unsupported element"),
        ("a + 1", "unsupported element"),
        ("abs(-1)", "unsupported element"),
        ("(1).real", "unsupported element"),
        ("'ab' * 3", "unsupported element"),
        ("True + 1", "unsupported element"),
        ("[1, 2]", "unsupported element"),
        ("1,2", "unsupported element"),  # not a thousands separator: still a tuple
        ("$", "not an arithmetic expression"),
        ("1 < 2", "unsupported element"),
        ("lambda: 1", "unsupported element"),
        ("2 +", "not an arithmetic expression"),
        ("import os", "not an arithmetic expression"),
        ("", "not an arithmetic expression"),
    ],
)
def test_evaluate_rejects(expression, message):
    with pytest.raises(ToolError, match=message) as caught:
        evaluate(expression)
    assert caught.value.code is ErrorCode.TOOL


def test_evaluate_rejects_deep_nesting_with_a_tool_error():
    with pytest.raises(ToolError):
        evaluate("-" * 5000 + "1")


def test_calculator_spec_requires_an_expression():
    assert CALCULATOR.parameters["required"] == ["expression"]
