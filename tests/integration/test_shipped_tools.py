"""A driver's ``@raytroupe.tool`` functions in jobs on Ray: shipped, granted, kept.

The functions are this module's (and closures made in the tests): the sandboxes cannot import
them, so they travel by value. What they did is read back from files they write.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import ray

import raytroupe
from raytroupe.protocols import (
    AgentSpec,
    Forbidden,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
)
from tests.support.http_api import ADMIN_KEY
from tests.support.restarts import after_restart, kill_and_wait_for_restart

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

_ids = itertools.count()


def _recorder(path: Path, name: str) -> raytroupe.Tool:
    """A tool that writes its (converted) arguments to ``path``, as the sandbox ran it."""

    def record(sku: str, units: int = 1) -> str:
        """Record an order line."""
        line = {"sku": sku, "units": units, "types": [type(sku).__name__, type(units).__name__]}
        path.write_text(json.dumps(line))
        return f"recorded {units} x {sku}"

    return raytroupe.tool(name=name)(record)


def _calls(tool: str, **arguments: object) -> ScriptedModel:
    """A model that calls ``tool`` once, then answers."""
    call = ToolCall(call_id="c1", tool=tool, arguments=arguments)
    return ScriptedModel(turns=(ScriptedTurn(tool_calls=(call,)), ScriptedTurn(text="Done.")))


def _team(function: raytroupe.Tool, *, per_agent: bool) -> raytroupe.Team:
    n = next(_ids)
    model = f"shipped-m-{n}"
    tools = [function] if per_agent else []
    return raytroupe.Team(
        name=f"shipped-{n}",
        planner_model="offline",
        models={model: _calls(function.name, sku="A-1", units="3")},
        plan=[PlannedSubtask(id="s1", role="clerk", instructions="Order three of A-1.")],
        agents=[{"name": f"shipped-clerk-{n}", "role": "clerk", "model": model, "tools": tools}],
        functions=[] if per_agent else [function],
    )


@pytest.mark.parametrize("per_agent", [False, True], ids=["team-wide", "one-agent"])
def test_a_jobs_agent_calls_its_teams_function_in_the_sandbox(rt, tmp_path, per_agent):
    out = tmp_path / "order.json"
    team = _team(_recorder(out, "record_order"), per_agent=per_agent)
    result = rt.submit("Order three of A-1.", team).result(timeout=90)
    (sub,) = result.subtasks
    assert sub.tool_calls == 1
    # ran in the sandbox, with the string "3" converted to the annotated int
    assert json.loads(out.read_text()) == {"sku": "A-1", "units": 3, "types": ["str", "int"]}


def test_a_registered_team_with_functions_runs_by_name(rt, tmp_path):
    out = tmp_path / "registered.json"
    team = _team(_recorder(out, "record_registered"), per_agent=False)
    rt.put_team(team)
    try:
        rt.submit("Order three of A-1.", team.name).result(timeout=90)
    finally:
        rt.delete_team(team.name)
    assert json.loads(out.read_text())["units"] == 3


def test_a_restarted_sandbox_loads_a_shipped_function_from_the_state_store(rt, tmp_path):
    out = tmp_path / "restart.json"
    tool = _recorder(out, "record_restart")
    sandbox = rt.actor("tools/0")
    ray.get(sandbox.put_functions.remote([(tool.name, tool.digest, tool.payload)]))
    ray.get(sandbox.grant.remote("restart-agent", [tool.name], (), {tool.name: tool.digest}))
    kill_and_wait_for_restart(sandbox)  # its memory is gone; the state store is not
    call = ToolCall(call_id="c1", tool=tool.name, arguments={"sku": "B-2"}, task_id="t", step=1)
    result = after_restart(
        lambda: sandbox.call.remote(call, agent="restart-agent", job_id="job-restart")
    )
    assert result.ok, result.error
    assert result.data == "recorded 1 x B-2"
    assert json.loads(out.read_text())["sku"] == "B-2"


def test_a_tenants_team_may_not_name_shipped_functions(rt, tmp_path):
    function = _recorder(tmp_path / "never.json", "record_tenant")
    team = raytroupe.Team(  # nothing else its policy refuses: the default models, no tools
        name="shipped-tenant-team",
        agents=[{"name": "shipped-tenant-agent", "role": "clerk", "tools": [function]}],
    )
    tenant = rt.as_tenant("shipped-tenant")
    with pytest.raises(Forbidden, match="may not name shipped functions") as refused:
        tenant.submit("Order three of A-1.", team)
    assert [p for p in refused.value.detail["problems"] if "functions" in str(p)]
    assert not (tmp_path / "never.json").exists()


def test_a_team_naming_a_digest_no_driver_shipped_fails_its_job_with_a_config_error(rt):
    n = next(_ids)
    spec = TeamSpec(
        name=f"unshipped-{n}",
        planner_model="offline",
        agents=[AgentSpec(name=f"unshipped-{n}", role="clerk", tools=("ghost",))],
        functions={"ghost": "sha256:" + "1" * 64},
    )
    with pytest.raises(raytroupe.JobFailed) as failed:
        rt.submit("Anything.", spec).result(timeout=60)  # a plain spec: nothing is shipped
    error = failed.value.detail["result"].error
    assert error.code == "config"
    assert "was not shipped" in error.message


def test_over_http_even_an_admin_may_not_point_a_team_at_shipped_code(api, tmp_path):
    function = _recorder(tmp_path / "never.json", "record_http")
    team = _team(function, per_agent=False).spec().model_dump(mode="json")
    with api.client(ADMIN_KEY) as admin:
        job = admin.post("/v1/jobs", json={"task": "Order three of A-1.", "team": team})
        put = admin.put(f"/v1/teams/{team['name']}", json=team)
        post = admin.post("/v1/teams", json=team)
        listed = admin.get("/v1/teams").json()
    for refused in (job, put, post):
        assert refused.status_code == 403, refused.text
        assert "may not name shipped functions" in refused.json()["detail"]
    assert team["name"] not in listed
    assert not (tmp_path / "never.json").exists()
