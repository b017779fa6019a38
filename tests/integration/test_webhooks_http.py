"""Webhooks on the real Serve app: a tenant's endpoint hears its jobs, signed, retried, alone.

The receivers are HTTP servers on 127.0.0.1, which this session's operator allows webhooks to
reach (``tests/conftest.py``); each body is checked with the ``standardwebhooks`` library with
the secret the API showed once, as a tenant's endpoint would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from standardwebhooks.webhooks import Webhook

from raytroupe import runtime
from tests.support.http_api import OTHER_KEY, USER_KEY, finished, register, wire_team
from tests.support.listener import Listener, listening
from tests.support.wire_server import Default, Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

TEAM = "hooked"
WAIT_S = 60


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture(scope="module")
def team(api):
    return register(api, runtime.Team(
        name=TEAM, planner_model="offline",
        agents=[runtime.AgentSpec(name=f"{TEAM}-a", role="worker")],
    ))  # fmt: skip


def _heard(receiver: Listener, job_id: str, kind: str) -> dict:
    """The body of the first ``kind`` event of ``job_id`` the receiver got (bounded wait)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for seen in list(receiver.requests):
            body = json.loads(seen.body)
            if body["type"] == kind and body["data"]["job_id"] == job_id:
                return {"body": body, "raw": seen.body, "headers": seen.headers}
        assert time.monotonic() < deadline, f"no {kind} of {job_id}: {receiver.requests}"
        time.sleep(0.1)


def test_a_tenants_webhook_hears_its_jobs_end_signed_and_no_other_tenants(api, team):
    with listening() as receiver, api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        made = acme.post("/v1/webhooks", json={"url": f"{receiver.url}/hooks/acme"})
        assert made.status_code == 201, made.text
        hook = made.json()
        mine = acme.post("/v1/jobs", json={"team": TEAM, "task": "- name a colour."}).json()
        theirs = globex.post("/v1/jobs", json={"team": TEAM, "task": "- name a fruit."}).json()
        finished(globex, theirs["id"])
        heard = _heard(receiver, mine["id"], "job_succeeded")
        deliveries = acme.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
        listed = acme.get("/v1/webhooks").json()
        refused = {
            "get": globex.get(f"/v1/webhooks/{hook['id']}"),
            "deliveries": globex.get(f"/v1/webhooks/{hook['id']}/deliveries"),
            "delete": globex.delete(f"/v1/webhooks/{hook['id']}"),
        }
        others = globex.get("/v1/webhooks").json()
        gone = acme.delete(f"/v1/webhooks/{hook['id']}")
        after = acme.get(f"/v1/webhooks/{hook['id']}")

    assert hook["secret"].startswith("whsec_")
    assert "secret" not in listed[0]
    signed = Webhook(hook["secret"]).verify(heard["raw"], heard["headers"])
    assert signed["data"]["tenant"] == "acme"
    assert signed["data"]["job_id"] == mine["id"]
    (delivery,) = [d for d in deliveries if d["job_id"] == mine["id"]]
    assert delivery["state"] == "delivered"
    assert delivery["id"] == heard["headers"]["webhook-id"]
    # globex's job ended before acme's was heard: its event made no delivery to acme's hook
    assert all(d["job_id"] != theirs["id"] for d in deliveries)
    assert all(json.loads(r.body)["data"]["job_id"] != theirs["id"] for r in receiver.requests)
    for name, answer in refused.items():
        assert answer.status_code == 404, name
        assert answer.json()["code"] == "webhook_not_found", name
    assert all(h["id"] != hook["id"] for h in others)
    assert gone.status_code == 200
    assert after.status_code == 404


