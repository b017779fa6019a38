"""The HTTP guard as plain ASGI: keys, open paths, request ids, body size and rate limits."""

import json

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect
from wiring import run

from raytroupe.deployments.config import APIConfig, APIKey
from raytroupe.deployments.guard import Guard, principal_of, request_id_of
from raytroupe.deployments.keys import hash_key

ALICE = "rt-alice-key"
BOB = "rt-bob-key"
ADMIN = "rt-admin-key"
PROBLEM = "application/problem+json"


class Echo(BaseModel):
    text: str


class Recorder:
    """ASGI layer between the guard and the app: counts calls, keeps what the app sent."""

    def __init__(self, app):
        self.app = app
        self.calls = 0
        self.sent = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.calls += 1

        async def record(message):
            self.sent.append(message)
            await send(message)

        await self.app(scope, receive, record)


def _app():
    app = FastAPI()

    @app.get("/healthz")
    async def healthz():
        return {"ok": True}

    @app.get("/whoami")
    async def whoami(request: Request):
        who = principal_of(request.scope)
        return {
            "name": who.name,
            "tenant": who.tenant,
            "admin": who.admin,
            "request_id": request_id_of(request.scope),
        }

    @app.post("/echo")
    async def echo(body: Echo):
        return {"text": body.text}

    @app.post("/upload")
    async def upload(request: Request):
        try:
            chunks = [chunk async for chunk in request.stream()]
        except ClientDisconnect:
            return JSONResponse({"app": "saw a disconnect"})
        return JSONResponse({"bytes": len(b"".join(chunks)), "body": b"".join(chunks).decode()})

    return app


def _keys(**rates):
    return [
        APIKey(name="alice", hash=hash_key(ALICE), tenant="acme", rate_limit=rates.get("alice")),
        APIKey(name="bob", hash=hash_key(BOB), tenant="globex", rate_limit=rates.get("bob")),
        APIKey(name="root", hash=hash_key(ADMIN), tenant="ops", admin=True),
    ]


def _guard(*, rates=None, **config):
    recorder = Recorder(_app())
    return Guard(recorder, APIConfig(**config), _keys(**(rates or {}))), recorder


def _exchange(app, script, *, root_path=""):
    """``script(client)`` run against ``app`` in one event loop (where the limiter's state is)."""

    async def main():
        transport = httpx.ASGITransport(app=app, root_path=root_path)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await script(client)

    return run(main())


def _get(app, path, headers=None, **kwargs):
    return _exchange(app, lambda client: client.get(path, headers=headers), **kwargs)


def _post(app, path, headers=None, **content):
    return _exchange(app, lambda client: client.post(path, headers=headers, **content))


def _bearer(key):
    return {"Authorization": f"Bearer {key}"}


def _assert_problem(response, status, code):
    assert response.status_code == status
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["error"]["code"] == code
    assert body["request_id"] == response.headers["x-request-id"]
    return body


# keys


def test_a_request_without_a_key_gets_401_with_a_challenge():
    guard, app = _guard()
    response = _get(guard, "/whoami")
    body = _assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == 'Bearer realm="raytroupe"'
    assert body["type"].endswith("/unauthorized")
    assert app.calls == 0


def test_a_wrong_key_gets_401():
    guard, app = _guard()
    response = _get(guard, "/whoami", _bearer("rt-not-a-key"))
    _assert_problem(response, 401, "unauthorized")
    assert _get(guard, "/whoami", {"X-API-Key": "rt-not-a-key"}).status_code == 401
    assert app.calls == 0


@pytest.mark.parametrize(
    "headers",
    [_bearer(ALICE), {"Authorization": f"bearer {ALICE}"}, {"X-API-Key": ALICE}],
    ids=["bearer", "bearer-lowercase", "x-api-key"],
)
def test_a_key_is_accepted_as_bearer_token_or_x_api_key(headers):
    guard, _ = _guard()
    response = _get(guard, "/whoami", headers)
    assert response.status_code == 200
    assert response.json()["tenant"] == "acme"
    assert response.json()["name"] == "alice"
    assert response.json()["admin"] is False


def test_the_principal_says_whether_the_key_is_an_admin():
    guard, _ = _guard()
    who = _get(guard, "/whoami", _bearer(ADMIN)).json()
    assert (who["tenant"], who["admin"]) == ("ops", True)


def test_the_basic_scheme_is_refused_even_with_a_valid_key():
    guard, app = _guard()
    response = _get(guard, "/whoami", {"Authorization": f"Basic {ALICE}"})
    _assert_problem(response, 401, "unauthorized")
    assert app.calls == 0


