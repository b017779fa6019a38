"""Spend windows on a real Ray (Issue 47): the session's pool has limits for one tenant.

``tests/support/keys.py``: the tenant ``windowed`` has a soft daily limit of one token (its
first call of the day crosses it) and a hard lifetime limit of one token on its agent
``capped``, and one on each of its end users; acme has a soft limit on each of its end
users. The alert is a job event and a signed webhook delivery, once per window; a hard
limit refuses the call before any provider is asked, naming the window. An end user is
kept with the job, its usage and its alerts, and another tenant sees none of them.
"""

from __future__ import annotations

import json
import time

import pytest

from raytroupe import runtime
from tests.support.http_api import ADMIN_KEY, OTHER_KEY, USER_KEY, finished, register
from tests.support.keys import WINDOWED_TENANT
from tests.support.listener import listening

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

WAIT_S = 60


def _team(agent: str) -> runtime.Team:
    return runtime.Team(
        name=f"spend-{agent}",
        agents=[runtime.AgentSpec(name=agent, role="worker")],
    )


def _alerts(handle) -> list[dict]:
    return [e.data for e in handle.events(timeout=WAIT_S) if e.type == "spend_alert"]


def test_a_windows_alert_is_a_job_event_and_a_webhook_delivery_once_per_window(rt):
    tenant = rt.as_tenant(WINDOWED_TENANT)
    with listening() as receiver:
        hook = tenant.create_webhook({"url": receiver.url, "events": ["spend_alert"]})
        try:
            first = tenant.submit("- name a colour.", _team("writer"))
            assert first.result(timeout=120).status == "succeeded"
            second = tenant.submit("- name a fruit.", _team("writer"))
            assert second.result(timeout=120).status == "succeeded"
            alerts = _alerts(first)
            deadline = time.monotonic() + WAIT_S
            while not receiver.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            heard = [json.loads(r.body) for r in receiver.requests]
        finally:
            tenant.delete_webhook(hook.id)
    views = {view.limit: view for view in tenant.spend_windows()}
    every = {(view.tenant, view.limit) for view in rt.spend_windows()}

    (alert,) = [a for a in alerts if a["limit"] == "windowed-day"]
    assert alert["threshold"] == 1.0
    assert alert["tenant"] == WINDOWED_TENANT
    assert alert["measure"] == "tokens"
    assert alert["spent"] >= alert["allowed"] == 1
    assert alert["hard"] is False
    assert alert["window"] == "d" + time.strftime("%Y-%m-%d", time.gmtime())
    # the same window and threshold is not said again (unless the day turned meanwhile)
    assert [a for a in _alerts(second) if a["window"] == alert["window"]] == []
    (body,) = heard
    assert body["type"] == "spend_alert"
    assert body["data"]["job_id"] == first.job_id
    assert body["data"]["event"]["limit"] == "windowed-day"
    # the windows' state: the tenant sees its own limits, the driver every tenant's
    day = views["windowed-day"]
    assert day.period == alert["window"]
    assert day.tokens >= alert["spent"] > day.tokens_limit == 1
    assert {view.tenant for view in views.values()} == {WINDOWED_TENANT}
    assert ("acme", "acme-per-user") not in {(v.tenant, v.limit) for v in views.values()}
    assert {(WINDOWED_TENANT, "windowed-day"), (WINDOWED_TENANT, "windowed-capped")} <= every


def test_a_hard_window_on_an_agent_refuses_its_call_naming_the_window(rt):
    handle = rt.as_tenant(WINDOWED_TENANT).submit("- say hi.", _team("capped"))
    with pytest.raises(runtime.JobFailed) as caught:
        handle.result(timeout=120)

    assert "spend:windowed-capped@life token budget: 0 spent + 0 held" in str(caught.value)
    # the capped agent's call was refused before any provider answered it: no usage of it
    rows = rt.usage(handle.job_id)
    assert [r for r in rows if r.agent.endswith("capped")] == []


def test_a_hard_limit_on_each_end_user_refuses_a_users_job_and_not_a_job_without_one(rt):
    tenant = rt.as_tenant(WINDOWED_TENANT)
    handle = tenant.submit("- say hi.", _team("writer"), user="carol")
    with pytest.raises(runtime.JobFailed) as caught:
        handle.result(timeout=120)

    assert "spend:windowed-per-user/carol@life token budget" in str(caught.value)
    assert tenant.summary(handle.job_id).user == "carol"
    assert [line.id for line in tenant.summaries(user="carol").jobs] == [handle.job_id]


