"""Text-mode tool calling: prompt, message rewriting, parsing, and the stream filter."""

import json

import pytest

from raytroupe.actors.llm.textmode import (
    TextModeStream,
    count_calls,
    parse_tool_calls,
    to_text_mode,
    tool_prompt,
)
from raytroupe.protocols import ChatMessage, ModelError, ToolCall, ToolSpec

CALC = ToolSpec(
    name="calculator",
    description="Evaluates arithmetic.",
    parameters={"type": "object", "properties": {"expression": {"type": "string"}}},
)
CLOCK = ToolSpec(name="clock", description="Tells the time.")


def block(name: str, arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_tool_prompt_lists_tools_schemas_and_the_format():
    prompt = tool_prompt((CALC, CLOCK), "auto")
    assert "- calculator: Evaluates arithmetic." in prompt
    assert json.dumps(CALC.parameters, sort_keys=True) in prompt
    assert "- clock: Tells the time." in prompt
    assert '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>' in prompt
    assert "Tool result for <call id>" in prompt
    assert "must call" not in prompt
    assert "You must call at least one tool now." in tool_prompt((CLOCK,), "required")


def test_to_text_mode_rewrites_calls_and_merges_results():
    calls = (
        ToolCall(call_id="call_0", tool="calculator", arguments={"expression": "1 + 1"}),
        ToolCall(call_id="call_1", tool="clock"),
    )
    messages = (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Sum, then time."),
        ChatMessage(role="assistant", content="On it.", tool_calls=calls),
        ChatMessage(role="tool", content="2", tool_call_id="call_0"),
        ChatMessage(role="tool", content="12:00", tool_call_id="call_1"),
    )
    out = to_text_mode(messages, (CALC, CLOCK), "auto")
    assert [m.role for m in out] == ["system", "user", "assistant", "user"]
    assert out[0].text == f"Be brief.\n\n{tool_prompt((CALC, CLOCK), 'auto')}"
    assert out[2].text == "\n".join(
        [
            "On it.",
            block("calculator", {"expression": "1 + 1"}),
            block("clock", {}),
        ]
    )
    assert out[2].tool_calls == ()
    assert out[3].text == "Tool result for call_0: 2\n\nTool result for call_1: 12:00"
    assert all(m.role != "tool" for m in out)


def test_to_text_mode_adds_a_system_message_when_there_is_none():
    out = to_text_mode((ChatMessage(role="user", content="hi"),), (CLOCK,), "required")
    assert out[0] == ChatMessage(role="system", content=tool_prompt((CLOCK,), "required"))
    assert out[1].text == "hi"


@pytest.mark.parametrize(("tools", "choice"), [((), "auto"), ((CLOCK,), "none")])
def test_to_text_mode_leaves_tools_out_when_none_may_be_called(tools, choice):
    messages = (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="hi"),
    )
    assert to_text_mode(messages, tools, choice) == messages


def test_count_calls():
    calls = (ToolCall(call_id="a", tool="clock"), ToolCall(call_id="b", tool="clock"))
    messages = (
        ChatMessage(role="user", content="x"),
        ChatMessage(role="assistant", tool_calls=calls),
        ChatMessage(role="assistant", tool_calls=calls[:1]),
    )
    assert count_calls(messages) == 3


def test_parse_tool_calls_takes_blocks_out_and_numbers_them():
    text = (
        "Let me check.\n"
        + block("calculator", {"expression": "2 * 3"})
        + "\n"
        + block("clock", {})
        + "\nDone."
    )
    remaining, calls = parse_tool_calls(text, first_index=4)
    assert remaining == "Let me check.\n\nDone."
    assert calls == (
        ToolCall(call_id="call_4", tool="calculator", arguments={"expression": "2 * 3"}),
        ToolCall(call_id="call_5", tool="clock", arguments={}),
    )


@pytest.mark.parametrize(
    ("body", "arguments"),
    [
        ('{"name": "clock"}', {}),
        ('{"name": "clock", "arguments": ""}', {}),
        ('{"name": "clock", "arguments": "{\\"tz\\": \\"UTC\\"}"}', {"tz": "UTC"}),
        ('  {"name": "clock", "arguments": {"tz": "UTC"}}  ', {"tz": "UTC"}),
    ],
)
def test_parse_tool_calls_accepts_argument_variants(body, arguments):
    _, calls = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert calls == (ToolCall(call_id="call_0", tool="clock", arguments=arguments),)


def test_an_unclosed_last_block_counts_when_its_json_is_complete():
    text, calls = parse_tool_calls('ok <tool_call>{"name": "clock", "arguments": {}}')
    assert text == "ok"
    assert calls == (ToolCall(call_id="call_0", tool="clock"),)


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "clock", "arguments": {',
        '{"arguments": {}}',
        '{"name": "", "arguments": {}}',
        '{"name": "clock", "arguments": [1]}',
        '["clock"]',
    ],
)
def test_malformed_blocks_are_model_errors(body):
    with pytest.raises(ModelError, match="malformed tool call") as caught:
        parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert caught.value.detail == {"reason": "tool_format"}


def test_text_without_blocks_is_untouched():
    assert parse_tool_calls("  plain answer \n") == ("  plain answer \n", ())


def stream_through(pieces: list[str]) -> tuple[str, TextModeStream]:
    stream = TextModeStream()
    shown = "".join(stream.feed(p) for p in pieces) + stream.flush()
    return shown, stream


def test_stream_filter_hides_blocks_at_every_split_point():
    text = "Hi <there> " + block("clock", {"a": "<b>"}) + " bye <tool"
    expected = "Hi <there>  bye <tool"
    for cut in range(len(text) + 1):
        for second in range(cut, len(text) + 1):
            pieces = [text[:cut], text[cut:second], text[second:]]
            shown, stream = stream_through(pieces)
            assert shown == expected, pieces
            assert stream.raw == text


def test_stream_filter_shows_text_as_soon_as_it_cannot_be_a_tag():
    stream = TextModeStream()
    assert stream.feed("Hello <to") == "Hello "
    assert stream.feed("p>") == "<top>"
    assert stream.feed("<tool_call>{") == ""
    assert stream.feed("}</tool_call> end") == " end"
    assert stream.flush() == ""


def test_stream_filter_drops_an_unclosed_block_at_the_end():
    shown, stream = stream_through(["a ", '<tool_call>{"name": "clock"}'])
    assert shown == "a "
    assert parse_tool_calls(stream.raw)[1] == (ToolCall(call_id="call_0", tool="clock"),)
