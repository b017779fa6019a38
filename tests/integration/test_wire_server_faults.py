"""What the official SDKs do with each fault the wire test server can script: HTTP errors,
retries, truncated / dropped / failing / stalled streams. These pin what the LLM gateway must map.
"""

from __future__ import annotations

import asyncio

import anthropic
import httpx2
import openai
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
    Drop,
    HttpError,
    Reply,
    Stall,
    StreamError,
    Truncate,
    context_length_exceeded,
    overloaded,
    rate_limited,
    running_wire_server,
    server_error,
)


@pytest.fixture(scope="module")
def shared_server():
    with running_wire_server() as server:
        yield server


@pytest.fixture
def server(shared_server):
    shared_server.reset()
    yield shared_server
    shared_server.reset()


# -- HTTP errors ---------------------------------------------------------------------------


def test_429_is_rate_limit_error_with_retry_headers(server):
    server.script(rate_limited(retry_after=1.5, retry_after_ms=1500), rate_limited(retry_after=2))
    with pytest.raises(openai.RateLimitError) as o_err:
        asyncio.run(openai_chat(server))
    assert o_err.value.status_code == 429
    assert o_err.value.response.headers["retry-after"] == "1.5"
    assert o_err.value.response.headers["retry-after-ms"] == "1500"
    assert o_err.value.code == "rate_limit_exceeded"
    with pytest.raises(anthropic.RateLimitError) as a_err:
        asyncio.run(anthropic_message(server))
    assert a_err.value.response.headers["retry-after"] == "2"
    assert a_err.value.body["error"]["type"] == "rate_limit_error"


def test_529_is_anthropic_overloaded_error_and_openai_internal_server_error(server):
    server.script(overloaded(), overloaded())
    with pytest.raises(anthropic.OverloadedError) as a_err:
        asyncio.run(anthropic_message(server))
    assert isinstance(a_err.value, anthropic.InternalServerError)
    assert a_err.value.status_code == 529
    assert a_err.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": a_err.value.response.headers["request-id"],
    }
    with pytest.raises(openai.InternalServerError) as o_err:
        asyncio.run(openai_chat(server))
    assert o_err.value.status_code == 529


def test_5xx_classes(server):
    server.script(server_error(500), server_error(500), server_error(503), server_error(503))
    with pytest.raises(openai.InternalServerError) as o500:
        asyncio.run(openai_chat(server))
    assert o500.value.status_code == 500
    assert o500.value.type == "server_error"
    with pytest.raises(anthropic.InternalServerError) as a500:
        asyncio.run(anthropic_message(server))
    assert a500.value.body["error"]["type"] == "api_error"
    with pytest.raises(openai.InternalServerError):
        asyncio.run(openai_chat(server))
    with pytest.raises(anthropic.ServiceUnavailableError):
        asyncio.run(anthropic_message(server))


def test_context_length_errors_are_bad_requests(server):
    server.script(context_length_exceeded(), context_length_exceeded())
    with pytest.raises(openai.BadRequestError) as o_err:
        asyncio.run(openai_chat(server))
    assert o_err.value.code == "context_length_exceeded"
    assert o_err.value.type == "invalid_request_error"
    assert "maximum context length" in o_err.value.body["message"]
    with pytest.raises(anthropic.BadRequestError) as a_err:
        asyncio.run(anthropic_message(server))
    assert a_err.value.body["error"]["type"] == "invalid_request_error"
    assert a_err.value.body["error"]["message"].startswith("prompt is too long: ")


def test_custom_error_body_and_headers(server):
    server.script(
        HttpError(
            429,
            error_type="insufficient_quota",
            code="insufficient_quota",
            headers={"x-should-retry": "false"},
        )
    )
    with pytest.raises(openai.RateLimitError) as err:
        asyncio.run(openai_chat(server))
    assert (err.value.code, err.value.response.headers["x-should-retry"]) == (
        "insufficient_quota",
        "false",
    )


def test_wrong_api_key_is_401_without_consuming_the_script():
    with running_wire_server(api_key="right") as server:
        server.script(Reply(text="kept"))
        with pytest.raises(openai.AuthenticationError):
            asyncio.run(openai_chat(server))
        with pytest.raises(anthropic.AuthenticationError):
            asyncio.run(anthropic_message(server))
        assert server.pending == 1