@pytest.mark.parametrize("path", ["/healthz", "/openapi.json"])
def test_open_paths_need_no_key(path):
    guard, _ = _guard()
    assert _get(guard, path).status_code == 200


def test_open_paths_need_no_key_under_a_route_prefix():
    guard, _ = _guard()
    response = _get(guard, "/prefix/healthz", root_path="/prefix")
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    # the prefix is stripped to find the route, not to open every path under it
    _assert_problem(_get(guard, "/prefix/whoami", root_path="/prefix"), 401, "unauthorized")
    assert _get(guard, "/prefix/whoami", _bearer(ALICE), root_path="/prefix").status_code == 200


def test_open_paths_are_not_rate_limited():
    guard, _ = _guard(rate_limit="1/minute")

    async def script(client):
        return [(await client.get("/healthz")).status_code for _ in range(3)]

    assert _exchange(guard, script) == [200, 200, 200]


# anonymous tenant


def test_the_anonymous_tenant_serves_requests_without_a_key_never_as_admin():
    guard, _ = _guard(anonymous_tenant="local")
    who = _get(guard, "/whoami").json()
    assert who["tenant"] == "local"
    assert who["admin"] is False
    assert who["name"].startswith("anonymous@")


def test_the_anonymous_tenant_still_refuses_a_wrong_key():
    guard, app = _guard(anonymous_tenant="local")
    _assert_problem(_get(guard, "/whoami", _bearer("rt-wrong")), 401, "unauthorized")
    _assert_problem(_get(guard, "/whoami", {"X-API-Key": "rt-wrong"}), 401, "unauthorized")
    assert app.calls == 0


def test_the_anonymous_tenant_leaves_valid_keys_their_own_tenant():
    guard, _ = _guard(anonymous_tenant="local")
    who = _get(guard, "/whoami", _bearer(ADMIN)).json()
    assert (who["tenant"], who["admin"]) == ("ops", True)


# request ids


def test_a_valid_request_id_is_kept():
    guard, _ = _guard()
    offered = "client-42.retry:1_a"
    who = _get(guard, "/whoami", {**_bearer(ALICE), "X-Request-ID": offered}).json()
    assert who["request_id"] == offered


def test_a_valid_request_id_is_kept_in_problems():
    guard, _ = _guard()
    response = _get(guard, "/whoami", {"X-Request-ID": "abc-123"})
    assert response.status_code == 401
    assert response.json()["request_id"] == "abc-123"


@pytest.mark.parametrize("offered", ["has spaces", "x" * 129, "semi;colon", "slash/inside"])
def test_an_unusable_request_id_is_refused(offered):
    guard, app = _guard()
    headers = {**_bearer(ALICE), "X-Request-ID": offered}
    response = _get(guard, "/whoami", headers)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request_id"
    assert "request_id" not in response.json()
    assert app.calls == 0


def test_a_response_carries_a_new_request_id_when_the_client_sent_none():
    guard, _ = _guard()

    async def script(client):
        return [await client.get("/whoami", headers=_bearer(ALICE)) for _ in range(2)]

    first, second = _exchange(guard, script)
    assert first.headers["x-request-id"] == first.json()["request_id"]
    assert second.headers["x-request-id"] == second.json()["request_id"]
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


