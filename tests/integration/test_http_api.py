"""The HTTP API on a real Ray Serve on 127.0.0.1: jobs, events, cancel, approvals, security."""

from __future__ import annotations

import base64
import json
import time

import httpx
import pytest
import ray

from raytroupe import runtime
from tests.support.http_api import (
    ADMIN_KEY,
    LIMITED_KEY,
    MAX_BODY,
    OTHER_KEY,
    USER_KEY,
    wire_team,
)
from tests.support.wire_server import Default, Reply, WireServer

PROBLEM = "application/problem+json"


def _team(name, *, latency_s=0.0, agents=2, instructions="Answer briefly."):
    models = {f"{name}-m": runtime.OfflineModel(latency_s=latency_s)} if latency_s else {}
    model = f"{name}-m" if latency_s else "default"
    return runtime.Team(
        name=name,
        agents=[runtime.AgentSpec(name=f"{name}-a{n}", role="worker", model=model,
                                  instructions=instructions) for n in range(agents)],
        models=models,
    ).spec().model_dump(mode="json")  # fmt: skip


def _registered(api, team):
    """Register ``team`` as the operator (an admin key) and return its name: a tenant's key
    runs it by name (its own inline teams may not define models)."""
    with api.client(ADMIN_KEY) as admin:
        response = admin.put(f"/v1/teams/{team['name']}", json=team)
        assert response.status_code in (200, 201), response.text
    return team["name"]


def _events(client, job_id, **headers):
    """Every SSE event of a job as (id, type, data), until the stream ends."""
    found, current = [], {}
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line:
                if "event" in current:
                    found.append(
                        (int(current["id"]), current["event"], json.loads(current["data"]))
                    )
                current = {}
            elif not line.startswith(":"):
                field, _, value = line.partition(": ")
                current[field] = value
    return found


def _submit(client, task, team, **extra):
    response = client.post("/v1/jobs", json={"task": task, "team": team, **extra})
    assert response.status_code == 202, response.text
    return response.json()["id"]


def _wait_for(client, job_id, event_type):
    """Read the job's stream until an event of ``event_type`` (then drop the connection)."""
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as response:
        for line in response.iter_lines():
            if line == f"event: {event_type}":
                return
    pytest.fail(f"job {job_id} ended without {event_type}")


def _is_problem(response, status, code):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text
    return body


def test_a_job_is_submitted_followed_live_over_sse_and_read_back(api, rt):
    with api.client(**{"X-Request-ID": "req-http-1"}) as client:
        response = client.post(
            "/v1/jobs",
            json={"task": "Tasks:\n- Summarize Ray actors\n- Summarize Ray tasks\n"
                          "- Summarize Ray Serve",
                  "team": _team("http-basic")},
        )  # fmt: skip
        assert response.status_code == 202
        assert response.headers["x-request-id"] == "req-http-1"
        job_id = response.json()["id"]
        assert response.headers["location"] == f"/v1/jobs/{job_id}"

        events = _events(client, job_id)
        job = client.get(f"/v1/jobs/{job_id}").json()

    seqs = [seq for seq, _, _ in events]
    assert seqs == list(range(1, len(events) + 1))
    types = [kind for _, kind, _ in events]
    assert types[0] == "job_submitted"
    assert types[-1] == "job_succeeded"
    assert types.count("subtask_finished") == 3
    assert events[0][2]["data"]["request_id"] == "req-http-1"
    assert job["status"] == "succeeded"
    assert len(job["result"]["subtasks"]) == 3
    root = job["result"]["trace"][0]
    assert root["attributes"]["request_id"] == "req-http-1"
    # the driver API reaches the same orchestrator and sees the same job
    assert rt.job(job_id).result(timeout=5).answer == job["result"]["answer"]
    assert rt.jobs()[job_id] == "succeeded"


def test_an_event_stream_resumes_after_last_event_id_without_gaps_or_repeats(api):
    with api.client() as client:
        job_id = _submit(client, "Check: 1) alpha 2) beta 3) gamma 4) delta",
                         _registered(api, _team("http-resume", latency_s=0.3)))  # fmt: skip
        first = []
        with client.stream("GET", f"/v1/jobs/{job_id}/events") as response:
            for line in response.iter_lines():
                if line.startswith("id: "):
                    first.append(int(line[4:]))
                if len(first) == 2:
                    break  # the client drops the connection mid-job
        rest = _events(client, job_id, **{"Last-Event-ID": str(first[-1])})
        by_query = client.get(f"/v1/jobs/{job_id}/events", params={"after": 1})

    resumed = [seq for seq, _, _ in rest]
    assert first == [1, 2]
    assert resumed == list(range(3, 3 + len(resumed)))
    assert rest[-1][1] == "job_succeeded"
    assert "id: 1\n" not in by_query.text
    assert "id: 2\n" in by_query.text