def test_default_max_retries_follows_script_order(server):
    # retry-after-ms=10 keeps the SDKs' waits short; they prefer it over retry-after
    server.script(
        rate_limited(retry_after_ms=10), rate_limited(retry_after_ms=10), Reply(text="third time")
    )
    server.script(overloaded(retry_after=0.01), HttpError(500, retry_after_ms=10), Reply(text="ok"))

    async def go():
        async with (
            openai_client(server, max_retries=2) as o,
            anthropic_client(server, max_retries=2) as a,
        ):
            first = await o.chat.completions.create(model=OPENAI_MODEL, messages=user("x"))
            second = await a.messages.create(
                model=ANTHROPIC_MODEL, max_tokens=8, messages=user("x")
            )
            return first.choices[0].message.content, second.content[0].text

    assert asyncio.run(go()) == ("third time", "ok")
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "2"] * 2


# -- stream faults -------------------------------------------------------------------------


def test_truncated_stream_ends_without_error_or_finish(server):
    server.script(Truncate(after_chunks=3), Truncate(after_chunks=4))
    chunks = asyncio.run(openai_stream(server, messages=user("one two three four")))
    # OpenAI SDK: the body just ends without [DONE]; iteration stops quietly and no chunk
    # carries a finish_reason. Detecting the truncation is the caller's job.
    assert len(chunks) == 3
    assert all(c.choices[0].finish_reason is None for c in chunks)
    events = asyncio.run(anthropic_stream(server, messages=user("one two three four")))
    # Anthropic SDK: same, no exception; no message_delta (stop_reason) and no message_stop.
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]


def test_truncated_stream_through_the_sdk_helpers_has_no_stop_reason(server):
    server.script(Truncate(after_chunks=3), Truncate(after_chunks=4))

    async def go():
        async with openai_client(server) as o, anthropic_client(server) as a:
            async with o.chat.completions.stream(
                model=OPENAI_MODEL, messages=user("one two three")
            ) as s:
                completion = await s.get_final_completion()
            async with a.messages.stream(
                model=ANTHROPIC_MODEL, max_tokens=8, messages=user("one two")
            ) as s:
                message = await s.get_final_message()
            return completion, message

    completion, message = asyncio.run(go())
    assert (completion.choices[0].finish_reason, completion.choices[0].message.content) == (
        None,
        "echo: one",
    )
    assert (message.stop_reason, message.content[0].text) == (None, "echo:")


def _fault(exc: BaseException) -> BaseException:
    """The transport error itself: ``exc``, or what an SDK's wrapper was raised from."""
    return exc if isinstance(exc, httpx2.TransportError) else exc.__cause__ or exc


def test_dropped_connection_mid_stream(server):
    server.script(Drop(after_chunks=2), Drop(after_chunks=2), Drop(after_chunks=0))
    # OpenAI SDK wraps transport errors during iteration: APIConnectionError.
    with pytest.raises(openai.APIConnectionError) as o_err:
        asyncio.run(openai_stream(server))
    assert isinstance(o_err.value.__cause__, httpx2.RemoteProtocolError)
    # Anthropic SDK < 2.17 does not wrap them once the stream started: the raw httpx2 error
    # escapes; 2.17 wraps it as OpenAI's does. The providers read either (sdk_errors).
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as a_err:
        asyncio.run(anthropic_stream(server))
    assert isinstance(_fault(a_err.value), httpx2.RemoteProtocolError)
    # Non-streamed: headers then half the body, then the close -> APIConnectionError.
    with pytest.raises(openai.APIConnectionError):
        asyncio.run(openai_chat(server))


def test_error_event_mid_stream(server):
    server.script(StreamError(after_chunks=2), StreamError(after_chunks=2))
    with pytest.raises(openai.APIError) as o_err:
        asyncio.run(openai_stream(server))
    assert not isinstance(o_err.value, openai.APIStatusError)
    assert o_err.value.type == "server_error"
    with pytest.raises(anthropic.APIStatusError) as a_err:
        asyncio.run(anthropic_stream(server))
    # raised from the event, not the status line: status 200, not an OverloadedError
    assert not isinstance(a_err.value, anthropic.InternalServerError)
    assert a_err.value.status_code == 200
    assert a_err.value.body["error"]["type"] == "overloaded_error"


def test_timeouts_on_delay_and_stall(server):
    server.script(Delay(5.0), Delay(5.0), Stall(after_chunks=2, seconds=5.0))
    with pytest.raises(openai.APITimeoutError):
        asyncio.run(openai_chat(server, timeout=0.2))
    with pytest.raises(anthropic.APITimeoutError):
        asyncio.run(anthropic_message(server, timeout=0.2))
    # mid-stream read timeout: the raw httpx2 error from the Anthropic SDK (< 2.17), or
    # wrapped in its APITimeoutError (2.17)
    with pytest.raises((httpx2.ReadTimeout, anthropic.APITimeoutError)) as a_err:
        asyncio.run(anthropic_stream(server, timeout=0.2))
    assert isinstance(_fault(a_err.value), httpx2.ReadTimeout)
