"""OpenAIProvider against OpenAI's wire format, served by an httpx2.MockTransport."""

import asyncio
import json

import httpx2
import pytest
from sdk_fakes import CALC, CLOCK, Broken, Server

from raytroupe.actors.llm.openai_provider import OpenAIProvider
from raytroupe.actors.llm.textmode import parse_arguments
from raytroupe.protocols import (
    AuthFailed,
    BadRequest,
    ChatMessage,
    ConfigError,
    ContentFiltered,
    ContextTooLong,
    ImagePart,
    LLMDelta,
    LLMRequest,
    ModelError,
    ModelTimeout,
    OpenAICompatibleModel,
    OpenAIModel,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    StreamInterrupted,
    TextPart,
    ToolCall,
)

KEY = "test-key-7Hq2Zr9Lp4wX"  # not shaped like a real key: only explicit masking hides it
MODEL = "gpt-4o-2024-08-06"


def sse(*events: dict | str) -> bytes:
    lines = [e if isinstance(e, str) else json.dumps(e) for e in events]
    return b"".join(f"data: {line}\n\n".encode() for line in lines)


def stream_response(body: bytes | Broken) -> httpx2.Response:
    headers = {"content-type": "text/event-stream"}
    if isinstance(body, Broken):
        return httpx2.Response(200, headers=headers, stream=body)
    return httpx2.Response(200, headers=headers, content=body)


def completion(message: dict, finish: str = "stop", usage: tuple[int, int] = (82, 17)) -> dict:
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
    }


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> dict:
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-B9Mstream",
        "object": "chat.completion.chunk",
        "created": 1741570290,
        "model": MODEL,
        "system_fingerprint": "fp_fc9f1d7035",
        "choices": choices,
        "usage": usage,
    }


def fragment(index: int, arguments: str, call_id: str | None = None, name: str | None = None):
    function = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
    head = {} if call_id is None else {"id": call_id, "type": "function"}
    return {"tool_calls": [{"index": index, **head, "function": function}]}


def error_body(message: str, type_: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def provider(server: Server, spec: OpenAIModel | OpenAICompatibleModel | None = None):
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    return OpenAIProvider(spec or OpenAIModel(model=MODEL), http_client=client)


def ask(prov: OpenAIProvider, request: LLMRequest, deltas: list[LLMDelta] | None = None):
    async def sink(delta: LLMDelta) -> None:
        assert deltas is not None
        deltas.append(delta)

    async def go():
        try:
            return await prov.complete(request, on_delta=sink if deltas is not None else None)
        finally:
            await prov.close()

    return asyncio.run(go())


def request(**fields) -> LLMRequest:
    fields.setdefault("messages", (ChatMessage(role="user", content="What is 17 * 23 + 4?"),))
    return LLMRequest(model="gpt", **fields)


def test_request_body_maps_messages_tools_images_and_options():
    server = Server(httpx2.Response(200, json=completion({"content": "425"})))
    call = ToolCall(call_id="call_abc", tool="calculator", arguments={"expression": "17 * 23"})
    messages = (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(
            role="user",
            content=(
                TextPart(text="What is shown?"),
                ImagePart(url="https://example.com/cat.png"),
                ImagePart(data_b64="iVBORw0KGgo=", media_type="image/png"),
            ),
        ),
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", content="391", tool_call_id="call_abc"),
        ChatMessage(role="assistant", content="It is 391."),
    )
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    req = request(
        messages=messages,
        tools=(CALC,),
        tool_choice="required",
        response_format=schema,
        temperature=0.2,
        max_tokens=64,
        stop=("END",),
    )
    ask(provider(server), req)
    sent = server.requests[0]
    assert sent.url.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert server.body == {
        "model": MODEL,
        "stream": False,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is shown?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {
                            "name": "calculator",
                            "arguments": '{"expression": "17 * 23"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc", "content": "391"},
            {"role": "assistant", "content": "It is 391."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "calculator",
                    "description": "Evaluates arithmetic.",
                    "parameters": CALC.parameters,
                },
            }
        ],
        "tool_choice": "required",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema},
        },
        "temperature": 0.2,
        "max_completion_tokens": 64,
        "stop": ["END"],
    }


def test_no_tools_means_no_tool_choice_and_no_optional_fields():
    server = Server(httpx2.Response(200, json=completion({"content": "hi"})))
    ask(provider(server), request(tool_choice="none"))
    assert set(server.body) == {"model", "messages", "stream"}


