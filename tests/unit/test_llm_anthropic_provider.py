"""AnthropicProvider against Anthropic's wire format, served by an httpx2.MockTransport."""

import asyncio
import json

import httpx2
import pytest
from sdk_fakes import CALC, CLOCK, Broken, Server

from raytroupe.actors.llm.anthropic_provider import AnthropicProvider
from raytroupe.protocols import (
    AnthropicModel,
    AuthFailed,
    BadRequest,
    ChatMessage,
    ConfigError,
    ContextTooLong,
    ImagePart,
    LLMDelta,
    LLMRequest,
    ModelError,
    ModelTimeout,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    StreamInterrupted,
    TextPart,
    ToolCall,
)

KEY = "test-anthropic-key-Vb38Qm"  # not shaped like a real key: only explicit masking hides it
MODEL = "claude-sonnet-5-5"


def event(data: dict) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def stream_response(body: bytes | Broken) -> httpx2.Response:
    headers = {"content-type": "text/event-stream"}
    if isinstance(body, Broken):
        return httpx2.Response(200, headers=headers, stream=body)
    return httpx2.Response(200, headers=headers, content=body)


def message(content: list[dict], stop: str = "end_turn", usage: tuple[int, int] = (472, 91)):
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        },
    }


def error_body(type_: str, text: str) -> dict:
    return {
        "type": "error",
        "error": {"type": type_, "message": text},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


START = {
    "type": "message_start",
    "message": {
        "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 472, "output_tokens": 2},
    },
}


def text_delta(index: int, text: str) -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def json_delta(index: int, partial: str) -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial},
    }


def tool_start(index: int, call_id: str, name: str) -> dict:
    return {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
    }


TEXT_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}
PING = {"type": "ping"}


def stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def finish(reason: str, output_tokens: int = 89) -> dict:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


MESSAGE_STOP = {"type": "message_stop"}


def tool_stream() -> bytes:
    events = [
        START,
        TEXT_START,
        PING,
        text_delta(0, "Okay, "),
        text_delta(0, "computing."),
        stop(0),
        tool_start(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "calculator"),
        json_delta(1, ""),
        json_delta(1, '{"expres'),
        json_delta(1, 'sion": "17 * 23'),
        json_delta(1, ' + 4"}'),
        stop(1),
        tool_start(2, "toolu_01Clock", "clock"),
        stop(2),
        finish("tool_use"),
        MESSAGE_STOP,
    ]
    return b"".join(event(e) for e in events)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def provider(server: Server, spec: AnthropicModel | None = None) -> AnthropicProvider:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    return AnthropicProvider(spec or AnthropicModel(model=MODEL), http_client=client)


def ask(prov: AnthropicProvider, request: LLMRequest, deltas: list[LLMDelta] | None = None):
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
    return LLMRequest(model="claude", **fields)


CACHE = {"type": "ephemeral"}


