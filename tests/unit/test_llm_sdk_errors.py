"""Mapping of openai / anthropic SDK exceptions to the project's typed model errors."""

import json
import pickle
from email.utils import formatdate

import anthropic
import httpx2
import openai
import pytest

from raytroupe.actors.llm.sdk_errors import (
    map_sdk_error,
    redact,
    resolve_api_key,
    retry_after_seconds,
    safe_cause,
    stream_broke,
)
from raytroupe.protocols import (
    AuthFailed,
    BadRequest,
    ConfigError,
    ContentFiltered,
    ContextTooLong,
    ModelError,
    ModelTimeout,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    StreamInterrupted,
)

NOW = 1_800_000_000.0
HIDDEN = "my-hidden-value-123"
URL = "https://api.example.com/v1/chat/completions"


def request() -> httpx2.Request:
    return httpx2.Request("POST", URL)


def openai_status(status: int, body: dict | None = None, headers: dict | None = None):
    response = httpx2.Response(status, headers=headers or {}, json=body or {}, request=request())
    data = (body or {}).get("error", body)  # the client hands the inner error object on
    return openai.APIStatusError(f"Error code: {status} - {body}", response=response, body=data)


def anthropic_status(status: int, body: dict | None = None, headers: dict | None = None):
    response = httpx2.Response(status, headers=headers or {}, json=body or {}, request=request())
    return anthropic.APIStatusError(f"Error code: {status} - {body}", response=response, body=body)


def anthropic_body(type_: str, message: str) -> dict:
    return {"type": "error", "error": {"type": type_, "message": message}}


# --- retry_after_seconds -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "7"}, 0.25),
        ({"Retry-After-Ms": "1500"}, 1.5),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"Retry-After": " 2.25 "}, 2.25),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after-ms": "-10"}, 0.0),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "nan", "retry-after": "1"}, 1.0),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "whenever"}, None),
        ({"retry-after": ""}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers, expected):
    assert retry_after_seconds(headers, now=NOW) == expected


def test_retry_after_as_an_http_date_counts_from_now():
    assert retry_after_seconds({"retry-after": formatdate(NOW + 30, usegmt=True)}, now=NOW) == 30.0
    assert retry_after_seconds({"retry-after": formatdate(NOW - 30, usegmt=True)}, now=NOW) == 0.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=NOW) == 0.0


def test_retry_after_reads_httpx2_headers():
    headers = httpx2.Headers({"Retry-After": "0.75"})
    assert retry_after_seconds(headers, now=NOW) == 0.75


# --- map_sdk_error -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, {"error": {"message": "slow down", "type": "requests"}}, RateLimited),
        (401, {"error": {"message": "bad key", "type": "invalid_request_error"}}, AuthFailed),
        (402, {"error": {"message": "pay up", "type": "billing"}}, AuthFailed),
        (403, {"error": {"message": "forbidden", "type": "invalid_request_error"}}, AuthFailed),
        (408, {"error": {"message": "request timeout", "type": "timeout"}}, ModelTimeout),
        (
            400,
            {"error": {"message": "too long", "code": "context_length_exceeded"}},
            ContextTooLong,
        ),
        (
            400,
            {"error": {"message": "This model's maximum context length is 4096 tokens."}},
            ContextTooLong,
        ),
        (
            400,
            {"error": {"message": "the request exceeds the available context size"}},
            ContextTooLong,
        ),
        (400, {"error": {"message": "filtered", "code": "content_filter"}}, ContentFiltered),
        (
            400,
            {"error": {"message": "blocked", "code": "content_policy_violation"}},
            ContentFiltered,
        ),
        (
            400,
            {"error": {"message": "bad 'messages'", "type": "invalid_request_error"}},
            BadRequest,
        ),
        (404, {"error": {"message": "no such model"}}, BadRequest),
        (409, {"error": {"message": "conflict"}}, BadRequest),
        (422, {"error": {"message": "unprocessable"}}, BadRequest),
        (500, {"error": {"message": "oops", "type": "server_error"}}, ProviderUnavailable),
        (502, {}, ProviderUnavailable),
        (503, {"error": {"message": "overloaded"}}, Overloaded),
        (504, {}, ProviderUnavailable),
        (529, {}, Overloaded),
    ],
)
def test_openai_status_errors(status, body, expected):
    error = map_sdk_error(openai_status(status, body), provider="openai", now=NOW)
    assert type(error) is expected
    assert error.detail["provider"] == "openai"
    assert error.detail["status_code"] == status
    assert str(error).startswith(f"openai: HTTP {status}")


