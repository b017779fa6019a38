"""What the job console reads, on a real Ray Serve on 127.0.0.1: jobs list, trace, waiting work.

Each route is tried as the console uses it, and as an attacker would: another tenant's key,
a tenant's key on admin pages, the console's files fetched without a key.
"""

from __future__ import annotations

import re

import pytest
import ray

from raytroupe import runtime
from raytroupe.deployments.console_api import CONSOLE_DIR
from raytroupe.protocols import AgentMessage, Event, encode
from tests.support.http_api import (
    ADMIN_KEY,
    OTHER_KEY,
    USER_KEY,
    finished,
    register,
    wire_team,
)
from tests.support.wire_server import Default, Reply, WireServer

PROBLEM = "application/problem+json"
TASK = "Tasks:\n- Name red.\n- Name blue."
"""Two subtasks (the listed tasks): the jobs list counts them."""


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


def _one_agent(name: str) -> runtime.Team:
    agents = [runtime.AgentSpec(name=f"{name}-a", role="worker")]
    return runtime.Team(name=name, planner_model="offline", agents=agents)


def _problem(response, status, code):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["code"] == code


def test_the_jobs_list_says_who_ran_what_for_how_much_and_only_to_its_tenant(api):
    team = register(api, _one_agent("console-list"))
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        submitted = acme.post("/v1/jobs", json={"team": team, "task": TASK})
        job_id = submitted.json()["id"]
        live = acme.get(f"/v1/jobs/{job_id}/summary").json()
        finished(acme, job_id)
        page = acme.get("/v1/jobs/summaries", params={"limit": 1000}).json()
        found = acme.get("/v1/jobs/summaries", params={"q": "- NAME RED", "limit": 5}).json()
        done = acme.get("/v1/jobs/summaries", params={"status": "succeeded"}).json()
        one = acme.get(f"/v1/jobs/{job_id}/summary").json()
        theirs = globex.get("/v1/jobs/summaries", params={"limit": 1000}).json()
        stolen = globex.get(f"/v1/jobs/{job_id}/summary")
        stolen_trace = globex.get(f"/v1/jobs/{job_id}/trace")
        searched = globex.get("/v1/jobs/summaries", params={"q": job_id}).json()
        bad = acme.get("/v1/jobs/summaries", params={"status": "exploded"})
        (agent,) = [a for a in acme.get("/v1/agents").json() if a["name"] == "console-list-a"]

    assert live["submitted_by"] == "acme-user"
    assert live["cost_usd"] is None  # known once it has finished
    mine = {line["id"]: line for line in page["jobs"]}
    line = mine[job_id]
    assert (line["team"], line["tenant"], line["submitted_by"]) == (team, "acme", "acme-user")
    assert line["status"] == "succeeded"
    assert line["subtasks"] == 2
    assert line["tokens"] > 0
    assert line["finished_at"] >= line["submitted_at"]
    assert line["task"] == TASK
    assert one == line
    times = [j["submitted_at"] for j in page["jobs"]]
    assert times == sorted(times, reverse=True)
    assert {j["tenant"] for j in page["jobs"]} == {"acme"}
    assert [j["id"] for j in found["jobs"]][:1] == [job_id]
    assert job_id in {j["id"] for j in done["jobs"]}
    assert {j["status"] for j in done["jobs"]} == {"succeeded"}
    assert job_id not in {j["id"] for j in theirs["jobs"]}
    assert searched["jobs"] == []
    _problem(stolen, 404, "job_not_found")
    _problem(stolen_trace, 404, "job_not_found")
    _problem(bad, 422, "invalid_request")
    assert (agent["team"], agent["registered"], agent["in_flight"]) == (team, True, 0)


def test_a_held_tool_call_is_listed_with_its_job_and_its_trace_keeps_arguments_and_result(
    api, wire
):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "ship release 7"}), Default())
    team = register(api, wire_team(wire, "console-held", ["echo"]))
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        job_id = acme.post("/v1/jobs", json={"team": team, "task": "Echo it."}).json()["id"]
        pending = []
        for _ in range(300):  # bounded: the call is held within seconds
            pending = [p for p in acme.get("/v1/approvals").json() if p["job_id"] == job_id]
            if pending:
                break
            with acme.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
                for text in stream.iter_lines():
                    if text == "event: approval_requested":
                        break
        running_trace = acme.get(f"/v1/jobs/{job_id}/trace").json()
        others = globex.get("/v1/approvals").json()
        (held,) = pending
        decided = acme.post(
            f"/v1/jobs/{job_id}/approvals/{held['approval_id']}",
            json={"approved": True, "reason": "checked"},
        )
        finished(acme, job_id)
        trace = acme.get(f"/v1/jobs/{job_id}/trace").json()
        after = [p for p in acme.get("/v1/approvals").json() if p["job_id"] == job_id]

    assert (held["tool"], held["arguments"], held["agent"]) == (
        "echo", {"text": "ship release 7"}, "console-held-agent"
    )  # fmt: skip
    assert decided.status_code == 200
    assert all(p["job_id"] != job_id for p in others)
    assert running_trace["spans"][0]["kind"] == "job"
    assert running_trace["spans"][0]["attributes"]["status"] == "awaiting_approval"
    (tool,) = [s for s in trace["spans"] if s["kind"] == "tool_call"]
    assert tool["attributes"]["tool"] == "echo"
    assert tool["attributes"]["arguments"] == '{"text": "ship release 7"}'
    assert "ship release 7" in tool["attributes"]["result"]
    assert trace["trace_id"] == trace["spans"][0]["trace_id"]
    assert after == []


