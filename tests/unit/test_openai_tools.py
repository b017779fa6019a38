"""A chat request's own tools (``deployments/openai_tools.py``): what is offered, what is asked."""

from __future__ import annotations

import json

import pytest

from raytroupe.deployments.openai_tools import (
    MAX_TOOLS,
    ToolCallsAsked,
    asked_calls,
    called,
    caller_tools,
    tool_turns,
)
from raytroupe.protocols import InvalidInput, InvalidRequest
from raytroupe.protocols.task_shape import task_parts

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
PAY = {"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}}


def _tools(**asked):
    tools = caller_tools({"tools": [WEATHER, PAY], **asked})
    assert tools is not None
    return tools


def test_no_tools_or_tool_choice_none_offers_nothing():
    assert caller_tools({}) is None
    assert caller_tools({"tools": []}) is None
    assert caller_tools({"tools": [WEATHER], "tool_choice": "none"}) is None


def test_the_job_is_told_each_tool_its_schema_and_how_to_ask():
    told = _tools().instructions()
    assert not task_parts(f"What is the weather in Paris?\n\n{told}").split  # one part
    shown = [json.loads(line) for line in told.split("The caller's tools:\n", 1)[1].splitlines()]
    assert shown[0]["name"] == "get_weather"
    assert shown[0]["description"] == "The weather in a city now."
    assert shown[0]["parameters"]["required"] == ["city"]
    assert '"name" is exactly one of: get_weather' in told
    assert '{"tool_calls": [{"name": "<tool>", "arguments": {<its arguments>}}]}' in told
    assert (
        "You must answer by asking for a call of pay"
        in _tools(tool_choice={"type": "function", "function": {"name": "pay"}}).instructions()
    )


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"tools": "get_weather"}, "tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0]"),
        ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]},
         "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "x" * 65}}]},
         "tools[0].function.name"),
        ({"tools": [WEATHER, WEATHER]}, "tools"),
        ({"tools": [PAY] * (MAX_TOOLS + 1)}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "$ref": "https://example.com/schema.json"}}}]}, "tools[0].function.parameters"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "nothing"}}}]}, "tools[0].function.parameters"),
        ({"tools": [{"type": "function", "function": {"name": "f", "description": "d" * 4001}}]},
         "tools[0].function.description"),
        ({"tools": [{"type": "function", "function": {"name": "f", "description": "x" * 3000,
                     "parameters": {"type": "object", "description": "y" * 70_000}}}]}, "tools"),
        ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "pay"}}},
         "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ],
)  # fmt: skip
def test_a_request_past_the_shape_or_limits_is_refused_naming_the_field(asked, field):
    with pytest.raises(InvalidRequest) as refused:
        caller_tools(asked)
    assert refused.value.detail["field"] == field


@pytest.mark.parametrize(
    "answer",
    [
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}',
        '```json\n{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}\n```',
        '{"tool_calls": [{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]}',
    ],
)
def test_an_answer_that_is_a_call_of_an_offered_tool_is_a_call(answer):
    assert asked_calls(answer, _tools()) == [("get_weather", {"city": "Paris"})]


@pytest.mark.parametrize(
    "answer",
    [
        "It is sunny in Paris.",
        '{"city": "Paris"}',  # JSON, but not a request for calls
        '{"tool_calls": [], "note": "none"}',
        'Here: {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}',
    ],
)
def test_words_are_words_where_a_call_is_not_required(answer):
    assert asked_calls(answer, _tools()) is None


@pytest.mark.parametrize(
    ("answer", "asked", "why"),
    [
        ('{"tool_calls": [{"name": "delete_all", "arguments": {}}]}', {}, "not offered"),
        ('{"tool_calls": [{"name": "get_weather", "arguments": {"town": "Paris"}}]}', {},
         "its schema refuses"),
        ('{"tool_calls": [{"name": "get_weather", "arguments": [1]}]}', {}, "JSON object"),
        ('{"tool_calls": [{"arguments": {}}]}', {}, "have a name"),
        ('{"tool_calls": [{"name": "pay", "arguments": {}}, {"name": "pay", "arguments": {}}]}',
         {"parallel_tool_calls": False}, "parallel_tool_calls is off"),
        ("Sunny.", {"tool_choice": "required"}, "required a call of a tool"),
        ('{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}',
         {"tool_choice": {"type": "function", "function": {"name": "pay"}}}, "not offered"),
    ],
)  # fmt: skip
def test_a_call_the_request_does_not_allow_is_never_passed_on(answer, asked, why):
    with pytest.raises(ToolCallsAsked) as refused:
        asked_calls(answer, _tools(**asked))
    assert why in refused.value.message
    assert refused.value.code.value == "bad_response"


def test_calls_become_openai_tool_calls_with_ids_unique_to_the_job():
    listed = called("job-1", [("get_weather", {"city": "Paris"}), ("pay", {})])
    assert [c["id"] for c in listed] == ["call_job-1_0", "call_job-1_1"]
    assert listed[0]["type"] == "function"
    assert json.loads(listed[0]["function"]["arguments"]) == {"city": "Paris"}


def test_what_the_callers_tools_did_since_its_question_is_told_in_order():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C, clear"},
    ]  # fmt: skip
    told = tool_turns(messages)
    assert told.splitlines()[1:3] == [
        'You asked for get_weather({"city": "Paris"})',
        "The caller ran get_weather; it returned: 18 C, clear",
    ]
    assert tool_turns(messages[:2]) == ""  # nothing since the question


def test_the_turns_after_the_question_are_checked_and_told_with_it_not_in_its_history():
    from raytroupe.deployments.openai_messages import _task  # noqa: PLC0415

    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C, clear"},
    ]
    task, history, _ = _task(messages, told_after=True)
    assert task == "Weather in Paris?"
    assert history.turns == ()
    with pytest.raises(InvalidInput, match="unknown role 'hacker'"):
        _task([*messages, {"role": "hacker", "content": "x"}], told_after=True)