def test_response_maps_text_tool_calls_finish_and_usage():
    message = {
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "17 * 23 + 4"}'},
            },
            {"id": "call_def", "type": "function", "function": {"name": "clock", "arguments": ""}},
        ],
    }
    server = Server(httpx2.Response(200, json=completion(message, "tool_calls")))
    response = ask(provider(server), request(tools=(CALC, CLOCK)))
    assert response.text == ""
    assert response.tool_calls == (
        ToolCall(call_id="call_abc", tool="calculator", arguments={"expression": "17 * 23 + 4"}),
        ToolCall(call_id="call_def", tool="clock", arguments={}),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (82, 17)
    assert response.usage.calls == 1
    assert response.usage.cost_usd == 0.0
    assert response.model == MODEL
    assert response.provider == "openai"
    assert response.latency_s >= 0.0


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_calls"),
    ],
)
def test_finish_reasons_are_normalized(finish, expected):
    server = Server(httpx2.Response(200, json=completion({"content": "x"}, finish)))
    assert ask(provider(server), request()).finish_reason == expected


def test_a_refusal_is_a_content_filter_finish():
    message = {"content": None, "refusal": "I can't help with that."}
    server = Server(httpx2.Response(200, json=completion(message)))
    response = ask(provider(server), request())
    assert (response.text, response.finish_reason) == ("I can't help with that.", "content_filter")


def test_invalid_tool_arguments_are_a_plain_model_error():
    message = {
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": "{"}}
        ],
    }
    server = Server(httpx2.Response(200, json=completion(message, "tool_calls")))
    with pytest.raises(ModelError, match="invalid JSON arguments") as caught:
        ask(provider(server), request(tools=(CALC,)))
    assert type(caught.value) is ModelError
    assert caught.value.detail["tool"] == "calculator"


def test_parse_arguments():
    assert parse_arguments(None, "t") == {}
    assert parse_arguments("  ", "t") == {}
    assert parse_arguments('{"a": [1]}', "t") == {"a": [1]}
    with pytest.raises(ModelError):
        parse_arguments("[1, 2]", "t")


def test_compatible_server_gets_max_tokens_and_a_placeholder_key():
    spec = OpenAICompatibleModel(model="qwen2.5-7b", base_url="http://127.0.0.1:8000/v1")
    message = {
        "content": "",
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
        ],
    }
    server = Server(httpx2.Response(200, json=completion(message, "stop")))
    prov = provider(server, spec)
    assert prov.name == "openai_compatible"
    response = ask(prov, request(max_tokens=32, tools=(CLOCK,)))
    assert server.requests[0].url == "http://127.0.0.1:8000/v1/chat/completions"
    assert server.body["max_tokens"] == 32
    assert "max_completion_tokens" not in server.body
    assert server.requests[0].headers["authorization"] == "Bearer no-key"
    assert response.provider == "openai_compatible"
    assert response.finish_reason == "tool_calls"  # the server said 'stop' after a tool call


def test_missing_key_variable_is_a_config_error_naming_it(monkeypatch):
    monkeypatch.setenv("OTHER_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as caught:
        OpenAIProvider(OpenAIModel(model=MODEL))
    assert caught.value.detail["env"] == "OPENAI_API_KEY"
    with pytest.raises(ConfigError, match="api_key_env"):
        OpenAIProvider(OpenAIModel(model=MODEL, api_key_env=None))
    spec = OpenAICompatibleModel(model="m", base_url="http://127.0.0.1:1/v1", api_key_env="NOPE")
    with pytest.raises(ConfigError, match="NOPE"):
        OpenAIProvider(spec)


def test_a_429_is_one_request_and_rate_limited_with_retry_after_ms():
    headers = {"retry-after-ms": "250", "retry-after": "3", "x-request-id": "req_123"}
    body = error_body("Rate limit reached for gpt-4o", "requests", "rate_limit_exceeded")
    server = Server(httpx2.Response(429, headers=headers, json=body))
    with pytest.raises(RateLimited) as caught:
        ask(provider(server), request())
    assert len(server.requests) == 1
    assert caught.value.detail["retry_after_s"] == 0.25
    assert caught.value.detail["status_code"] == 429
    assert caught.value.detail["request_id"] == "req_123"
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            401,
            error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
            AuthFailed,
        ),
        (403, error_body("Country not supported", "request_forbidden", None), AuthFailed),
        (
            400,
            error_body(
                "This model's maximum context length is 128000 tokens.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            ContextTooLong,
        ),
        (
            400,
            error_body("The response was filtered", "invalid_request_error", "content_filter"),
            ContentFiltered,
        ),
        (400, error_body("Invalid 'messages'", "invalid_request_error", None), BadRequest),
        (
            404,
            error_body("The model does not exist", "invalid_request_error", "model_not_found"),
            BadRequest,
        ),
        (409, error_body("Conflict", "invalid_request_error", None), BadRequest),
        (422, error_body("Unprocessable", "invalid_request_error", None), BadRequest),
        (500, error_body("The server had an error", "server_error", None), ProviderUnavailable),
        (502, {"error": "bad gateway"}, ProviderUnavailable),
        (503, error_body("The engine is currently overloaded", "server_error", None), Overloaded),
        (529, error_body("Overloaded", "server_error", None), Overloaded),
    ],
)
def test_http_errors_map_to_typed_errors(status, body, expected):
    server = Server(httpx2.Response(status, json=body))
    with pytest.raises(expected) as caught:
        ask(provider(server), request())
    assert type(caught.value) is expected
    assert caught.value.detail["status_code"] == status
    assert len(server.requests) == 1


