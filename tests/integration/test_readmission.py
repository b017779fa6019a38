"""Admission for every re-entry, on a real Ray and a real Serve on 127.0.0.1.

A fork, a graph's resume, an orchestrator that restarts with unfinished jobs and an A/B
experiment's arm each start work the tenant did not submit just now. Each is admitted under
the tenant's policy of today: after an admin narrows the ``revoked`` tenant's policy
(``PUT /v1/tenants/revoked/policy``), what it no longer allows is refused by name, and the
model alias it revoked, the operator's loopback server speaking the OpenAI wire protocol
(which records every request), is not called again. Each test restores the policy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.evals.experiments import arm_for
from raytroupe.protocols import AgentSpec, TeamSpec, TenantPolicy, job_shard
from raytroupe.protocols.skill import SkillSpec
from tests.support.graph_specs import PAUSED
from tests.support.http_api import ADMIN_KEY, REVOKED_KEY, finished
from tests.support.restarts import kill_and_wait_for_restart, until_status
from tests.support.wire_server import WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

WIRE = "rv-wire"
"""The operator's model alias the admin revokes: the loopback wire server."""
ALLOWED = TenantPolicy(models=("offline", WIRE))
REVOKED = TenantPolicy(models=("offline",))
POLICY_NAME = "tenant policy of 'revoked'"
CHAIN: dict[str, Any] = {
    "start": "one",
    "answer": "log",
    "state": {"json_schema": {"type": "object", "properties": {
        "log": {"type": "array", "items": {"type": "string"}}}}, "reducers": {"log": "append"}},
    "nodes": [
        {"id": "one", "role": "first", "writes": ["log"], "instructions": "one"},
        {"id": "two", "role": "last", "writes": ["log"], "instructions": "two: {state.log}"},
    ],
    "edges": [{"source": "one", "target": "two"}],
}  # fmt: skip
"""Two nodes, a checkpoint after each: a fork from step 1 runs node two again."""


@pytest.fixture(scope="module")
def wire(rt):
    with WireServer() as server:
        model = runtime.OpenAICompatibleModel(base_url=server.base_url_openai, model="w")
        ray.get(rt.actor("llm/0").configure.remote({WIRE: model}, operator=True))
        yield server


@contextlib.contextmanager
def policy(api, allowed: TenantPolicy) -> Iterator[httpx.Client]:
    """The tenant under ``allowed`` (set by an admin key, the admin's client yielded); its
    own policy dropped again at the end, whatever happened."""
    with api.client(ADMIN_KEY) as admin:
        put(admin, allowed)
        try:
            yield admin
        finally:
            assert admin.delete("/v1/tenants/revoked/policy").status_code == 204


def put(admin: httpx.Client, allowed: TenantPolicy) -> None:
    response = admin.put("/v1/tenants/revoked/policy", json=allowed.model_dump(mode="json"))
    assert response.status_code == 200, response.text


def graph_team(name: str, graph: dict[str, Any], roles: tuple[str, ...]) -> dict[str, Any]:
    """An inline team of the tenant: one agent per role, each on the wire alias."""
    agents = [{"name": f"{name}-{r}", "role": r, "model": WIRE, "memory": {"recall": False}}
              for r in roles]  # fmt: skip
    return {"name": name, "planner_model": "offline", "agents": agents, "graph": graph}


def submitted(client: httpx.Client, body: dict[str, Any]) -> str:
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def forbidden(response: httpx.Response, field: str) -> dict[str, Any]:
    assert response.status_code == 403, response.text
    body: dict[str, Any] = response.json()
    assert (body["code"], body["field"], body["policy"]) == ("forbidden", field, POLICY_NAME)
    return body


def calls(wire: WireServer) -> int:
    """Completions the wire alias has been asked for."""
    return sum(r.path.endswith("/chat/completions") for r in wire.requests)


def test_a_fork_after_its_model_alias_is_revoked_is_refused_and_runs_nothing(api, wire):
    with api.client(REVOKED_KEY) as tenant, policy(api, ALLOWED) as admin:
        body = {"task": "count", "team": graph_team("rv-fork", CHAIN, ("first", "last"))}
        ids: list[str] = []
        while {job_shard(i, 2) for i in ids} != {0, 1} and len(ids) < 6:
            ids.append(submitted(tenant, body))  # the front desk hands jobs out in turn
        assert {job_shard(i, 2) for i in ids} == {0, 1}  # a fork on each shard
        for job_id in ids:
            assert finished(tenant, job_id)["status"] == "succeeded"
        listed, before = tenant.get("/v1/jobs").json(), calls(wire)

        put(admin, REVOKED)
        forbidden(tenant.post("/v1/jobs", json=body), "team.agents.0.model")  # as a new job
        for job_id in ids:
            refused = forbidden(
                tenant.post(f"/v1/jobs/{job_id}/fork", json={"step": 1}), "team.agents.0.model"
            )
            assert "team.agents.1.model" in " ".join(refused["problems"])
        assert tenant.get("/v1/jobs").json() == listed  # no job was started

        put(admin, ALLOWED)  # allowed again: a fork starts, and runs node two only
        forked = tenant.post(f"/v1/jobs/{ids[-1]}/fork", json={"step": 1})
        assert forked.status_code == 202, forked.text
        assert finished(tenant, forked.json()["job_id"])["status"] == "succeeded"
        assert calls(wire) == before + 1  # the refused forks called the alias not once


