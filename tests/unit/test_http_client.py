"""The client SDK's plain parts: problems read back as errors, SSE messages, what it refuses.

The problems are rendered by the server's own code (``deployments.problems``), so each error
is shown to survive the trip server -> JSON -> client. The redirect and the broken stream
are served by a real HTTP server on 127.0.0.1 (the whole client against the real application
is tests/integration/test_http_client_against_serve.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from httpx_sse import ServerSentEvent

import raytroupe
from raytroupe.deployments.problems import problem, troupe_problem
from raytroupe.protocols import (
    BadResponse,
    InvalidInput,
    InvalidRequest,
    JobEvent,
    RateLimited,
    StateUnavailable,
    TroupeError,
    Unauthorized,
    Unreachable,
)
from raytroupe.protocols.errors import error_class
from raytroupe.protocols.http import JobView
from raytroupe.runtime.http_calls import (
    base_url,
    checked_key,
    error_of,
    segment,
)
from raytroupe.runtime.http_follow import RECONNECTS, Follow
from raytroupe.runtime.operations import job_reads

KEY = "rt-unit-key"


def _response(rendered, method="GET", path="/v1/jobs/j1"):
    """The httpx response a client would get for the server's response ``rendered``."""
    request = httpx.Request(method, f"http://127.0.0.1:8000{path}")
    headers = {k.decode(): v.decode() for k, v in rendered.raw_headers}
    return httpx.Response(rendered.status_code, headers=headers, content=rendered.body,
                          request=request)  # fmt: skip


def _classes(cls=TroupeError):
    yield cls
    for sub in cls.__subclasses__():
        yield from _classes(sub)


def _raised_on_the_server(cls):
    # JobFailed and its kin carry a result on the server: its problem leaves it out
    return cls("it went wrong", field="team.agents", problems=["agents: empty"])


@pytest.mark.parametrize("cls", sorted(set(_classes()), key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)  # fmt: skip
def test_every_error_of_the_tree_comes_back_as_its_own_class(cls):
    rendered = troupe_problem(_raised_on_the_server(cls), "req-1")

    error = error_of(_response(rendered))

    assert type(error) is (cls if error_class(cls.code) is cls else error_class(cls.code))
    assert error.message == "it went wrong"
    assert error.detail["status"] == rendered.status_code
    assert error.detail["code"] == cls.code.value
    assert error.detail["request_id"] == "req-1"
    assert error.detail["field"] == "team.agents"
    assert error.detail["problems"] == ["agents: empty"]


@pytest.mark.parametrize(
    ("status", "code", "extra", "expected"),
    [
        (401, "unauthorized", {}, Unauthorized),
        (422, "invalid_request", {"problems": ["body.task: required"]}, InvalidRequest),
        (413, "body_too_large", {}, InvalidInput),
        (400, "invalid_request_id", {}, InvalidInput),
        (404, "not_found", {}, InvalidInput),
        (429, "rate_limited", {"retry_after_s": 7}, RateLimited),
        (500, "internal", {}, TroupeError),
        (400, "unsupported_parameter", {"field": "tools"}, InvalidInput),
    ],
)
def test_the_gates_own_problems_come_back_typed(status, code, extra, expected):
    rendered = problem(status, "Title", "what happened", code=code, request_id="r", **extra)

    error = error_of(_response(rendered))

    assert type(error) is expected
    assert (error.message, error.detail["status"], error.detail["code"]) == (
        "what happened", status, code
    )  # fmt: skip
    for name, value in extra.items():
        assert error.detail[name] == value


def test_an_error_answer_that_is_not_a_problem_is_a_bad_response():
    request = httpx.Request("GET", "http://127.0.0.1:8000/v1/jobs")
    html = httpx.Response(502, content=b"<html>Bad Gateway</html>", request=request)

    error = error_of(html)

    assert type(error) is BadResponse
    assert error.detail["status"] == 502
    assert "<html>" not in error.message


def test_answers_that_are_not_the_routes_model_are_bad_responses():
    request = httpx.Request("GET", "http://127.0.0.1:8000/v1/jobs/j1")
    call = job_reads.job.call("j1")
    not_json = httpx.Response(200, content=b"\x00\xff not json", request=request)
    wrong = httpx.Response(200, json={"id": "j1", "status": "exploded"}, request=request)
    moved = httpx.Response(307, headers={"location": "http://evil.test/"}, request=request)
    good = httpx.Response(200, json={"id": "j1", "status": "running"}, request=request)

    for response in (not_json, wrong, moved):
        with pytest.raises(BadResponse):
            call.answer(response)
    assert call.answer(good) == JobView(id="j1", status="running")


def test_an_sse_message_is_a_job_event_and_an_in_band_error_is_raised_typed():
    event = JobEvent(job_id="j1", seq=3, at=1.0, type="job_succeeded")
    message = ServerSentEvent(event="job_succeeded", data=event.model_dump_json(), id="3")
    failed = json.dumps({"code": "state_unavailable", "detail": "the store is down"})

    place = Follow(job_reads.events, job_reads.events.bind("j1"), None)

    assert place.item_of(message) == event
    assert place.item_of(ServerSentEvent(data="")) is None
    with pytest.raises(StateUnavailable, match="the store is down"):
        place.item_of(ServerSentEvent(event="error", data=failed))
    with pytest.raises(BadResponse):
        place.item_of(ServerSentEvent(event="error", data="{not json"))
    with pytest.raises(BadResponse, match="not a JobEvent"):
        place.item_of(ServerSentEvent(event="plan_ready", data='{"job_id": "j1"}'))


@pytest.mark.parametrize(
    "url",
    [
        "",
        "127.0.0.1:8000",
        "localhost:8000",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "http://",
        "http://127.0.0.1:8000/?key=x",
        "http://127.0.0.1:8000/#top",
    ],
)
def test_a_url_without_an_http_scheme_and_host_or_with_a_query_is_refused(url):
    with pytest.raises(InvalidInput) as refused:
        raytroupe.Client(url, KEY)

    assert refused.value.detail["field"] == "url"


def test_credentials_in_the_url_are_refused_without_being_repeated():
    with pytest.raises(InvalidInput) as refused:
        raytroupe.Client("http://admin:hunter2@127.0.0.1:8000", KEY)

    assert "hunter2" not in str(refused.value)
    assert "key=" in str(refused.value)


@pytest.mark.parametrize("key", ["", "two words", "rt-key\r\nX-Admin: yes", "é" * 3, "k" * 4097])
def test_a_key_no_header_can_carry_is_refused_without_being_repeated(key):
    with pytest.raises(InvalidInput) as refused:
        checked_key(key)

    assert key.strip() == "" or key not in str(refused.value)


def test_a_base_url_keeps_its_prefix_and_path_segments_cannot_climb_out():
    url = base_url("https://api.example.test/troupe/")
    with httpx.Client(base_url=url) as client:
        request = job_reads.job.call("../teams/x").request(client)

    assert str(url) == "https://api.example.test/troupe"
    assert request.url.raw_path == b"/troupe/v1/jobs/..%2Fteams%2Fx"
    assert segment("a b", "job_id") == "a%20b"
    for bad in ("", ".", ".."):
        with pytest.raises(InvalidInput):
            segment(bad, "job_id")


def test_an_unreachable_server_is_a_typed_error():
    with _server({}) as server:
        pass  # the port is closed again: nothing listens there
    with (
        raytroupe.Client(server.url, KEY, timeout=5) as client,
        pytest.raises(Unreachable) as caught,
    ):
        client.me()

    assert caught.value.retryable
    assert caught.value.detail["url"] == f"{server.url}/v1/me"


def test_timeouts_must_be_positive():
    for timeout in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InvalidInput):
            raytroupe.Client("http://127.0.0.1:8000", KEY, timeout=timeout)