def test_transport_failures_map_to_timeout_and_unavailable():
    def timeout(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    def refused(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    server = Server(timeout)
    with pytest.raises(ModelTimeout):
        ask(provider(server), request())
    assert len(server.requests) == 1
    server = Server(refused)
    with pytest.raises(ProviderUnavailable):
        ask(provider(server), request())
    assert len(server.requests) == 1


def test_the_key_never_appears_in_an_error():
    body = error_body(f"Incorrect API key provided: {KEY}.", "invalid_request_error", "bad_key")
    server = Server(httpx2.Response(401, json=body))
    with pytest.raises(AuthFailed) as caught:
        ask(provider(server), request())
    error = caught.value
    assert KEY not in str(error)
    assert KEY not in repr(error.detail)
    assert "[redacted]" in str(error)
    assert error.__cause__ is None  # the SDK's own message holds the key: not chained


# --- streaming ---------------------------------------------------------------------------


def tool_stream() -> bytes:
    return sse(
        chunk({"role": "assistant", "content": "", "refusal": None}),
        chunk({"content": "Let me "}),
        chunk({"content": "compute."}),
        chunk(fragment(0, "", "call_DdmO9pD3", "calculator")),
        chunk(fragment(0, '{"expr')),
        chunk(fragment(1, "", "call_Zk41", "clock")),
        chunk(fragment(0, 'ession": "17 * 23')),
        chunk(fragment(0, ' + 4"}')),
        chunk({}, "tool_calls"),
        chunk(usage={"prompt_tokens": 90, "completion_tokens": 31, "total_tokens": 121}),
        "[DONE]",
    )


def test_stream_forwards_deltas_in_order_and_assembles_tool_calls():
    server = Server(stream_response(tool_stream()))
    deltas: list[LLMDelta] = []
    response = ask(provider(server), request(stream=True, tools=(CALC, CLOCK)), deltas)
    assert server.body["stream"] is True
    assert server.body["stream_options"] == {"include_usage": True}
    assert [d.text for d in deltas if d.text] == ["Let me ", "compute."]
    fragments = [
        (d.tool_call_index, d.tool_call_id, d.tool_name, d.arguments)
        for d in deltas
        if d.tool_call_index is not None
    ]
    assert fragments == [
        (0, "call_DdmO9pD3", "calculator", ""),
        (0, None, None, '{"expr'),
        (1, "call_Zk41", "clock", ""),
        (0, None, None, 'ession": "17 * 23'),
        (0, None, None, ' + 4"}'),
    ]
    assert response.text == "Let me compute."
    assert response.tool_calls == (
        ToolCall(
            call_id="call_DdmO9pD3", tool="calculator", arguments={"expression": "17 * 23 + 4"}
        ),
        ToolCall(call_id="call_Zk41", tool="clock", arguments={}),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (90, 31)
    assert response.model == MODEL


def test_stream_without_a_usage_chunk_estimates_usage():
    body = sse(chunk({"content": "four words right here"}), chunk({}, "stop"), "[DONE]")
    response = ask(provider(Server(stream_response(body))), request(stream=True), [])
    assert response.usage.completion_tokens == 4
    assert response.usage.prompt_tokens == 7  # 'What is 17 * 23 + 4?'
    assert response.usage.calls == 1


def test_stream_that_ends_without_a_finish_reason_is_interrupted():
    body = sse(chunk({"content": "Hel"}), chunk({"content": "lo"}))
    deltas: list[LLMDelta] = []
    with pytest.raises(StreamInterrupted, match="without a finish reason"):
        ask(provider(Server(stream_response(body))), request(stream=True), deltas)
    assert [d.text for d in deltas] == ["Hel", "lo"]


@pytest.mark.parametrize(
    "fault",
    [
        httpx2.ReadError("connection reset by peer"),
        httpx2.RemoteProtocolError("peer closed connection without sending complete body"),
        httpx2.ReadTimeout("read timed out"),
    ],
)
def test_a_connection_drop_mid_stream_is_interrupted(fault):
    body = Broken([sse(chunk({"content": "Hel"}))], fault)
    deltas: list[LLMDelta] = []
    with pytest.raises(StreamInterrupted) as caught:
        ask(provider(Server(stream_response(body))), request(stream=True), deltas)
    assert caught.value.retryable
    assert [d.text for d in deltas] == ["Hel"]


def test_malformed_json_mid_stream_is_interrupted():
    body = sse(chunk({"content": "Hel"})) + b'data: {"id": "chatcmpl-B9M", "choi\n\n'
    with pytest.raises(StreamInterrupted, match="JSONDecodeError"):
        ask(provider(Server(stream_response(body))), request(stream=True), [])


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"message": "The server had an error", "type": "server_error"}, ProviderUnavailable),
        (
            {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"},
            RateLimited,
        ),
        ({"message": "Something odd happened"}, StreamInterrupted),
    ],
)
def test_an_error_event_mid_stream_maps_by_its_body(error, expected):
    body = sse(chunk({"content": "Hel"}), {"error": error})
    with pytest.raises(expected) as caught:
        ask(provider(Server(stream_response(body))), request(stream=True), [])
    assert type(caught.value) is expected


