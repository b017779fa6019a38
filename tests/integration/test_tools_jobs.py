"""Tools on a real Ray: an agent uses an MCP tool and the isolated python tool in one job."""

from __future__ import annotations

import time
import uuid

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import ErrorCode, ToolCall
from tests.support.ledger import TOOL_NAME, runs_by_token
from tests.support.restarts import after_restart
from tests.support.wire_model import ToolCall as WireCall
from tests.support.wire_server import Default, Reply, WireServer


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


def _team(server, name, tools):
    model = runtime.OpenAICompatibleModel(base_url=server.base_url_openai, model="wire-tools")
    return runtime.Team(
        name=name,
        planner_model="offline",
        models={f"{name}-model": model},
        agents=[runtime.AgentSpec(name=f"{name}-agent", role="worker",
                                  model=f"{name}-model", tools=tools)],
    )  # fmt: skip


def test_an_agent_uses_an_mcp_tool_and_isolated_python(rt, wire):
    wire.reset()
    wire.script(
        Reply.tool("add", {"a": 2, "b": 3}),
        Reply.tool("python", {"code": "import os\nprint(6 * 7, os.getuid())"}),
        Default(),  # answers "done: <the tool results>"
    )
    team = _team(wire, "toolsmith", ["add", "python"])
    result = rt.submit("Add two and three, then multiply six by seven.", team=team).result(
        timeout=90
    )

    (sub,) = result.subtasks
    assert sub.tool_calls == 2
    assert sub.status == "succeeded"
    sent = [r.body["messages"][-1] for r in wire.requests]
    assert sent[1]["role"] == "tool"
    assert sent[1]["content"] == "5"  # the MCP server's answer reached the model
    python_result = sent[2]["content"]
    assert '"stdout": "42 65534\\n"' in python_result  # ran, unprivileged, in the sandbox
    assert '"exit_code": 0' in python_result
    assert sub.output.startswith("done: ")


def test_a_tool_outside_the_allow_list_is_refused_even_when_the_model_insists(rt, wire):
    wire.reset()
    wire.script(
        Reply.tool("python", {"code": "print('pwned')"}),  # the agent was not given python
        Default(),
    )
    team = _team(wire, "restricted", ["add"])
    result = rt.submit("Do something.", team=team).result(timeout=60)

    (sub,) = result.subtasks
    refusal = wire.requests[1].body["messages"][-1]["content"]
    assert refusal.startswith("ERROR: tool 'python' is not allowed for agent 'restricted-agent'")
    assert "pwned" not in refusal
    assert sub.status == "succeeded"


def test_an_unknown_tool_in_a_team_fails_the_job_with_a_config_error(rt, wire):
    team = _team(wire, "misconfigured", ["teleport"])
    with pytest.raises(runtime.JobFailed) as info:
        rt.submit("Go.", team=team).result(timeout=60)
    assert info.value.detail["result"].error.code is ErrorCode.CONFIG


def test_a_side_effect_is_not_repeated_after_the_sandbox_actor_is_killed(rt):
    sandbox = rt.actor("tools/0")
    ray.get(sandbox.grant.remote("killer-agent", ["file_write"]))
    write = ToolCall(call_id="first", tool="file_write", task_id="t1", step=7,
                     arguments={"path": "out.txt", "content": "once"})  # fmt: skip
    first = ray.get(sandbox.call.remote(write, agent="killer-agent", job_id="job-kill"))
    assert first.ok
    assert "replayed" not in first.metadata

    ray.kill(sandbox, no_restart=False)
    retried = write.model_copy(update={"call_id": "second"})  # a new model call id
    again = after_restart(
        lambda: sandbox.call.remote(retried, agent="killer-agent", job_id="job-kill")
    )
    assert again.ok
    assert again.metadata["replayed"] is True
    assert again.call_id == "second"


def test_a_tool_needing_approval_waits_for_a_human_on_ray(rt, wire):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "ship it"}), Default())
    job = rt.submit("Echo the release call.", team=_team(wire, "approver", ["echo"]))
    requested = None
    for event in job.events(timeout=60):
        if event.type == "approval_requested":
            requested = event
            break
    assert requested is not None
    assert job.status() == "awaiting_approval"
    (pending,) = job.approvals()
    assert (pending.tool, pending.arguments) == ("echo", {"text": "ship it"})
    assert wire.request_count == 1  # the model waits with the tool call held

    assert job.approve(pending.approval_id) is True
    result = job.result(timeout=60)

    assert result.status == "succeeded"
    assert wire.requests[1].body["messages"][-1]["content"] == "ship it"
    assert job.approve(pending.approval_id) is False


def test_a_call_runs_while_another_of_its_turn_waits_for_approval_on_ray(rt, wire, tmp_path):
    ledger, token = tmp_path / "effects.log", f"tok-{uuid.uuid4().hex[:8]}"
    wire.reset()
    wire.script(
        Reply(tool_calls=(WireCall("echo", {"text": "ship it"}),
                          WireCall(TOOL_NAME, {"ledger": str(ledger), "token": token}))),
        Default(),
    )  # fmt: skip
    team = _team(wire, "approver-at-once", ["echo", TOOL_NAME])
    job = rt.submit("Echo the release call and record it.", team=team)
    assert any(event.type == "approval_requested" for event in job.events(timeout=60))
    waited = time.monotonic() + 60  # only a failing test waits this out
    while not runs_by_token(ledger) and time.monotonic() < waited:
        time.sleep(0.1)

    assert runs_by_token(ledger) == {token: 1}  # it ran beside the held call
    assert job.status() == "awaiting_approval"
    (pending,) = job.approvals()
    assert pending.tool == "echo"
    assert wire.request_count == 1
    assert job.approve(pending.approval_id) is True
    result = job.result(timeout=60)

    assert result.status == "succeeded"
    shown = [m["content"] for m in wire.requests[1].body["messages"] if m["role"] == "tool"]
    assert shown == ["ship it", f"recorded {token}"]  # in the order the model asked
    assert runs_by_token(ledger) == {token: 1}