def test_request_body_maps_system_tools_results_and_images():
    server = Server(httpx2.Response(200, json=message([{"type": "text", "text": "425"}])))
    calls = (
        ToolCall(call_id="toolu_a", tool="calculator", arguments={"expression": "17 * 23"}),
        ToolCall(call_id="toolu_b", tool="clock", arguments={}),
    )
    messages = (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(
            role="user",
            content=(
                TextPart(text="What is shown?"),
                ImagePart(url="https://example.com/cat.png"),
                ImagePart(data_b64="iVBORw0KGgo=", media_type="image/png"),
                ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
            ),
        ),
        ChatMessage(role="assistant", content="Let me check.", tool_calls=calls),
        ChatMessage(role="tool", content="391", tool_call_id="toolu_a"),
        ChatMessage(role="tool", content="12:00", tool_call_id="toolu_b"),
        ChatMessage(role="assistant", content="391, at noon."),
        ChatMessage(role="system", content="Use digits."),
        ChatMessage(role="user", content="Add 34."),
    )
    req = request(
        messages=messages, tools=(CALC, CLOCK), tool_choice="auto", temperature=0.3, stop=("END",)
    )
    ask(provider(server), req)
    sent = server.requests[0]
    assert sent.url.path == "/v1/messages"
    assert sent.headers["authorization"] == f"Bearer {KEY}"  # SDK 2.x: no x-api-key
    assert "anthropic-version" in sent.headers
    assert "temperature" not in server.body  # SDK 2.x's messages API takes none
    assert server.body == {
        "model": MODEL,
        "max_tokens": 1024,
        "stream": False,
        "system": [{"type": "text", "text": "Be brief.\n\nUse digits.", "cache_control": CACHE}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is shown?"},
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/cat.png"},
                    },
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/jpeg",
                            "data": "/9j/4AAQ",
                        },
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_a",
                        "name": "calculator",
                        "input": {"expression": "17 * 23"},
                    },
                    {"type": "tool_use", "id": "toolu_b", "name": "clock", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "391"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "12:00"},
                ],
            },
            {"role": "assistant", "content": "391, at noon."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Add 34.", "cache_control": CACHE}],
            },
        ],
        "tools": [
            {
                "name": "calculator",
                "description": "Evaluates arithmetic.",
                "input_schema": CALC.parameters,
            },
            {
                "name": "clock",
                "description": "Tells the time.",
                "input_schema": {"type": "object", "properties": {}},
                "cache_control": CACHE,
            },
        ],
        "tool_choice": {"type": "auto"},
        "stop_sequences": ["END"],
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
def test_tool_choice_mapping(choice, expected):
    server = Server(httpx2.Response(200, json=message([{"type": "text", "text": "ok"}])))
    ask(provider(server), request(tools=(CLOCK,), tool_choice=choice))
    assert server.body["tool_choice"] == expected


def test_max_tokens_response_format_and_no_tools():
    server = Server(httpx2.Response(200, json=message([{"type": "text", "text": "{}"}])))
    spec = AnthropicModel(model=MODEL, max_tokens=300)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    ask(provider(server, spec), request(max_tokens=77, response_format=schema))
    body = server.body
    assert body["max_tokens"] == 77
    assert "tools" not in body
    assert "tool_choice" not in body
    assert body["system"][0]["text"].startswith("Answer with one JSON value only")
    assert json.dumps(schema, sort_keys=True) in body["system"][0]["text"]
    server = Server(httpx2.Response(200, json=message([{"type": "text", "text": "ok"}])))
    ask(provider(server, spec), request())
    assert server.body["max_tokens"] == 300
    assert "system" not in server.body


def test_response_maps_text_tool_use_and_usage():
    content = [
        {"type": "text", "text": "I'll compute "},
        {"type": "text", "text": "that."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "calculator",
            "input": {"expression": "17 * 23 + 4"},
        },
        {"type": "tool_use", "id": "toolu_02", "name": "clock", "input": {}},
    ]
    server = Server(httpx2.Response(200, json=message(content, "tool_use")))
    response = ask(provider(server), request(tools=(CALC, CLOCK)))
    assert response.text == "I'll compute that."
    assert response.tool_calls == (
        ToolCall(
            call_id="toolu_01A09q90qw90lq917835lq9",
            tool="calculator",
            arguments={"expression": "17 * 23 + 4"},
        ),
        ToolCall(call_id="toolu_02", tool="clock", arguments={}),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (472, 91)
    assert response.usage.calls == 1
    assert response.model == MODEL
    assert response.provider == "anthropic"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
    ],
)
def test_stop_reasons_are_normalized(reason, expected):
    server = Server(httpx2.Response(200, json=message([{"type": "text", "text": "x"}], reason)))
    assert ask(provider(server), request()).finish_reason == expected