@pytest.mark.parametrize(
    ("status", "type_", "message", "expected"),
    [
        (
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ContextTooLong,
        ),
        (
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
            ContextTooLong,
        ),
        (400, "invalid_request_error", "messages.0: roles must alternate", BadRequest),
        (401, "authentication_error", "invalid x-api-key", AuthFailed),
        (403, "permission_error", "no permission", AuthFailed),
        (404, "not_found_error", "model not found", BadRequest),
        (
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes",
            BadRequest,
        ),
        (429, "rate_limit_error", "rate limited", RateLimited),
        (500, "api_error", "internal", ProviderUnavailable),
        (500, "overloaded_error", "Overloaded", Overloaded),
        (503, "api_error", "unavailable", Overloaded),
        (529, "overloaded_error", "Overloaded", Overloaded),
    ],
)
def test_anthropic_status_errors(status, type_, message, expected):
    exc = anthropic_status(status, anthropic_body(type_, message))
    error = map_sdk_error(exc, provider="anthropic", now=NOW)
    assert type(error) is expected
    assert error.detail["provider_code"] == type_
    assert message in str(error)


@pytest.mark.parametrize(
    ("make", "status"), [(openai_status, 429), (anthropic_status, 429), (anthropic_status, 529)]
)
@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after-ms": "120"}, 0.12),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after": formatdate(NOW + 12, usegmt=True)}, 12.0),
        ({}, None),
    ],
)
def test_rate_limits_and_overloads_carry_retry_after(make, status, headers, wait):
    error = map_sdk_error(make(status, {}, headers), provider="p", now=NOW)
    assert isinstance(error, RateLimited | Overloaded)
    assert error.retryable
    assert error.detail.get("retry_after_s") == wait


def test_other_errors_ignore_retry_after():
    error = map_sdk_error(openai_status(500, {}, {"retry-after": "9"}), provider="p", now=NOW)
    assert "retry_after_s" not in error.detail


def test_request_id_is_kept():
    exc = openai_status(500, {}, {"x-request-id": "req_abc"})
    assert map_sdk_error(exc, provider="openai").detail["request_id"] == "req_abc"


def test_connection_errors_and_timeouts():
    for sdk in (openai, anthropic):
        timeout = map_sdk_error(sdk.APITimeoutError(request=request()), provider="p")
        assert type(timeout) is ModelTimeout
        refused = map_sdk_error(sdk.APIConnectionError(request=request()), provider="p")
        assert type(refused) is ProviderUnavailable


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (anthropic_body("overloaded_error", "Overloaded"), Overloaded),
        (anthropic_body("rate_limit_error", "slow"), RateLimited),
        (anthropic_body("api_error", "internal"), ProviderUnavailable),
        (anthropic_body("invalid_request_error", "prompt is too long: 9 > 8"), ContextTooLong),
        (anthropic_body("brand_new_error", "?"), StreamInterrupted),
        ("not json at all", StreamInterrupted),
    ],
)
def test_anthropic_error_events_inside_a_stream(body, expected):
    # the SDK raises a plain APIStatusError with the stream's own status, 200
    exc = anthropic_status(200, body if isinstance(body, dict) else None)
    exc.body = body
    error = map_sdk_error(exc, provider="anthropic")
    assert type(error) is expected
    assert "status_code" not in error.detail


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"message": "The server had an error", "type": "server_error"}, ProviderUnavailable),
        ({"message": "limit", "type": "tokens", "code": "rate_limit_exceeded"}, RateLimited),
        ({"message": "filtered", "code": "content_filter"}, ContentFiltered),
        ({"message": "An error occurred during streaming"}, StreamInterrupted),
    ],
)
def test_openai_error_events_inside_a_stream(body, expected):
    exc = openai.APIError(body["message"], request(), body=body)
    error = map_sdk_error(exc, provider="openai")
    assert type(error) is expected