def test_a_paused_graph_is_not_resumed_after_its_model_alias_is_revoked(api, wire):
    with api.client(REVOKED_KEY) as tenant, policy(api, ALLOWED) as admin:
        team = graph_team("rv-resume", PAUSED, ("writer", "editor"))
        job_id = submitted(tenant, {"task": "a notice", "team": team})
        until_status(lambda: tenant.get(f"/v1/jobs/{job_id}").json()["status"], "awaiting_input")
        points, before = tenant.get(f"/v1/jobs/{job_id}/checkpoints").json(), calls(wire)

        put(admin, REVOKED)
        refused = tenant.post(f"/v1/jobs/{job_id}/resume", json={"value": "refused"})
        forbidden(refused, "team.agents.0.model")
        assert tenant.get(f"/v1/jobs/{job_id}").json()["status"] == "awaiting_input"
        assert tenant.get(f"/v1/jobs/{job_id}/checkpoints").json() == points  # nothing kept

        put(admin, ALLOWED)  # allowed again: it goes on from the same interrupt
        resumed = tenant.post(f"/v1/jobs/{job_id}/resume", json={"value": "approved"})
        assert resumed.status_code == 200, resumed.text
        result = finished(tenant, job_id)["result"]
        assert result["status"] == "succeeded", result["error"]
        assert result["state"]["verdict"] == "approved"
        assert calls(wire) == before + 1  # the publish node, once: after the refusal, none


def test_a_restarted_orchestrator_fails_an_unfinished_job_todays_policy_refuses(rt, api, wire):
    """A tenant's paused graph and an admin's (a driver's) for the same tenant, on one shard;
    the policy narrows, the shard is killed: the tenant's job ends ``forbidden``, the admin's
    is taken as it was."""
    with api.client(REVOKED_KEY) as tenant, policy(api, ALLOWED) as admin:
        team = graph_team("rv-restart", PAUSED, ("writer", "editor"))
        job_id = submitted(tenant, {"task": "a notice", "team": team})
        theirs = TeamSpec.model_validate(graph_team("rv-ops", PAUSED, ("writer", "editor")))
        admins = [rt.submit("a notice", team=theirs, tenant="revoked") for _ in range(2)]
        (same,) = [j for j in admins if job_shard(j.job_id, 2) == job_shard(job_id, 2)]
        for job in admins:
            until_status(job.status, "awaiting_input")
            if job is not same:
                assert job.cancel()
        until_status(lambda: tenant.get(f"/v1/jobs/{job_id}").json()["status"], "awaiting_input")
        before = calls(wire)

        put(admin, REVOKED)
        kill_and_wait_for_restart(rt.client.handles.orchestrators.of(job_id))

        view = finished(tenant, job_id)
        assert view["status"] == "failed"
        error = view["result"]["error"]
        assert error["code"] == "forbidden"
        assert error["detail"]["field"] == "team.agents.0.model"
        events = list(rt.job(job_id).events(timeout=30))
        assert (events[-1].type, events[-1].data["code"]) == ("job_failed", "forbidden")
        until_status(same.status, "awaiting_input")  # resumed: an admin's job is not checked
        assert same.cancel()
        assert calls(wire) == before


def test_an_experiment_arm_the_tenants_policy_refuses_is_not_run_for_it(rt, api, wire):
    """Version 2 runs a registered team the tenant may not run, and gets nearly all traffic:
    the tenant's jobs it would take run version 1, the one asked for, outside the experiment."""
    team = TeamSpec(name="rv-arm-team", planner_model="offline",
                    agents=(AgentSpec(name="rv-arm-agent", role="w", model=WIRE),),
                    plan=({"id": "only", "role": "w", "instructions": "{task}"},))  # fmt: skip
    rt.put_team(team)
    base = {"name": "rv-ab", "description": "d", "prompt": {"instructions": "Say it."}}
    rt.put_skill(SkillSpec.model_validate({**base, "version": "2",
                                           "execution_mode": "team:rv-arm-team"}))  # fmt: skip
    rt.put_skill(SkillSpec.model_validate({**base, "version": "1", "execution_mode": "direct"}))
    try:
        info = rt.start_experiment({"name": "rv-arms", "skill": "rv-ab", "arms": [
            {"version": "1"}, {"version": "2", "weight": 1000}]})  # fmt: skip
        allowed = ALLOWED.model_copy(update={"skills": ("rv-ab",), "teams": ()})
        with api.client(REVOKED_KEY) as tenant, policy(api, allowed):
            before = calls(wire)
            ids = [submitted(tenant, {"task": f"hello {k}", "skill": "rv-ab"}) for k in range(4)]
            views = [finished(tenant, job_id) for job_id in ids]
            picked = [arm_for("rv-arms", job_id, info.spec.arms).version for job_id in ids]
            assert "2" in picked  # the split would have sent it there
            for view in views:
                assert view["status"] == "succeeded", view
                assert view["result"]["output"]["version"] == "1"
            counted = sum(a.assigned for a in rt.experiment("rv-arms").arms)
            assert counted == picked.count("1")  # only jobs the split sent to version 1
            assert calls(wire) == before  # the team of version 2 never ran
    finally:
        rt.delete_skill("rv-ab")  # its experiment stops with it
        rt.delete_team("rv-arm-team")