def test_missing_key_variable_is_a_config_error_naming_it(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY") as caught:
        AnthropicProvider(AnthropicModel(model=MODEL))
    assert KEY not in str(caught.value)
    with pytest.raises(ConfigError, match="api_key_env"):
        AnthropicProvider(AnthropicModel(model=MODEL, api_key_env=None))
    proxy = AnthropicModel(model=MODEL, api_key_env=None, base_url="http://127.0.0.1:9/")
    assert AnthropicProvider(proxy).name == "anthropic"


def test_an_image_type_anthropic_refuses_fails_before_any_request():
    server = Server()
    bad = ChatMessage(role="user", content=(ImagePart(data_b64="AAAA", media_type="image/bmp"),))
    with pytest.raises(BadRequest, match="image/bmp"):
        ask(provider(server), request(messages=(bad,)))
    assert server.requests == []


def test_a_429_is_one_request_and_rate_limited_with_fractional_retry_after():
    body = error_body("rate_limit_error", "Number of request tokens has exceeded your limit.")
    server = Server(httpx2.Response(429, headers={"retry-after": "0.5"}, json=body))
    with pytest.raises(RateLimited) as caught:
        ask(provider(server), request())
    assert len(server.requests) == 1
    assert caught.value.detail["retry_after_s"] == 0.5


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            400,
            error_body(
                "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            ContextTooLong,
        ),
        (400, error_body("invalid_request_error", "messages: roles must alternate"), BadRequest),
        (401, error_body("authentication_error", "invalid x-api-key"), AuthFailed),
        (403, error_body("permission_error", "Your API key does not have permission"), AuthFailed),
        (404, error_body("not_found_error", "model: claude-nope"), BadRequest),
        (413, error_body("request_too_large", "Request exceeds the maximum size"), BadRequest),
        (500, error_body("api_error", "Internal server error"), ProviderUnavailable),
        (503, error_body("api_error", "Service unavailable"), Overloaded),
        (529, error_body("overloaded_error", "Overloaded"), Overloaded),
    ],
)
def test_http_errors_map_to_typed_errors(status, body, expected):
    server = Server(httpx2.Response(status, json=body))
    with pytest.raises(expected) as caught:
        ask(provider(server), request())
    assert type(caught.value) is expected
    assert caught.value.detail["status_code"] == status
    assert len(server.requests) == 1


def test_a_529_carries_the_wait_it_asks_for():
    headers = {"retry-after-ms": "1500"}
    server = Server(
        httpx2.Response(529, headers=headers, json=error_body("overloaded_error", "Overloaded"))
    )
    with pytest.raises(Overloaded) as caught:
        ask(provider(server), request())
    assert caught.value.detail["retry_after_s"] == 1.5


def test_transport_failures_map_to_timeout_and_unavailable():
    def timeout(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectTimeout("timed out", request=request)

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
    body = error_body("authentication_error", f"invalid x-api-key: {KEY}")
    server = Server(httpx2.Response(401, json=body))
    with pytest.raises(AuthFailed) as caught:
        ask(provider(server), request())
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value.detail)
    assert caught.value.__cause__ is None


# --- streaming ---------------------------------------------------------------------------