# --- against a real loopback server --------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """Answers from the server's script: path -> (status, headers, body or list of bodies)."""

    def do_GET(self):
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        script = self.server.script
        route = self.path.split("?")[0]
        if route not in script:
            self.send_error(404)
            return
        status, headers, body = script[route]
        if isinstance(body, list):  # one body per call, in turn
            body = body.pop(0)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@dataclass
class Loopback:
    """A scripted server on 127.0.0.1: its URL, and each request's path and Authorization."""

    url: str
    seen: list[tuple[str, str | None]]


@contextmanager
def _server(script) -> Iterator[Loopback]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.script = script
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Loopback(f"http://127.0.0.1:{server.server_address[1]}", server.seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _sse(*events: JobEvent) -> bytes:
    return b"".join(
        f"id: {e.seq}\nevent: {e.type}\ndata: {e.model_dump_json()}\n\n".encode() for e in events
    )


ME = b'{"name": "n", "tenant": "t", "admin": true}'
STREAM = {"Content-Type": "text/event-stream"}


def test_a_redirect_to_another_origin_is_not_followed_and_gets_no_key():
    with _server({"/v1/me": (200, {"Content-Type": "application/json"}, ME)}) as other:
        moved = {"/v1/me": (307, {"Location": f"{other.url}/v1/me"}, b"")}
        with (
            _server(moved) as first,
            raytroupe.Client(first.url, KEY) as client,
            pytest.raises(BadResponse, match="redirected"),
        ):
            client.me()

    assert first.seen == [("/v1/me", f"Bearer {KEY}")]
    assert other.seen == []


def test_an_event_stream_that_breaks_is_picked_up_after_its_last_event():
    events = [
        JobEvent(job_id="j1", seq=1, at=1.0, type="job_submitted"),
        JobEvent(job_id="j1", seq=2, at=2.0, type="plan_ready"),
        JobEvent(job_id="j1", seq=3, at=3.0, type="job_succeeded"),
    ]
    script = {"/v1/jobs/j1/events": (200, STREAM, [_sse(*events[:2]), _sse(events[2])])}
    with _server(script) as server, raytroupe.Client(server.url, KEY) as client:
        got = list(client.events("j1"))

    assert got == events
    assert [path for path, _ in server.seen] == [
        "/v1/jobs/j1/events?after=0&follow=true",
        "/v1/jobs/j1/events?after=2&follow=true",
    ]


def test_a_stream_that_keeps_ending_before_the_last_event_is_given_up_on():
    script = {"/v1/jobs/j1/events": (200, STREAM, [b""] * 10)}
    with (
        _server(script) as server,
        raytroupe.Client(server.url, KEY) as client,
        pytest.raises(Unreachable, match="kept ending"),
    ):
        list(client.events("j1"))

    assert len(server.seen) == RECONNECTS + 1


def test_a_stream_that_is_not_an_event_stream_is_a_bad_response():
    script = {"/v1/jobs/j1/events": (200, {"Content-Type": "text/html"}, b"<html></html>")}
    with (
        _server(script) as server,
        raytroupe.Client(server.url, KEY) as client,
        pytest.raises(BadResponse, match="not an event stream"),
    ):
        list(client.events("j1"))
    assert len(server.seen) == 1
