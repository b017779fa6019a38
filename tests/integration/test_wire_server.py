"""The wire test server against the official SDKs (openai 3.x, anthropic 2.x), unmodified:
successful answers, streaming shapes, scripting and lifecycle. Faults: test_wire_server_faults.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from tests.support.wire_clients import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    anthropic_client,
    anthropic_message,
    anthropic_stream,
    openai_chat,
    openai_client,
    openai_stream,
    user,
)
from tests.support.wire_server import (
    Delay,
    Reply,
    ToolCall,
    WireServer,
    running_wire_server,
)

SEARCH_O = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    },
}
SEARCH_A = {
    "name": "search",
    "input_schema": SEARCH_O["function"]["parameters"],
}


@pytest.fixture(scope="module")
def shared_server():
    with running_wire_server() as server:
        yield server


@pytest.fixture
def server(shared_server):
    shared_server.reset()
    yield shared_server
    shared_server.reset()


# -- successful answers --------------------------------------------------------------------


def test_openai_text_usage_and_recording(server):
    server.script(Reply(text="the answer is 42"))
    done = asyncio.run(
        openai_chat(
            server, messages=[{"role": "system", "content": "be brief"}, *user("what is it")]
        )
    )
    assert done.object == "chat.completion"
    assert done.choices[0].message.content == "the answer is 42"
    assert done.choices[0].finish_reason == "stop"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (
        5,
        4,
        9,
    )
    [rec] = server.requests
    assert (rec.method, rec.path, rec.protocol) == ("POST", "/v1/chat/completions", "openai")
    assert rec.headers["authorization"] == "<redacted>"
    assert rec.body["model"] == OPENAI_MODEL
    assert rec.body["messages"][-1]["content"] == "what is it"
    assert server.request_count == 1
    assert server.pending == 0


def test_default_answers_echo_call_tool_then_done(server):
    echo = asyncio.run(openai_chat(server))
    assert echo.choices[0].message.content == "echo: hello there"
    called = asyncio.run(openai_chat(server, messages=user("find cats"), tools=[SEARCH_O]))
    [call] = called.choices[0].message.tool_calls
    assert called.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "search",
        {"q": "find cats"},
    )
    follow_up = [
        *user("find cats"),
        called.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "3 cats"},
    ]
    done = asyncio.run(openai_chat(server, messages=follow_up, tools=[SEARCH_O]))
    assert done.choices[0].message.content == "done: 3 cats"

    a_echo = asyncio.run(anthropic_message(server))
    assert a_echo.content[0].text == "echo: hello there"
    a_called = asyncio.run(anthropic_message(server, messages=user("find dogs"), tools=[SEARCH_A]))
    [use] = a_called.content
    assert (a_called.stop_reason, use.type, use.name, use.input) == (
        "tool_use",
        "tool_use",
        "search",
        {"q": "find dogs"},
    )
    a_follow_up = [
        *user("find dogs"),
        {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "2 dogs"}],
        },
    ]
    assert (
        asyncio.run(anthropic_message(server, messages=a_follow_up, tools=[SEARCH_A]))
        .content[0]
        .text
        == "done: 2 dogs"
    )


def test_scripted_tool_calls_non_streamed(server):
    calls = [ToolCall("search", {"q": "x", "n": 2}), ToolCall("noop")]
    server.script(Reply(tool_calls=calls), Reply(tool_calls=calls, text="let me look"))
    done = asyncio.run(openai_chat(server))
    got = [
        (c.function.name, json.loads(c.function.arguments))
        for c in done.choices[0].message.tool_calls
    ]
    assert got == [("search", {"q": "x", "n": 2}), ("noop", {})]
    assert done.choices[0].message.content is None
    message = asyncio.run(anthropic_message(server))
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[0].text == "let me look"
    assert [(b.name, b.input) for b in message.content[1:]] == [
        ("search", {"q": "x", "n": 2}),
        ("noop", {}),
    ]
    # text words + per call: name words + words of the arguments' JSON ('{"q": "x", "n": 2}': 4)
    assert message.usage.output_tokens == 3 + (1 + 4) + (1 + 1)


def test_anthropic_text_usage(server):
    server.script(Reply(text="hi there you"))
    message = asyncio.run(
        anthropic_message(server, system="you are terse", messages=user("say hi"))
    )
    assert (message.type, message.role, message.stop_reason) == ("message", "assistant", "end_turn")
    assert message.content[0].text == "hi there you"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (5, 3)
    rec = server.requests[0]
    # anthropic 2.x sends the api_key as "Authorization: Bearer ...", not x-api-key
    assert (rec.path, rec.protocol, rec.headers["authorization"]) == (
        "/v1/messages",
        "anthropic",
        "<redacted>",
    )
    assert "anthropic-version" in rec.headers


def test_models_in_both_shapes_and_count_tokens(server):
    async def go():
        async with openai_client(server) as o, anthropic_client(server) as a:
            listed = [m.id async for m in o.models.list()], [m.id async for m in a.models.list()]
            counted = await a.messages.count_tokens(model=ANTHROPIC_MODEL, messages=user("a b c"))
            return listed, counted.input_tokens

    assert asyncio.run(go()) == ((["wire-test-model"], ["wire-test-model"]), 3)
    assert [r.protocol for r in server.requests] == ["openai", "anthropic", "anthropic"]
    assert all(r.behaviour is None for r in server.requests)  # only completions use the script


def test_latency_and_chunk_delay_for_benchmarks():
    with running_wire_server(latency_s=0.05, chunk_delay_s=0.02) as server:
        started = time.monotonic()
        chunks = asyncio.run(openai_stream(server))  # role, "echo: one two three", finish
        assert len(chunks) == 1 + 4 + 1
        assert time.monotonic() - started >= 0.05 + 6 * 0.02  # 7 frames with [DONE]


# -- streaming -----------------------------------------------------------------------------


def test_openai_stream_text_and_final_usage_chunk(server):
    server.script(Reply(text="alpha beta gamma"))
    chunks = asyncio.run(openai_stream(server, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "alpha beta gamma"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    last = chunks[-1]
    assert last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (3, 3)
    assert all(c.usage is None for c in chunks[:-1])


def test_openai_stream_tool_calls_assembled_by_index(server):
    server.script(Reply(tool_calls=[ToolCall("search", {"q": "cats and dogs"}), ToolCall("noop")]))
    chunks = asyncio.run(openai_stream(server))
    calls: dict[int, dict] = {}
    fragments: dict[int, int] = {}
    for chunk in chunks:
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            if tc.id:
                assert slot["id"] is None, "id only in the first fragment"
                slot["id"], slot["name"] = tc.id, tc.function.name
            else:
                assert tc.function.name is None
            slot["arguments"] += tc.function.arguments or ""
            fragments[tc.index] = fragments.get(tc.index, 0) + 1
    assert [(calls[i]["name"], json.loads(calls[i]["arguments"])) for i in sorted(calls)] == [
        ("search", {"q": "cats and dogs"}),
        ("noop", {}),
    ]
    assert all(calls[i]["id"].startswith("call_") for i in calls)
    assert fragments[0] >= 3
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_anthropic_stream_event_sequence_and_usage(server):
    server.script(Reply(text="alpha beta"))
    events = asyncio.run(anthropic_stream(server))
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # the SDK swallows the "ping" the server sends after message_start
    assert "".join(e.delta.text for e in events if e.type == "content_block_delta") == "alpha beta"
    assert events[0].message.usage.input_tokens == 3
    delta = events[-2]
    assert (delta.delta.stop_reason, delta.usage.output_tokens) == ("end_turn", 2)


def test_anthropic_stream_tool_use_from_input_json_delta(server):
    server.script(Reply(tool_calls=[ToolCall("search", {"q": "cats and dogs"})], text="looking"))
    events = asyncio.run(anthropic_stream(server))
    starts = {e.index: e.content_block for e in events if e.type == "content_block_start"}
    assert [b.type for b in starts.values()] == ["text", "tool_use"]
    assert (starts[1].name, starts[1].input) == ("search", {})
    partial = [
        e.delta.partial_json for e in events if e.type == "content_block_delta" and e.index == 1
    ]
    assert len([p for p in partial if p]) >= 3
    assert json.loads("".join(partial)) == {"q": "cats and dogs"}
    assert events[-2].delta.stop_reason == "tool_use"

    async def helper():
        async with (
            anthropic_client(server) as client,
            client.messages.stream(
                model=ANTHROPIC_MODEL, max_tokens=64, messages=user("find owls"), tools=[SEARCH_A]
            ) as stream,
        ):
            return await stream.get_final_message()

    final = asyncio.run(helper())
    assert (final.content[0].name, final.content[0].input, final.stop_reason) == (
        "search",
        {"q": "find owls"},
        "tool_use",
    )


# -- scripting and lifecycle ------------------------------------------------------------


def test_callable_behaviour_sees_the_request(server):
    server.script(lambda rec: Reply(text=f"model was {rec.body['model']}"))
    assert (
        asyncio.run(openai_chat(server)).choices[0].message.content == f"model was {OPENAI_MODEL}"
    )


def test_binds_loopback_only_and_stops_cleanly_with_requests_in_flight():
    before = {t.name for t in threading.enumerate()}
    server = WireServer(latency_s=0.0).start()
    try:
        assert server.base_url_openai == f"http://127.0.0.1:{server.port}/v1"
        assert server.base_url_anthropic == f"http://127.0.0.1:{server.port}"
        assert server._sock.getsockname()[0] == "127.0.0.1"
        server.script(Delay(30.0))

        async def go():
            call = asyncio.create_task(openai_chat(server, timeout=10.0))
            assert await asyncio.to_thread(server.wait_for_requests, 1, 5.0)
            await asyncio.to_thread(server.stop)  # cuts the delay short, bounded joins
            return await call

        assert asyncio.run(go()).choices[0].message.content == "echo: hello there"
    finally:
        server.stop()
    assert {t.name for t in threading.enumerate()} <= before
    server.stop()  # idempotent
