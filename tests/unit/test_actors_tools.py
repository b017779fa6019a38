import pytest

from actors.tools import BUILTIN_TOOLS, CALCULATOR, Tool, ToolBox, evaluate
from protocols import ConfigError, ErrorCode, ToolCall, ToolError, ToolSpec


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


def test_calculator_is_a_builtin_tool():
    assert BUILTIN_TOOLS["calculator"].spec == CALCULATOR
    assert CALCULATOR.parameters["required"] == ["expression"]


def test_unknown_tool_in_the_allow_list_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown tool") as caught:
        ToolBox(["calculator", "shell"])
    assert caught.value.detail == {"tools": ["shell"]}


def test_specs_list_the_allowed_tools_once():
    assert ToolBox(["calculator", "calculator"]).specs == (CALCULATOR,)
    assert ToolBox([]).specs == ()


def test_a_tool_that_is_not_allowed_is_refused_as_a_result():
    result = ToolBox([]).call(ToolCall(call_id="c1", tool="calculator", arguments={}))
    assert (result.ok, result.call_id, result.tool, result.data) == (
        False,
        "c1",
        "calculator",
        None,
    )
    assert result.error is not None
    assert result.error.code is ErrorCode.TOOL
    assert "not allowed" in result.error.message
    assert result.error.detail == {"tool": "calculator"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "'expression' is a required property"),
        ({"expression": 5}, "5 is not of type 'string'"),
        ({"expression": ""}, "should be non-empty"),
        ({"expression": "1", "extra": 1}, "Additional properties are not allowed"),
        ({"expression": "1" * 501}, "is too long"),
    ],
)
def test_invalid_arguments_are_refused_with_the_schema_message(arguments, message):
    result = ToolBox(["calculator"]).call(
        ToolCall(call_id="c2", tool="calculator", arguments=arguments)
    )
    assert result.ok is False
    assert result.error is not None
    assert result.error.code is ErrorCode.TOOL
    assert result.error.message.startswith("invalid arguments for 'calculator': ")
    assert message in result.error.message


def test_a_failing_tool_is_an_error_result():
    result = ToolBox(["calculator"]).call(
        ToolCall(call_id="c3", tool="calculator", arguments={"expression": "1 / 0"})
    )
    assert result.ok is False
    assert "division by zero" in result.error.message


def test_success_result_shape():
    result = ToolBox(["calculator"]).call(
        ToolCall(call_id="c4", tool="calculator", arguments={"expression": "17 * 23 + 4"})
    )
    assert result.kind == "tool_result"
    assert (result.ok, result.call_id, result.tool, result.data, result.error) == (
        True,
        "c4",
        "calculator",
        395,
        None,
    )
    assert set(result.metadata) == {"duration_s"}
    assert result.metadata["duration_s"] >= 0


def test_a_custom_catalog():
    echo = Tool(
        ToolSpec(
            name="echo",
            description="Echoes.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        ),
        lambda args: {"echo": args.get("text")},
    )
    box = ToolBox(["echo"], catalog={"echo": echo})
    result = box.call(ToolCall(call_id="c5", tool="echo", arguments={"text": "hi"}))
    assert (result.ok, result.data) == (True, {"echo": "hi"})
    with pytest.raises(ConfigError):
        ToolBox(["calculator"], catalog={"echo": echo})


def test_a_tool_raising_an_unexpected_error_is_an_error_result():
    def broken(_args):
        raise ValueError("tool bug")

    box = ToolBox(
        ["broken"], catalog={"broken": Tool(ToolSpec(name="broken", description="."), broken)}
    )
    result = box.call(ToolCall(call_id="c6", tool="broken"))
    assert result.ok is False
