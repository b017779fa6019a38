"""A team as the model of a caller's tool loop, driven by the official ``openai`` client.

The team's agent is the wire server's OpenAI endpoint with scripted answers: the first asks
for a call of the caller's tool, the next answers from its result. The caller runs the tool
itself and sends the conversation on, as the OpenAI Agents SDK or LangChain's ``ChatOpenAI``
do.
"""

from __future__ import annotations

import json

import openai
import pytest

from tests.support.http_api import USER_KEY, register, wire_team
from tests.support.wire_server import Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

TEAM = "openai-tools"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
CALL = json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
ANSWER = "It is 18 C and clear in Paris."


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture(scope="module")
def team(api, wire):
    return register(api, wire_team(wire, TEAM))


def _client(api) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{api.url}/v1", api_key=USER_KEY, max_retries=0, timeout=120)


def _weather(city: str) -> str:
    return {"Paris": "18 C, clear"}.get(city, "unknown")


def _loop(api, *, stream: bool) -> tuple[list[dict], list[str]]:
    """The caller's tool loop: ask, run what the model asks for, send the results on."""
    client = _client(api)
    messages: list[dict] = [{"role": "user", "content": "What is the weather in Paris?"}]
    finishes = []
    for _ in range(4):  # bounded: the script asks once, then answers
        if stream:
            message, finish = _streamed(client, messages)
        else:
            choice = client.chat.completions.create(
                model=TEAM, messages=messages, tools=[WEATHER]
            ).choices[0]
            message, finish = choice.message.model_dump(exclude_none=True), choice.finish_reason
        finishes.append(finish)
        messages.append(message)
        if finish != "tool_calls":
            break
        for call in message["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": _weather(**arguments)})  # fmt: skip
    return messages, finishes


def _streamed(client: openai.OpenAI, messages: list[dict]) -> tuple[dict, str]:
    content, calls, finish = "", [], ""
    for chunk in client.chat.completions.create(
        model=TEAM, messages=messages, tools=[WEATHER], stream=True
    ):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        calls += [c.model_dump(exclude_none=True) for c in delta.tool_calls or ()]
        finish = chunk.choices[0].finish_reason or finish
    if calls:
        for call in calls:
            call.pop("index")
        return {"role": "assistant", "tool_calls": calls}, finish
    return {"role": "assistant", "content": content}, finish


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_team_asks_for_the_callers_tool_then_answers_from_its_result(api, team, wire, stream):
    wire.reset()
    wire.script(Reply(text=CALL), Reply(text=ANSWER))
    messages, finishes = _loop(api, stream=stream)

    assert finishes == ["tool_calls", "stop"]
    (call,) = messages[1]["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert messages[-1]["content"] == ANSWER
    first, second = (json.dumps(r.body["messages"]) for r in wire.requests[:2])
    assert "get_weather" in first  # the job was told of the caller's tool
    assert '"required": [\\"city\\"]' in first or "required" in first
    assert "The caller ran get_weather; it returned: 18 C, clear" in second
    assert len(wire.requests) == 2


@pytest.mark.parametrize(
    "case",
    [
        (json.dumps({"tool_calls": [{"name": "transfer_funds", "arguments": {"to": "x"}}]}), {},
         "not offered"),
        (json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {"town": "Paris"}}]}),
         {}, "its schema refuses"),
        ("It is sunny.", {"tool_choice": "required"}, "required a call"),
    ],
)  # fmt: skip
def test_a_call_the_request_does_not_allow_is_a_502_never_passed_on(api, team, wire, case):
    answer, extra, why = case
    wire.reset()
    wire.script(Reply(text=answer))
    with pytest.raises(openai.APIStatusError) as refused:
        _client(api).chat.completions.create(
            model=TEAM, messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[WEATHER], **extra,
        )  # fmt: skip
    assert refused.value.status_code == 502
    assert why in refused.value.message


def test_tool_choice_none_and_no_tools_answer_in_words_as_before(api, team, wire):
    wire.reset()
    wire.script(Reply(text=CALL))
    completion = _client(api).chat.completions.create(
        model=TEAM, messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER], tool_choice="none",
    )  # fmt: skip
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert choice.message.content == CALL  # words, however they look
    assert "get_weather" not in json.dumps(wire.requests[0].body["messages"])


def test_bad_tool_definitions_are_refused_naming_the_field_and_start_nothing(api, team, rt):
    before = set(rt.jobs())
    bad = {"type": "function", "function": {"name": "no spaces allowed"}}
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        _client(api).chat.completions.create(
            model=TEAM, messages=[{"role": "user", "content": "hi"}], tools=[bad]
        )
    assert "tools[0].function.name" in refused.value.message
    assert set(rt.jobs()) == before