def test_an_end_user_is_kept_with_the_job_its_usage_and_its_alerts_over_http(api):
    # a registered team's agent names are the cluster's: one no other test registers
    team = register(api, _team("spend-user-writer"))
    user = "bob.spend@acme.example"  # also its chat session (OpenAI `user`)
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        made = acme.post("/v1/jobs", json={"team": team, "task": "- name a colour.", "user": user})
        assert made.status_code == 202, made.text
        job_id = made.json()["id"]
        finished(acme, job_id)
        plain = acme.post("/v1/jobs", json={"team": team, "task": "- name a fruit."}).json()
        finished(acme, plain["id"])
        chat = acme.post(
            "/v1/chat/completions",
            json={"model": team, "user": user, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert chat.status_code == 200, chat.text
        listed = acme.get("/v1/jobs/summaries", params={"user": user}).json()["jobs"]
        usage = acme.get("/v1/usage", params={"user": user}).json()
        events = acme.get(f"/v1/jobs/{job_id}/events", params={"timeout": 5}).text
        theirs = globex.get("/v1/jobs/summaries", params={"user": user}).json()["jobs"]
        their_usage = globex.get("/v1/usage", params={"user": user}).json()
        windows = acme.get("/v1/spend-windows").json()
        their_windows = globex.get("/v1/spend-windows").json()
        bad = acme.post("/v1/jobs", json={"team": team, "task": "x", "user": "bob bob"})

    chat_job = chat.json()["id"].removeprefix("chatcmpl-")
    assert {line["id"] for line in listed} == {job_id, chat_job}  # not the job without one
    assert all(line["user"] == user for line in listed)
    assert usage
    assert {row["job_id"] for row in usage} <= {job_id, chat_job}
    assert all(row["user"] == user for row in usage)
    # acme's per-user limit said once that this user crossed it, on the job that did
    assert '"spend_alert"' in events
    assert f'"user":"{user}"'.replace(" ", "") in events.replace(" ", "")
    # another tenant sees nothing of acme's users
    assert theirs == []
    assert their_usage == []
    # the spend windows' state: acme's per-user window of this user, as the pool booked it
    (mine,) = [w for w in windows if w["limit"] == "acme-per-user" and w["user"] == user]
    assert mine["tokens"] >= sum(row["prompt_tokens"] + row["completion_tokens"] for row in usage)
    assert (mine["tokens_limit"], mine["hard"], mine["window"]) == (1, False, "day")
    assert {w["tenant"] for w in windows} == {"acme"}
    assert their_windows == []  # globex has no limit, and sees none of acme's
    assert bad.status_code == 422


def test_an_admin_sets_a_limit_on_a_key_and_team_at_run_time_then_drops_it(api):
    team = register(api, _team("spend-key-writer"))  # a name no other test registers
    cap = {"tenant": "acme", "key": "acme-user", "team": team, "window": "lifetime",
           "tokens": 1, "alert_at": []}  # fmt: skip
    job = {"team": team, "task": "- name a colour."}
    with api.client(ADMIN_KEY) as admin, api.client(USER_KEY) as acme:
        refused = acme.put("/v1/spend-limits/spend-cap-key", json=cap)  # not an admin's key
        made = admin.put("/v1/spend-limits/spend-cap-key", json=cap)
        try:
            listed = {i["name"]: i for i in admin.get("/v1/spend-limits").json()}
            capped = finished(acme, acme.post("/v1/jobs", json=job).json()["id"])
            # the same tenant and team through another key: not under the key's limit
            free = finished(admin, admin.post("/v1/jobs", json=job).json()["id"])
        finally:
            dropped = admin.delete("/v1/spend-limits/spend-cap-key")
        again = finished(acme, acme.post("/v1/jobs", json=job).json()["id"])
        gone = admin.delete("/v1/spend-limits/spend-cap-key")
        configured = admin.put("/v1/spend-limits/acme-per-user", json=cap)
        bad = admin.put("/v1/spend-limits/spend-bad", json={**cap, "tokens": -1})

    assert refused.status_code == 403
    assert made.status_code == 200, made.text
    assert (made.json()["source"], made.json()["set_by"]) == ("set", "acme-admin")
    assert listed["spend-cap-key"]["limit"]["key"] == "acme-user"
    assert listed["acme-per-user"]["source"] == "config"
    assert capped["status"] == "failed"
    assert "spend:spend-cap-key@life token budget" in json.dumps(capped)
    assert free["status"] == "succeeded"
    assert dropped.status_code == 200
    assert again["status"] == "succeeded"  # dropped: the next job's calls are free again
    assert (gone.status_code, gone.json()["code"]) == (404, "spend_limit_not_found")
    assert (configured.status_code, configured.json()["code"]) == (409, "conflict")
    assert bad.status_code == 422