def test_a_held_approval_is_told_and_a_failing_endpoint_is_tried_again(api, wire):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "rotate keys"}), Default())
    held_team = register(api, wire_team(wire, "hooked-held", ["echo"]))
    with listening(answers=(503,)) as receiver, api.client(USER_KEY) as acme:
        hook = acme.post("/v1/webhooks", json={
            "url": receiver.url, "events": ["approval_requested", "job_succeeded"],
            "description": "pager",
        }).json()  # fmt: skip
        job_id = acme.post("/v1/jobs", json={"team": held_team, "task": "Echo it."}).json()["id"]
        asked = _heard(receiver, job_id, "approval_requested")["body"]
        waiting = acme.get(f"/v1/jobs/{job_id}").json()["status"]
        approval = asked["data"]["event"]["approval_id"]
        decided = acme.post(
            f"/v1/jobs/{job_id}/approvals/{approval}", json={"approved": True, "reason": "ok"}
        )
        _heard(receiver, job_id, "job_succeeded")
        deadline = time.monotonic() + WAIT_S
        while True:  # the 503 is tried again, and recorded
            deliveries = acme.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
            if all(d["state"] == "delivered" for d in deliveries) and len(deliveries) == 2:
                break
            assert time.monotonic() < deadline, deliveries
            time.sleep(0.1)
        acme.delete(f"/v1/webhooks/{hook['id']}")

    assert waiting == "awaiting_approval"  # told while the job waits, not after
    assert asked["data"]["event"]["tool"] == "echo"
    assert decided.status_code == 200, decided.text
    by_type = {d["type"]: d for d in deliveries if d["job_id"] == job_id}
    assert by_type["approval_requested"]["attempts"] == 2  # 503 first, then 200
    assert by_type["approval_requested"]["state"] == "delivered"
    assert by_type["job_succeeded"]["attempts"] == 1
    first, second = (r for r in receiver.requests if b"approval_requested" in r.body)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]


def test_webhooks_aimed_inside_at_others_jobs_or_unheard_events_are_refused(api, team):
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex, api.client(None) as anon:
        theirs = globex.post("/v1/jobs", json={"team": TEAM, "task": "- one."}).json()["id"]
        hook = {"url": "http://127.0.0.1:9/x"}
        answers = {
            "metadata": acme.post("/v1/webhooks", json={"url": "http://169.254.169.254/x"}),
            "private": acme.post("/v1/webhooks", json={"url": "http://10.1.2.3/x"}),
            "file": acme.post("/v1/webhooks", json={"url": "file:///etc/passwd"}),
            "tokens": acme.post("/v1/webhooks", json={**hook, "events": ["llm_delta"]}),
            "their job": acme.post("/v1/webhooks", json={**hook, "job_id": theirs}),
            "keyless": anon.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}),
        }
        mine = acme.get("/v1/webhooks").json()
    expected = {"metadata": (403, "forbidden"), "private": (403, "forbidden"),
                "file": (422, "invalid_request"), "tokens": (422, "invalid_request"),
                "their job": (404, "job_not_found"), "keyless": (401, "unauthorized")}  # fmt: skip
    for name, (status, code) in expected.items():
        answer = answers[name]
        assert (answer.status_code, answer.json()["code"]) == (status, code), (name, answer.text)
    assert all("127.0.0.1:9" not in h["url"] for h in mine)


def test_the_cli_makes_lists_and_deletes_a_webhook_over_http(api, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TROUPE_")}
    env.update(TROUPE_URL=api.url, TROUPE_API_KEY=USER_KEY, COLUMNS="250",
               TROUPE_CONFIG_DIR=str(tmp_path / "config"))  # fmt: skip

    def troupe(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "raytroupe.runtime.cli", "webhooks", *args],
            capture_output=True, text=True, timeout=120, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    made = troupe("create", "http://127.0.0.1:9/cli", "--event", "job_failed")
    hook_id = made.split()[0]
    assert "secret (shown once): whsec_" in made
    assert hook_id in troupe("list")
    assert '"job_failed"' in troupe("show", hook_id)
    assert troupe("deliveries", hook_id).count("\n") >= 1
    assert f"deleted webhook {hook_id}" in troupe("delete", hook_id)
    assert hook_id not in troupe("list")
