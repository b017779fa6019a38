"""Schedules on the real Serve app: a tenant's job submitted at cron times, as that tenant."""

from __future__ import annotations

import time

import pytest

from raytroupe import runtime
from tests.support.http_api import OTHER_KEY, USER_KEY, finished, register

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

TEAM = "scheduled"
WAIT_S = 90


@pytest.fixture(scope="module")
def team(api):
    return register(api, runtime.Team(
        name=TEAM, planner_model="offline",
        agents=[runtime.AgentSpec(name=f"{TEAM}-a", role="worker")],
    ))  # fmt: skip


def test_a_schedule_submits_its_job_at_each_time_as_its_tenant(api, team):
    spec = {"cron": "*/5 * * * * *", "task": "- name a planet.", "team": TEAM,
            "description": "every five seconds"}  # fmt: skip
    with api.client(USER_KEY) as acme, api.client(OTHER_KEY) as globex:
        made = acme.put("/v1/schedules/planets", json=spec)
        again = acme.put("/v1/schedules/planets", json=spec)
        deadline = time.monotonic() + WAIT_S
        while len((shown := acme.get("/v1/schedules/planets").json())["runs"]) < 2:
            assert time.monotonic() < deadline, shown
            time.sleep(0.5)
        runs = shown["runs"]
        views = [finished(acme, run["job_id"]) for run in runs[:2]]
        summaries = [acme.get(f"/v1/jobs/{run['job_id']}/summary").json() for run in runs[:2]]
        theirs = globex.get("/v1/schedules/planets")
        their_list = globex.get("/v1/schedules").json()
        their_job = globex.get(f"/v1/jobs/{runs[0]['job_id']}")
        gone = acme.delete("/v1/schedules/planets")
        after = acme.get("/v1/schedules/planets")

    assert made.status_code == 201, made.text
    assert again.status_code == 200  # replaced, not made
    assert made.json()["next_at"] > time.time() - WAIT_S
    assert runs[0]["fire_at"] - runs[1]["fire_at"] == pytest.approx(5, abs=0.01)
    assert all(run["error"] is None for run in runs)
    assert [v["status"] for v in views] == ["succeeded", "succeeded"]
    assert all(s["tenant"] == "acme" for s in summaries)
    assert all(s["submitted_by"] == "schedule:planets" for s in summaries)
    assert theirs.status_code == 404
    assert theirs.json()["code"] == "schedule_not_found"
    assert all(s["name"] != "planets" for s in their_list)
    assert their_job.status_code == 404
    assert gone.status_code == 200
    assert after.status_code == 404


def test_a_bad_or_too_frequent_schedule_is_refused_naming_the_field(api, team):
    with api.client(USER_KEY) as acme, api.client(None) as anonymous:
        answers = {
            "every second": acme.put("/v1/schedules/fast", json={"cron": "* * * * * *",
                                                                 "task": "x"}),
            "not cron": acme.put("/v1/schedules/bad", json={"cron": "every day", "task": "x"}),
            "zone": acme.put("/v1/schedules/bad", json={"cron": "0 9 * * *", "task": "x",
                                                       "timezone": "Nowhere/Land"}),
            "no task": acme.put("/v1/schedules/bad", json={"cron": "0 9 * * *"}),
            "name": acme.put("/v1/schedules/Bad%20Name", json={"cron": "0 9 * * *", "task": "x"}),
            "keyless": anonymous.put("/v1/schedules/x", json={"cron": "0 9 * * *", "task": "x"}),
        }  # fmt: skip
        kept = acme.get("/v1/schedules").json()
    for name, answer in answers.items():
        expected = 401 if name == "keyless" else 422
        assert answer.status_code == expected, (name, answer.text)
    assert "at most every 5 s" in answers["every second"].text
    assert all(s["name"] not in ("fast", "bad") for s in kept)