def test_a_running_job_is_cancelled_over_http(api):
    with api.client() as client:
        team = _registered(api, _team("http-cancel", latency_s=20))
        job_id = _submit(client, "Slowly: 1) one 2) two", team)
        _wait_for(client, job_id, "subtask_started")
        started = time.monotonic()
        cancelled = client.post(f"/v1/jobs/{job_id}/cancel")
        took = time.monotonic() - started
        job = client.get(f"/v1/jobs/{job_id}").json()
        again = client.post(f"/v1/jobs/{job_id}/cancel")

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"id": job_id, "cancelled": True, "status": "cancelled"}
    assert took < 15  # not the 20 s the model would have taken
    assert job["status"] == "cancelled"
    assert job["result"]["status"] == "cancelled"
    _is_problem(again, 409, "conflict")


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


def _wire_team(server, name, tools=()):
    return wire_team(server, name, tools).spec().model_dump(mode="json")


def test_a_tool_call_waits_for_approval_given_over_http(api, wire):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "deploy v2"}), Default())
    with api.client() as client:
        team = _registered(api, _wire_team(wire, "http-approve", ["echo"]))
        job_id = _submit(client, "Echo the deploy call.", team)
        _wait_for(client, job_id, "approval_requested")
        (pending,) = client.get(f"/v1/jobs/{job_id}/approvals").json()
        assert (pending["tool"], pending["arguments"]) == ("echo", {"text": "deploy v2"})
        assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "awaiting_approval"

        url = f"/v1/jobs/{job_id}/approvals/{pending['approval_id']}"
        decided = client.post(url, json={"approved": True, "reason": "reviewed"})
        events = _events(client, job_id)
        twice = client.post(url, json={"approved": True})
        bad = client.post(url, json={"approved": "perhaps"})

    assert decided.status_code == 200
    assert decided.json()["approved"] is True
    assert events[-1][1] == "job_succeeded"
    assert wire.requests[1].body["messages"][-1]["content"] == "deploy v2"
    _is_problem(twice, 404, "job_not_found")
    _is_problem(bad, 422, "invalid_request")


def test_images_and_text_files_reach_the_agents(api, wire):
    wire.reset()
    wire.script(Default())
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()
    notes = base64.b64encode(b"The launch code word is HELIOTROPE.").decode()
    with api.client() as client:
        job_id = _submit(
            client,
            "Describe the picture and quote the notes.",
            _registered(api, _wire_team(wire, "http-vision")),
            attachments=[
                {"name": "chart.png", "media_type": "image/png", "data_b64": png},
                {"name": "notes.txt", "media_type": "text/plain", "data_b64": notes},
            ],
        )
        events = _events(client, job_id)
        job = client.get(f"/v1/jobs/{job_id}").json()

    assert events[-1][1] == "job_succeeded"
    # the job's task is what the caller wrote; the file is in its context, which agents read
    assert job["result"]["task"] == "Describe the picture and quote the notes."
    # the task's message (memories recalled for the tenant may come before it, as system text)
    opening = next(m for m in wire.requests[0].body["messages"] if m["role"] == "user")
    parts = {part["type"]: part for part in opening["content"]}
    assert parts["image_url"]["image_url"]["url"] == f"data:image/png;base64,{png}"
    assert "HELIOTROPE" in parts["text"]["text"]