def test_stream_forwards_deltas_in_order_and_parses_tool_input_at_block_stop():
    server = Server(stream_response(tool_stream()))
    deltas: list[LLMDelta] = []
    response = ask(provider(server), request(stream=True, tools=(CALC, CLOCK)), deltas)
    assert server.body["stream"] is True
    assert deltas == [
        LLMDelta(text="Okay, "),
        LLMDelta(text="computing."),
        LLMDelta(
            tool_call_index=1, tool_call_id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", tool_name="calculator"
        ),
        LLMDelta(tool_call_index=1, arguments=""),
        LLMDelta(tool_call_index=1, arguments='{"expres'),
        LLMDelta(tool_call_index=1, arguments='sion": "17 * 23'),
        LLMDelta(tool_call_index=1, arguments=' + 4"}'),
        LLMDelta(tool_call_index=2, tool_call_id="toolu_01Clock", tool_name="clock"),
    ]
    assert response.text == "Okay, computing."
    assert response.tool_calls == (
        ToolCall(
            call_id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            tool="calculator",
            arguments={"expression": "17 * 23 + 4"},
        ),
        ToolCall(call_id="toolu_01Clock", tool="clock", arguments={}),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (472, 89)
    assert response.model == MODEL


def test_invalid_streamed_tool_input_is_a_plain_model_error():
    events = [START, tool_start(0, "toolu_x", "calculator"), json_delta(0, '{"expr'), stop(0)]
    body = b"".join(event(e) for e in events)
    with pytest.raises(ModelError, match="invalid JSON arguments") as caught:
        ask(provider(Server(stream_response(body))), request(stream=True), [])
    assert type(caught.value) is ModelError


@pytest.mark.parametrize(
    "events",
    [
        [START, TEXT_START, text_delta(0, "Hel")],
        [START, TEXT_START, text_delta(0, "Hel"), stop(0), finish("end_turn")],
        [START, TEXT_START, text_delta(0, "Hel"), stop(0), MESSAGE_STOP],
    ],
    ids=["cut-mid-block", "no-message-stop", "no-stop-reason"],
)
def test_a_stream_that_ends_early_is_interrupted(events):
    body = b"".join(event(e) for e in events)
    deltas: list[LLMDelta] = []
    with pytest.raises(StreamInterrupted, match="before message_stop"):
        ask(provider(Server(stream_response(body))), request(stream=True), deltas)
    assert deltas == [LLMDelta(text="Hel")]


@pytest.mark.parametrize(
    "fault",
    [
        httpx2.ReadError("connection reset by peer"),
        httpx2.RemoteProtocolError("peer closed connection without sending complete body"),
        httpx2.ReadTimeout("read timed out"),
    ],
)
def test_a_connection_drop_mid_stream_is_interrupted(fault):
    body = Broken([event(START), event(TEXT_START), event(text_delta(0, "Hel"))], fault)
    deltas: list[LLMDelta] = []
    with pytest.raises(StreamInterrupted) as caught:
        ask(provider(Server(stream_response(body))), request(stream=True), deltas)
    assert caught.value.detail["cause"] == type(fault).__name__
    assert deltas == [LLMDelta(text="Hel")]


def test_malformed_json_mid_stream_is_interrupted():
    body = event(START) + b'event: content_block_delta\ndata: {"type": "content_block_de\n\n'
    with pytest.raises(StreamInterrupted, match="JSONDecodeError"):
        ask(provider(Server(stream_response(body))), request(stream=True), [])


@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("overloaded_error", Overloaded),
        ("rate_limit_error", RateLimited),
        ("api_error", ProviderUnavailable),
        ("something_new", StreamInterrupted),
    ],
)
def test_an_error_event_mid_stream_maps_to_its_typed_error(error_type, expected):
    events = [START, TEXT_START, text_delta(0, "Hel"), error_body(error_type, "Overloaded")]
    body = b"".join(event(e) for e in events)
    deltas: list[LLMDelta] = []
    with pytest.raises(expected) as caught:
        ask(provider(Server(stream_response(body))), request(stream=True), deltas)
    assert type(caught.value) is expected
    assert "status_code" not in caught.value.detail
    assert deltas == [LLMDelta(text="Hel")]


def test_the_key_never_appears_in_an_error_event():
    events = [START, error_body("overloaded_error", f"key {KEY} is overloaded")]
    body = b"".join(event(e) for e in events)
    with pytest.raises(Overloaded) as caught:
        ask(provider(Server(stream_response(body))), request(stream=True), [])
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value.detail)


def test_unreadable_json_in_a_plain_answer_is_provider_unavailable():
    body = b'{"id": "x", "choi'
    server = Server(
        httpx2.Response(200, headers={"content-type": "application/json"}, content=body)
    )
    with pytest.raises(ProviderUnavailable, match="could not be read"):
        ask(provider(server), request())