@pytest.mark.parametrize(
    "exc",
    [
        httpx2.ReadError("reset"),
        httpx2.RemoteProtocolError("incomplete body"),
        httpx2.ReadTimeout("slow"),
        json.JSONDecodeError("Expecting value", "{bad", 1),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ],
)
def test_raw_faults_break_a_stream_or_make_an_answer_unreadable(exc):
    error = map_sdk_error(exc, provider="anthropic", stream=True)
    assert type(error) is StreamInterrupted
    assert error.detail["cause"] == type(exc).__name__
    assert stream_broke(exc, provider="anthropic").detail == error.detail
    unreadable = map_sdk_error(exc, provider="anthropic")
    assert type(unreadable) is ProviderUnavailable
    assert unreadable.detail["cause"] == type(exc).__name__


def test_model_errors_pass_through_and_unknown_ones_are_model_errors():
    own = RateLimited("already typed", retry_after_s=1.0)
    assert map_sdk_error(own, provider="p") is own
    other = map_sdk_error(openai.OpenAIError("odd"), provider="p")
    assert type(other) is ModelError
    assert "odd" in str(other)


def test_mapped_errors_survive_pickling():
    error = map_sdk_error(openai_status(429, {}, {"retry-after": "2"}), provider="p", now=NOW)
    clone = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert type(clone) is RateLimited
    assert clone.detail == error.detail


# --- secrets -----------------------------------------------------------------------------


def test_secrets_are_masked_in_messages_and_details():
    body = {
        "error": {"message": f"Incorrect API key provided: {HIDDEN}", "code": "invalid_api_key"}
    }
    exc = openai_status(401, body, {"x-request-id": f"req-{HIDDEN}"})
    error = map_sdk_error(exc, provider="openai", secrets=[HIDDEN])
    assert HIDDEN not in str(error)
    assert HIDDEN not in repr(error.detail)
    clone = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert HIDDEN not in repr(clone.detail)
    connection = openai.APIConnectionError(message=f"failed with {HIDDEN}", request=request())
    assert HIDDEN not in str(map_sdk_error(connection, provider="p", secrets=[HIDDEN]))


def test_redact_masks_key_shaped_strings_even_when_not_named():
    text = "keys sk-proj-abcdefghijklmnop and sk-ant-api03-XYZxyz123456 Bearer abc.def-123456789"
    masked = redact(text)
    assert "abcdefghijklmnop" not in masked
    assert "XYZxyz123456" not in masked
    assert "abc.def-123456789" not in masked
    assert redact("nothing to hide", ["", HIDDEN]) == "nothing to hide"


def test_safe_cause_drops_a_cause_that_would_leak():
    leaky = ValueError(f"key={HIDDEN}")
    assert safe_cause(leaky, [HIDDEN]) is None
    clean = ValueError("no key here")
    assert safe_cause(clean, [HIDDEN]) is clean


# --- resolve_api_key ---------------------------------------------------------------------


def test_resolve_api_key(monkeypatch):
    monkeypatch.setenv("SOME_KEY", f"  {HIDDEN}  ")
    assert resolve_api_key("SOME_KEY", provider="openai", model="m", required=True) == HIDDEN
    assert resolve_api_key(None, provider="openai_compatible", model="m", required=False) is None
    monkeypatch.setenv("EMPTY_KEY", "")
    for env in ("EMPTY_KEY", "UNSET_KEY_XYZ"):
        monkeypatch.delenv("UNSET_KEY_XYZ", raising=False)
        with pytest.raises(ConfigError, match=env) as caught:
            resolve_api_key(env, provider="openai", model="m", required=False)
        assert caught.value.detail == {"env": env, "provider": "openai"}
    with pytest.raises(ConfigError, match="needs api_key_env"):
        resolve_api_key(None, provider="anthropic", model="m", required=True)