def test_requests_without_a_valid_key_get_nothing(api):
    team = _team("http-auth")
    with api.client(key=None) as anonymous:
        missing = anonymous.post("/v1/jobs", json={"task": "x", "team": team})
        wrong = anonymous.get("/v1/jobs", headers={"Authorization": "Bearer rt-not-a-key"})
        other_scheme = anonymous.get("/v1/jobs", headers={"Authorization": f"Basic {USER_KEY}"})
        header_key = anonymous.get("/v1/jobs", headers={"X-API-Key": USER_KEY})
        health = anonymous.get("/healthz")
        openapi = anonymous.get("/openapi.json")

    body = _is_problem(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "key" in body["detail"]
    _is_problem(wrong, 401, "unauthorized")
    _is_problem(other_scheme, 401, "unauthorized")
    assert header_key.status_code == 200
    assert health.status_code == 200
    assert {"/v1/jobs", "/v1/chat/completions", "/v1/teams"} <= set(openapi.json()["paths"])


def test_only_admin_keys_manage_teams_and_agents(api):
    team = _team("http-forbidden")
    with api.client(USER_KEY) as user:
        create = user.post("/v1/teams", json=team)
        delete = user.delete("/v1/teams/anything")
        agent = user.post("/v1/agents", json={"team": "x", "agent": team["agents"][0]})
        listing = user.get("/v1/teams")

    body = _is_problem(create, 403, "forbidden")
    assert "acme-user" in body["detail"]
    _is_problem(delete, 403, "forbidden")
    _is_problem(agent, 403, "forbidden")
    assert listing.status_code == 200


def test_a_tenant_never_sees_another_tenants_jobs_or_usage(api):
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        job_id = _submit(acme, "Note: 1) private detail", _team("http-tenant"))
        _events(acme, job_id)
        responses = {
            "get": globex.get(f"/v1/jobs/{job_id}"),
            "events": globex.get(f"/v1/jobs/{job_id}/events"),
            "cancel": globex.post(f"/v1/jobs/{job_id}/cancel"),
            "approvals": globex.get(f"/v1/jobs/{job_id}/approvals"),
            "usage": globex.get("/v1/usage", params={"job_id": job_id}),
        }
        theirs = globex.get("/v1/jobs").json()
        their_usage = globex.get("/v1/usage").json()
        mine = acme.get("/v1/usage", params={"job_id": job_id}).json()

    for response in responses.values():
        _is_problem(response, 404, "job_not_found")
    assert job_id not in theirs
    assert all(row["job_id"] != job_id for row in their_usage)
    assert mine
    assert {row["job_id"] for row in mine} == {job_id}


def test_a_key_over_its_rate_is_told_when_to_come_back(api):
    with api.client(LIMITED_KEY) as client:
        answers = [client.get("/v1/jobs") for _ in range(4)]

    assert [r.status_code for r in answers[:3]] == [200, 200, 200]
    body = _is_problem(answers[3], 429, "rate_limited")
    retry_after = int(answers[3].headers["retry-after"])
    assert 1 <= retry_after <= 60
    assert body["retry_after_s"] == retry_after


def test_bad_bodies_get_problem_details_and_start_nothing(api, rt):
    before = set(rt.jobs())
    team = _team("http-bad")
    with api.client() as client:
        not_json = client.post(
            "/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        no_task = client.post("/v1/jobs", json={"team": team})
        extra = client.post("/v1/jobs", json={"task": "x", "team": team, "priority": 9})
        bad_team = client.post("/v1/jobs", json={"task": "x", "team": {"name": "t", "agents": []}})
        unknown = client.post("/v1/jobs", json={"task": "x", "team": "no-such-team"})
        exe_file = {"name": "a.exe", "media_type": "application/x-msdownload", "data_b64": "TVo="}
        exe = client.post("/v1/jobs", json={"task": "x", "team": team, "attachments": [exe_file]})
        not_b64 = client.post("/v1/jobs", json={"task": "x", "team": team, "attachments": [
            {"name": "a.txt", "media_type": "text/plain", "data_b64": "%%%"}]})  # fmt: skip
        oversize = client.post("/v1/jobs", json={"task": "x" * (MAX_BODY + 1), "team": team})
        chunked = client.post(
            "/v1/jobs",
            content=iter([b'{"task": "', b"y" * MAX_BODY, b'", "team": "x"}']),
            headers={"Content-Type": "application/json"},
        )
        unknown_path = client.get("/v1/nothing-here")

    _is_problem(not_json, 422, "invalid_request")
    body = _is_problem(no_task, 422, "invalid_request")
    assert any(p.startswith("body.task") for p in body["problems"])
    _is_problem(extra, 422, "invalid_request")
    _is_problem(bad_team, 422, "invalid_request")
    _is_problem(unknown, 404, "team_not_found")
    assert "unsupported media type" in json.dumps(_is_problem(exe, 422, "invalid_request"))
    _is_problem(not_b64, 422, "invalid_request")
    _is_problem(oversize, 413, "body_too_large")
    assert "content-length" not in {k.lower() for k in chunked.request.headers}
    _is_problem(chunked, 413, "body_too_large")
    _is_problem(unknown_path, 404, "not_found")
    assert set(rt.jobs()) == before  # nothing half-started


def test_a_team_with_a_cyclic_plan_is_refused_at_the_door(api, rt):
    """What can be checked when a team is registered is checked then: 422, nothing stored."""
    agent = {"name": "door-a", "role": "worker"}
    step = {"role": "worker", "instructions": "x"}
    broken = {
        "cycle": {"plan": [{**step, "id": "s1", "depends_on": ["s2"]},
                           {**step, "id": "s2", "depends_on": ["s1"]}]},
        "unknown role": {"plan": [{**step, "id": "s1", "role": "ghost"}]},
        "missing node": {"graph": {"nodes": [{"id": "n", "role": "worker", "instructions": "x"}],
                                   "edges": [{"source": "n", "target": "nowhere"}],
                                   "start": "n"}},
        "remote schema": {"output_schema": {"$ref": "http://169.254.169.254/schema.json"}},
    }  # fmt: skip
    before = set(rt.teams())
    with api.client(ADMIN_KEY) as admin:
        for why, fields in broken.items():
            team = {"name": "door-team", "agents": [agent], **fields}
            body = _is_problem(admin.post("/v1/teams", json=team), 422, "invalid_request")
            assert any("body" in p for p in body["problems"]), why
            # and inline, with a job: refused before anything starts
            _is_problem(admin.post("/v1/jobs", json={"task": "t", "team": team}), 422,
                        "invalid_request")  # fmt: skip
    assert set(rt.teams()) == before


def test_teams_and_agents_are_managed_at_run_time_without_restarting_others(api, rt):
    team = _team("http-managed", agents=2)
    with api.client(ADMIN_KEY) as admin:
        created = admin.post("/v1/teams", json=team)
        duplicate = admin.post("/v1/teams", json=team)
        models = admin.get("/v1/models").json()
        a0 = rt.actor("agent/http-managed-a0")._actor_id.hex()
        a1 = rt.actor("agent/http-managed-a1")._actor_id.hex()

        job_id = _submit(admin, "Team by name: 1) one", "http-managed")
        by_name = _events(admin, job_id)

        updated = dict(team["agents"][1], instructions="Answer in French.")
        put = admin.put(
            "/v1/agents/http-managed-a1", json={"team": "http-managed", "agent": updated}
        )
        spec = ray.get(rt.actor("agent/http-managed-a1").spec.remote())
        same_a0 = rt.actor("agent/http-managed-a0")._actor_id.hex()
        same_a1 = rt.actor("agent/http-managed-a1")._actor_id.hex()

        third = dict(team["agents"][0], name="http-managed-a2")
        added = admin.post("/v1/agents", json={"team": "http-managed", "agent": third})
        agents = {a["name"]: a for a in admin.get("/v1/agents").json()}
        removed = admin.delete("/v1/agents/http-managed-a0")
        gone = _actor_gone(rt, "agent/http-managed-a0")
        mismatch = admin.put("/v1/teams/other-name", json=team)
        deleted = admin.delete("/v1/teams/http-managed")
        after = admin.get("/v1/teams/http-managed")
        orphan_job = admin.post("/v1/jobs", json={"task": "x", "team": "http-managed"})

    assert created.status_code == 201
    _is_problem(duplicate, 409, "conflict")
    assert "http-managed" in {m["id"] for m in models["data"]}
    assert by_name[-1][1] == "job_succeeded"
    assert put.status_code == 200, put.text
    assert spec.instructions == "Answer in French."
    assert (same_a0, same_a1) == (a0, a1)  # reconfigured in place, nothing restarted
    assert added.status_code == 201
    assert {"http-managed-a0", "http-managed-a1", "http-managed-a2"} <= set(agents)
    assert agents["http-managed-a2"]["team"] == "http-managed"
    assert removed.status_code == 200
    assert removed.json()["name"] == "http-managed-a0"
    assert gone
    _is_problem(mismatch, 409, "conflict")
    assert deleted.status_code == 200
    _is_problem(after, 404, "team_not_found")
    _is_problem(orphan_job, 404, "team_not_found")


def _actor_gone(rt, name, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            rt.actor(name)
        except ValueError:
            return True
        time.sleep(0.1)
    return False


def test_readiness_reports_each_system_actor(api):
    ready = httpx.get(f"{api.url}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"router": True, "orchestrator": True, "llm": True},
    }