class ServeRequestIds:
    """What Ray Serve's proxy does with request ids (``RequestIdMiddleware`` in
    ray/serve/_private/http_util.py): keep the client's ``x-request-id`` as it is, or add a
    new one to the request; append it to the response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        headers = MutableHeaders(scope=scope)
        request_id = headers.get("x-request-id")
        if request_id is None:
            request_id = "serve-generated-id"
            headers.append("x-request-id", request_id)

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("X-Request-ID", request_id)
            await send(message)

        await self.app(scope, receive, send_with_id)


def test_behind_serve_the_response_header_and_the_problem_name_the_same_request_id():
    # Serve's proxy echoes the client's id: the header and the body must agree
    guard, _ = _guard()
    for offered in (None, "abc-123", "has spaces"):
        headers = {} if offered is None else {"X-Request-ID": offered}
        response = _get(ServeRequestIds(guard), "/whoami", headers)
        ids = response.headers.get_list("x-request-id")
        if offered == "has spaces":  # refused: no id in the body to disagree with the header
            assert response.status_code == 400
            assert "request_id" not in response.json()
            continue
        assert response.status_code == 401
        assert ids == [response.json()["request_id"]], offered


# body size


def test_a_declared_body_over_the_limit_gets_413_without_calling_the_app():
    guard, app = _guard(max_body_bytes=16)
    response = _post(guard, "/upload", _bearer(ALICE), content=b"x" * 17)
    body = _assert_problem(response, 413, "body_too_large")
    assert "16 bytes" in body["detail"]
    assert app.calls == 0


def test_a_declared_body_over_the_limit_is_refused_before_the_key_is_checked():
    guard, app = _guard(max_body_bytes=16)
    _assert_problem(_post(guard, "/upload", content=b"x" * 17), 413, "body_too_large")
    assert app.calls == 0


async def _chunks(*parts):
    for part in parts:
        yield part


def test_a_streamed_body_over_the_limit_gets_413_and_the_apps_answer_is_dropped():
    guard, app = _guard(max_body_bytes=16)
    response = _post(guard, "/upload", _bearer(ALICE), content=_chunks(b"x" * 10, b"y" * 10))
    assert "content-length" not in response.request.headers
    _assert_problem(response, 413, "body_too_large")
    assert app.calls == 1
    # the app read a disconnect and answered; the client never saw that answer
    starts = [m for m in app.sent if m["type"] == "http.response.start"]
    assert [m["status"] for m in starts] == [200]
    sent_bodies = b"".join(m.get("body", b"") for m in app.sent)
    assert json.loads(sent_bodies) == {"app": "saw a disconnect"}


def test_a_streamed_json_body_over_the_limit_gets_413_from_a_typed_route():
    guard, app = _guard(max_body_bytes=16)
    chunks = _chunks(b'{"text": "', b"z" * 20, b'"}')
    headers = {**_bearer(ALICE), "Content-Type": "application/json"}
    response = _post(guard, "/echo", headers, content=chunks)
    _assert_problem(response, 413, "body_too_large")
    assert app.calls == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["declared", "streamed"])
def test_a_body_up_to_the_limit_passes_intact(streamed):
    guard, _ = _guard(max_body_bytes=16)
    payload = b"0123456789abcdef"
    content = _chunks(payload[:5], payload[5:]) if streamed else payload
    response = _post(guard, "/upload", _bearer(ALICE), content=content)
    assert response.status_code == 200
    assert response.json() == {"bytes": 16, "body": payload.decode()}


def test_a_json_body_under_the_limit_reaches_a_typed_route():
    guard, _ = _guard(max_body_bytes=64)
    response = _post(guard, "/echo", _bearer(ALICE), json={"text": "héllo"})
    assert response.status_code == 200
    assert response.json() == {"text": "héllo"}


def test_a_content_length_that_is_not_a_number_gets_413():
    guard, app = _guard()

    async def script(client):
        request = client.build_request("POST", "/upload", headers=_bearer(ALICE), content=b"x")
        request.headers["Content-Length"] = "lots"
        return await client.send(request)

    _assert_problem(_exchange(guard, script), 413, "body_too_large")
    assert app.calls == 0


# rate limits


def _statuses(guard, headers, n):
    async def script(client):
        return [await client.get("/whoami", headers=headers) for _ in range(n)]

    return _exchange(guard, script)


def test_a_key_over_its_rate_gets_429_with_retry_after():
    guard, _ = _guard(rates={"alice": "2/minute"})

    async def script(client):
        alice = [await client.get("/whoami", headers=_bearer(ALICE)) for _ in range(3)]
        bob = [await client.get("/whoami", headers=_bearer(BOB)) for _ in range(3)]
        return alice, bob

    alice, bob = _exchange(guard, script)
    assert [r.status_code for r in alice] == [200, 200, 429]
    body = _assert_problem(alice[2], 429, "rate_limited")
    retry_after = alice[2].headers["retry-after"]
    assert retry_after.isdigit()
    assert 1 <= int(retry_after) <= 60
    assert body["retry_after_s"] == int(retry_after)
    assert "alice" in body["detail"]
    assert [r.status_code for r in bob] == [200, 200, 200]


def test_a_keys_own_rate_overrides_the_apps_default():
    guard, _ = _guard(rate_limit="1/minute", rates={"alice": "5/minute"})

    async def script(client):
        alice = [await client.get("/whoami", headers=_bearer(ALICE)) for _ in range(5)]
        bob = [await client.get("/whoami", headers=_bearer(BOB)) for _ in range(2)]
        return alice, bob

    alice, bob = _exchange(guard, script)
    assert [r.status_code for r in alice] == [200] * 5
    assert [r.status_code for r in bob] == [200, 429]


def test_anonymous_callers_are_rate_limited_by_the_apps_default():
    guard, _ = _guard(anonymous_tenant="local", rate_limit="2/minute")

    async def script(client):
        return [(await client.get("/whoami")).status_code for _ in range(3)]

    assert _exchange(guard, script) == [200, 200, 429]