def test_a_429_before_the_stream_starts_is_rate_limited():
    server = Server(
        httpx2.Response(
            429, headers={"retry-after": "0.5"}, json=error_body("slow down", "requests")
        )
    )
    with pytest.raises(RateLimited) as caught:
        ask(provider(server), request(stream=True), [])
    assert caught.value.detail["retry_after_s"] == 0.5
    assert len(server.requests) == 1


# --- text-mode tools ---------------------------------------------------------------------

TEXT_SPEC = OpenAICompatibleModel(
    model="llama3", base_url="http://127.0.0.1:11434/v1", native_tools=False
)


def test_text_mode_describes_tools_in_the_prompt_and_parses_calls():
    answer = (
        "I will compute it.\n"
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'
    )
    server = Server(httpx2.Response(200, json=completion({"content": answer})))
    earlier = ToolCall(call_id="call_0", tool="clock", arguments={})
    messages = (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Time, then 2 + 2?"),
        ChatMessage(role="assistant", tool_calls=(earlier,)),
        ChatMessage(role="tool", content="12:00", tool_call_id="call_0"),
    )
    response = ask(provider(server, TEXT_SPEC), request(messages=messages, tools=(CALC, CLOCK)))
    sent = server.body
    assert "tools" not in sent
    assert "tool_choice" not in sent
    system = sent["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.\n\n# Tools")
    assert "- calculator: Evaluates arithmetic." in system["content"]
    assert '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>' in system["content"]
    assert sent["messages"][2] == {
        "role": "assistant",
        "content": '<tool_call>{"name": "clock", "arguments": {}}</tool_call>',
    }
    assert sent["messages"][3] == {"role": "user", "content": "Tool result for call_0: 12:00"}
    assert response.text == "I will compute it."
    assert response.tool_calls == (
        ToolCall(call_id="call_1", tool="calculator", arguments={"expression": "2 + 2"}),
    )
    assert response.finish_reason == "tool_calls"


def test_text_mode_stream_hides_call_blocks_and_emits_the_calls():
    pieces = ["Sure.", " <tool", '_call>{"name": "clock", ', '"arguments": {}}</tool_', "call>"]
    body = sse(*(chunk({"content": p}) for p in pieces), chunk({}, "stop"), "[DONE]")
    deltas: list[LLMDelta] = []
    response = ask(
        provider(Server(stream_response(body)), TEXT_SPEC),
        request(stream=True, tools=(CLOCK,)),
        deltas,
    )
    shown = "".join(d.text for d in deltas)
    assert "tool_call" not in shown
    assert shown.strip() == "Sure."
    assert deltas[-1] == LLMDelta(
        tool_call_index=0, tool_call_id="call_0", tool_name="clock", arguments="{}"
    )
    assert response.tool_calls == (ToolCall(call_id="call_0", tool="clock", arguments={}),)
    assert response.text == "Sure."
    assert response.finish_reason == "tool_calls"


def test_unreadable_json_in_a_plain_answer_is_provider_unavailable():
    body = b'{"id": "x", "choi'
    server = Server(
        httpx2.Response(200, headers={"content-type": "application/json"}, content=body)
    )
    with pytest.raises(ProviderUnavailable, match="could not be read"):
        ask(provider(server), request())