def test_usage_by_day_is_the_tenants_own_and_every_tenants_for_an_admin(api):
    team = register(api, _one_agent("console-usage"))
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        for client in (acme, globex):
            job_id = client.post("/v1/jobs", json={"team": team, "task": "- one."}).json()["id"]
            finished(client, job_id)
        mine = acme.get("/v1/usage/daily").json()
        theirs = globex.get("/v1/usage/daily").json()
    with api.client(ADMIN_KEY) as admin:
        everyone = admin.get("/v1/usage/daily").json()

    assert {row["tenant"] for row in mine} == {"acme"}
    assert {row["tenant"] for row in theirs} == {"globex"}
    assert {"acme", "globex"} <= {row["tenant"] for row in everyone}
    for row in mine:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["day"])
        assert row["calls"] > 0
        assert row["prompt_tokens"] > 0
    assert sum(r["calls"] for r in everyone if r["tenant"] == "acme") == sum(
        r["calls"] for r in mine
    )


def test_dead_letters_are_for_admins_and_show_no_payload(api, rt):
    payload = Event(name="x", data={"secret": "s3cret"})
    stray = AgentMessage(sender="driver", recipient="nobody-console", job_id="job-console-stray",
                         tenant="acme", payload=payload)  # fmt: skip
    ray.get(rt.actor("router/0").request.remote(encode(stray)))
    with api.client(USER_KEY) as user:
        refused = user.get("/v1/dead-letters")
    with api.client(ADMIN_KEY) as admin:
        letters = admin.get("/v1/dead-letters", params={"limit": 1000})

    _problem(refused, 403, "forbidden")
    assert letters.status_code == 200
    (mine,) = [d for d in letters.json() if d["recipient"] == "nobody-console"]
    assert mine["reason"] == "unknown_recipient"
    assert (mine["job_id"], mine["sender"], mine["tenant"]) == (
        "job-console-stray", "driver", "acme"
    )  # fmt: skip
    assert mine["message_id"] == stray.id
    assert "s3cret" not in letters.text  # the reason and the addresses, never the payload
    times = [letter["at"] for letter in letters.json()]
    assert times == sorted(times, reverse=True)


def test_me_tells_the_console_who_is_signed_in(api):
    with api.client(USER_KEY) as user, api.client(ADMIN_KEY) as admin, api.client(None) as anon:
        assert user.get("/v1/me").json() == {"name": "acme-user", "tenant": "acme", "admin": False}
        assert admin.get("/v1/me").json() == {"name": "acme-admin", "tenant": "acme", "admin": True}
        _problem(anon.get("/v1/me"), 401, "unauthorized")


def _directives(header: str) -> dict[str, list[str]]:
    """A Content-Security-Policy header as ``{directive: [sources]}`` (each directive once)."""
    policy: dict[str, list[str]] = {}
    for part in header.split(";"):
        if words := part.split():
            assert words[0].lower() not in policy, f"{words[0]} twice: the first one counts"
            policy[words[0].lower()] = words[1:]
    return policy


def test_the_console_is_served_without_a_key_locked_down_and_free_of_secrets(api):
    with api.client(None) as anon:
        page = anon.get("/console/")
        bare = anon.get("/console", follow_redirects=True)
        script = anon.get("/console/console.js")
        escape = anon.get("/console/../v1/jobs")
        traversal = anon.get("/console/%2e%2e/api.py")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = _directives(page.headers["content-security-policy"])
    assert policy["default-src"] == ["'self'"]  # objects, workers, fonts... from here only
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval, no other origin
    assert policy["style-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'"]  # the page can call nowhere but this API
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert set(policy.get("img-src", ["'self'"])) <= {"'self'", "data:"}
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert "<title>raytroupe console</title>" in page.text
    assert bare.status_code == 200
    assert bare.text == page.text
    assert script.status_code == 200
    assert script.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert escape.status_code == 401  # out of the console's folder: the API, behind its key
    assert traversal.status_code == 404
    shipped = "".join(p.read_text() for p in CONSOLE_DIR.iterdir() if p.is_file())
    for secret in (USER_KEY, ADMIN_KEY, OTHER_KEY, "rt-test-"):
        assert secret not in shipped
    # data is rendered as text, never parsed as markup
    parsers = (
        r"\.(innerHTML|outerHTML)\s*[+]?=|insertAdjacentHTML|document\.write|\beval\(|new Function"
    )
    assert re.findall(parsers, shipped) == []
    assert "localStorage" not in shipped  # the key lives for the tab's session only
    assert "https://" not in shipped.replace("https://www.w3.org", "")  # nothing from outside
