"""Text-mode tool calls under constrained decoding: the schema sent, the answers read back."""

import json

import httpx2
import jsonschema
import pytest
from sdk_fakes import CALC, CLOCK, Server
from test_llm_openai_provider import ask, chunk, completion, provider, request, sse, stream_response

from raytroupe.actors.llm.textmode import constrained_schema, parse_constrained, to_text_mode
from raytroupe.protocols import ChatMessage, LLMDelta, ModelError, OpenAICompatibleModel, ToolCall

SPEC = OpenAICompatibleModel(
    model="qwen", base_url="http://127.0.0.1:8080/v1", native_tools=False, constrained_tools=True
)
PLAN = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_the_schema_admits_known_calls_with_valid_arguments_or_an_answer():
    schema = constrained_schema((CALC, CLOCK), "auto", None)
    ok = [
        {"name": "calculator", "arguments": {"expression": "2+2"}},
        [{"name": "clock", "arguments": {}}, {"name": "clock", "arguments": {}}],
        {"answer": "four"},
    ]
    bad = [
        {"name": "rm_rf", "arguments": {}},  # no such tool
        {"name": "calculator", "arguments": {}},  # its required argument
        [],
        {"answer": 4},
        {"answer": "x", "name": "clock", "arguments": {}},
        "four",
    ]
    for value in ok:
        jsonschema.validate(value, schema)
    for value in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, schema)


def test_required_admits_only_calls_and_a_structured_answer_keeps_its_schema():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "x"}, constrained_schema((CLOCK,), "required", None))
    schema = constrained_schema((CLOCK,), "auto", PLAN)
    jsonschema.validate({"answer": {"n": 3}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": {"n": "three"}}, schema)


def test_parse_reads_calls_answers_and_falls_back_to_tags():
    text, calls = parse_constrained(
        '{"name": "calculator", "arguments": {"expression": "1+1"}}', first_index=3
    )
    assert text == ""
    assert calls == (
        ToolCall(call_id="call_3", tool="calculator", arguments={"expression": "1+1"}),
    )
    assert parse_constrained('{"answer": "two"}') == ("two", ())
    assert parse_constrained('{"answer": {"n": 2}}') == ('{"n": 2}', ())
    text, calls = parse_constrained('<tool_call>{"name": "clock", "arguments": {}}</tool_call>')
    assert calls[0].tool == "clock"
    assert parse_constrained("plain words") == ("plain words", ())
    _, two = parse_constrained('[{"name": "clock", "arguments": {}}, {"name": "clock"}]')
    assert [c.call_id for c in two] == ["call_0", "call_1"]
    with pytest.raises(ModelError) as caught:
        parse_constrained('[{"name": 7}]')
    assert caught.value.detail["reason"] == "tool_format"


def test_history_is_written_back_as_the_json_the_model_writes():
    earlier = ToolCall(call_id="call_0", tool="clock", arguments={})
    messages = (
        ChatMessage(role="user", content="time?"),
        ChatMessage(role="assistant", tool_calls=(earlier,)),
        ChatMessage(role="tool", content="12:00", tool_call_id="call_0"),
    )
    out = to_text_mode(messages, (CLOCK,), "auto", constrained=True)
    assert '{"name": "<tool name>", "arguments": {...}}' in out[0].text
    assert json.loads(out[2].text) == {"name": "clock", "arguments": {}}


def test_the_provider_sends_the_schema_and_reads_the_call():
    answer = json.dumps({"name": "calculator", "arguments": {"expression": "6*7"}})
    server = Server(httpx2.Response(200, json=completion({"content": answer})))
    response = ask(provider(server, SPEC), request(tools=(CALC, CLOCK), response_format=PLAN))
    sent = server.body
    assert "tools" not in sent
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema == constrained_schema((CALC, CLOCK), "auto", PLAN)
    assert response.tool_calls == (
        ToolCall(call_id="call_0", tool="calculator", arguments={"expression": "6*7"}),
    )
    assert response.finish_reason == "tool_calls"


def test_without_tools_the_request_is_not_constrained_beyond_its_own_format():
    server = Server(httpx2.Response(200, json=completion({"content": '{"n": 1}'})))
    response = ask(provider(server, SPEC), request(response_format=PLAN))
    assert server.body["response_format"]["json_schema"]["schema"] == PLAN
    assert response.text == '{"n": 1}'


def test_a_streamed_constrained_answer_shows_the_answer_not_the_json():
    pieces = ['{"ans', 'wer": "fo', 'rty-two"}']
    body = sse(*(chunk({"content": p}) for p in pieces), chunk({}, "stop"), "[DONE]")
    deltas: list[LLMDelta] = []
    response = ask(
        provider(Server(stream_response(body)), SPEC), request(stream=True, tools=(CLOCK,)), deltas
    )
    assert "".join(d.text for d in deltas) == "forty-two"
    assert response.text == "forty-two"
    assert response.tool_calls == ()


def test_tool_choice_none_withholds_the_tools_from_a_compatible_server_only(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-for-openai")
    native = OpenAICompatibleModel(model="qwen", base_url="http://127.0.0.1:8080/v1")
    server = Server(httpx2.Response(200, json=completion({"content": "395"})))
    ask(provider(server, native), request(tools=(CALC,), tool_choice="none"))
    assert "tools" not in server.body  # llama.cpp would show them anyway
    assert "tool_choice" not in server.body
    server = Server(httpx2.Response(200, json=completion({"content": "395"})))
    ask(provider(server), request(tools=(CALC,), tool_choice="none"))  # OpenAI's own API
    assert server.body["tool_choice"] == "none"
    assert server.body["tools"][0]["function"]["name"] == "calculator"
