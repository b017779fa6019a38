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
        ("0.1 + 0.2", 0.3),  # to 10 places: what a person reads, and a model copies
        ("10 ** -2", 0.01),
        ("$12.50 * 3", 37.5),  # prices as written: the currency sign dropped
        ("\u20ac3 + \u00a32", 5),
        ("1,200 * 3", 3600),  # thousands separators joined
        ("1,234,567 + 1", 1234568),
        ("15% of 80", 12),  # percentages as written
        ("80 * 15%", 12),
        ("200 * (1 + 7.5%)", 215),
        ("12.5% of 80", 10),
        ("17 % 5", 2),  # followed by a number: the remainder
        ("1375 km * 0.074 L/km", 101.75),  # units after numbers dropped
        ("45 minutes * 39 pages/minute", 1755),
        ("3 dollars per hour * 4 hours", 12),
        ("17 * 23 + 4 requests", 395),
        ("1e3 * 2", 2000),  # an exponent is not a unit
        ("3 * 4.50 + 2 * 3.25 = ?", 20),  # an equation: its arithmetic side
        ("x = 17 * 23 + 4", 395),
        ("12 * 3 = 35", 36),  # the model's guess on the right is not taken
        ("round(10 / 3, 2)", 3.33),
        ("sqrt(2.25)", 1.5),
        ("abs(-1)", 1),
        ("max(3, 9, 4) - min(3, 9)", 6),
        ("2 sqrt(9)", None),
    ],
)
def test_evaluate_arithmetic(expression, value):
    if value is None:  # "2 sqrt(9)": a function after a number is not its unit
        with pytest.raises(ToolError, match="not an arithmetic expression"):
            evaluate(expression)
        return
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
        ("exp(1)", "unknown function 'exp'"),
        ("sqrt(-1)", "math domain error"),
        ("round(2.5, 1.5)", "places must be a whole number"),
        ("round(10, -10 ** 9)", "from -20 to 20"),  # would take minutes
        ("min(1)", r"min\(\) takes 2 to 20 numbers, not 1"),
        ("sqrt(x=4)", "not an arithmetic expression"),
        ("hello", "unsupported element"),
        ("1 +* 2 apples", "not an arithmetic expression"),
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
