"""raytroupe as an MCP server, driven by the official ``mcp`` client.

Over streamable HTTP (``/mcp`` of the Serve app on 127.0.0.1, each key its tenant) in both
of the client's modes (the initialize handshake, and the 2026-07-28 per-request exchange), and
over stdio (``troupe mcp``, a child process joining the session's Ray).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import ray
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from raytroupe import runtime
from raytroupe.protocols import StandardOutput
from tests.support.http_api import BLUE_KEY, OTHER_KEY, SKILL_KEY, USER_KEY

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

EXAMPLES = Path(__file__).parents[2] / "examples"
TEAM = "mcp-team"
SLOW = "mcp-slow"
LATENCY_S = 30.0  # longer than a cancel takes to arrive on a loaded machine
MODES = ["legacy", "auto"]


@pytest.fixture(scope="module")
def registered(rt, api):
    """Two teams (one with a slow model) and two skills, registered by the operator."""
    rt.put_team(
        runtime.Team(
            name=TEAM, description="Answers listed questions, one agent per question.",
            agents=[runtime.AgentSpec(name=f"{TEAM}-{n}", role="worker") for n in range(2)],
        ).spec()
    )  # fmt: skip
    rt.put_team(
        runtime.Team(
            name=SLOW,
            models={"mcp-slow-model": runtime.OfflineModel(latency_s=LATENCY_S)},
            agents=[runtime.AgentSpec(name=f"{SLOW}-0", role="worker", model="mcp-slow-model")],
        ).spec()
    )
    for name in ("sentiment.yaml", "invoice-fields.yaml"):
        rt.put_skill(EXAMPLES / "skills" / name)


def _client(api: Any, key: str | None, mode: str = "auto") -> Client:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(f"{api.url}/mcp", http_client=http), mode=mode)


def _run(body: Any) -> Any:
    return anyio.run(body)


@pytest.mark.parametrize("mode", MODES)
def test_the_teams_and_skills_a_key_may_run_are_its_tools(api, registered, mode):
    async def body() -> tuple[dict[str, Any], set[str], set[str]]:
        async with _client(api, USER_KEY, mode) as user:
            tools = {t.name: t for t in (await user.list_tools()).tools}
        async with _client(api, BLUE_KEY, mode) as blue:  # its policy: one other team
            blues = {t.name for t in (await blue.list_tools()).tools}
        async with _client(api, SKILL_KEY, mode) as skillful:  # two skills, no team
            skills = {t.name for t in (await skillful.list_tools()).tools}
        return tools, blues, skills

    tools, blues, skills = _run(body)
    team = tools[f"team_{TEAM}"]
    assert team.description == "Answers listed questions, one agent per question."
    assert team.input_schema["required"] == ["task"]
    assert team.output_schema == StandardOutput.model_json_schema()
    invoice = tools["skill_invoice-fields"]
    assert invoice.input_schema["required"] == ["text"]  # the skill's own input_schema
    assert tools["skill_sentiment"].input_schema["required"] == ["task"]
    assert f"team_{TEAM}" not in blues
    assert "skill_sentiment" in skills
    assert not {n for n in skills if n.startswith("team_")}


@pytest.mark.parametrize("mode", MODES)
def test_a_call_runs_a_job_reports_its_progress_and_answers_its_output_envelope(
    api, registered, rt, mode
):
    steps: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append((done, total, message))

    async def body() -> tuple[Any, Any, Any]:
        async with _client(api, USER_KEY, mode) as user:
            called = await user.call_tool(
                f"team_{TEAM}", {"task": "Questions:\n1. Name one colour.\n2. Name one fruit."},
                progress_callback=progress,
            )  # fmt: skip
            job_id = (called.meta or {})["raytroupe/job_id"]
            result = await user.read_resource(f"troupe://jobs/{job_id}/result")
            trace = await user.read_resource(f"troupe://jobs/{job_id}/trace")
        return called, result, trace

    called, result, trace = _run(body)
    assert not called.is_error, called.content
    output = StandardOutput.model_validate(called.structured_content)
    assert output.team == TEAM
    assert called.content[0].text == output.text
    job_id = called.meta["raytroupe/job_id"]
    view = json.loads(result.contents[0].text)
    assert (view["id"], view["status"]) == (job_id, "succeeded")
    done = rt.job(job_id).result(timeout=60)
    assert view["result"]["answer"] == output.text == done.answer
    assert json.loads(trace.contents[0].text)["spans"]
    said = [message for _, _, message in steps]
    assert "plan ready" in said, said
    assert said.count("subtask finished: s1") == 1, said
    assert steps[-1][0] == steps[-1][1] == len(done.subtasks) == 2, steps  # both, of two


def test_a_skill_tool_takes_the_skills_input_and_bad_input_is_a_tool_error(api, registered):
    async def body() -> tuple[Any, Any]:
        async with _client(api, USER_KEY) as user:
            good = await user.call_tool(
                "skill_invoice-fields", {"text": "Invoice 7: 12.50 EUR due 2026-12-31."}
            )
            bad = await user.call_tool("skill_invoice-fields", {"text": ""})
        return good, bad

    good, bad = _run(body)
    assert not good.is_error, good.content
    assert StandardOutput.model_validate(good.structured_content).skill == "invoice-fields"
    assert bad.is_error, bad.content
    assert "invalid_input" in bad.content[0].text, bad.content


def test_a_caller_reaches_no_other_tenants_tools_or_jobs(api, registered):
    async def refused(client: Client, name: str, arguments: dict[str, Any]) -> str:
        with pytest.raises(MCPError) as error:
            await client.call_tool(name, arguments)
        return error.value.message

    async def body() -> list[str]:
        said: list[str] = []
        async with _client(api, USER_KEY) as user:
            called = await user.call_tool(f"team_{TEAM}", {"task": "- one colour."})
            # an argument the tool does not take (a team of the caller's choosing) is refused
            said.append(await refused(user, f"team_{TEAM}", {"task": "x", "team": "other"}))
        async with _client(api, BLUE_KEY) as blue:  # its policy leaves the team out
            said.append(await refused(blue, f"team_{TEAM}", {"task": "x"}))
            said.append(await refused(blue, "team_nope", {"task": "x"}))
        async with _client(api, OTHER_KEY) as other:  # another tenant reads the job
            job_id = (called.meta or {})["raytroupe/job_id"]
            for part in ("result", "trace"):
                with pytest.raises(MCPError) as error:
                    await other.read_resource(f"troupe://jobs/{job_id}/{part}")
                said.append(error.value.message)
        return said

    said = _run(body)
    assert said[:3] == [
        f"team_{TEAM} takes one argument, 'task' (a string)",
        f"no tool 'team_{TEAM}' for this caller",
        "no tool 'team_nope' for this caller",
    ]
    assert all(s.startswith("job_not_found: no job") for s in said[3:]), said


def test_a_request_without_a_valid_key_is_refused_before_the_server(api):
    async def body() -> None:
        async with _client(api, None) as anonymous:
            await anonymous.list_tools()

    with pytest.raises(BaseExceptionGroup) as refused:  # the client could not connect
        _run(body)
    assert refused.group_contains(MCPError)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer rt-not-a-key"}):
        answer = httpx.post(f"{api.url}/mcp", json=listing, headers=headers)
        assert answer.status_code == 401, answer.text
        assert answer.json()["code"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"] == 'Bearer realm="raytroupe"'


def _slow_jobs(rt, job_ids: set[str]) -> list[str]:
    """The jobs among ``job_ids`` that run the slow team."""
    return [j for j in job_ids if rt.summary(j).team == SLOW]


def test_a_cancelled_call_cancels_its_job(api, registered, rt):
    before = set(rt.jobs())

    async def body() -> str:
        async with _client(api, USER_KEY) as user, anyio.create_task_group() as calls:
            calls.start_soon(user.call_tool, f"team_{SLOW}", {"task": "- take your time."})
            deadline = time.monotonic() + 120
            while not (started := _slow_jobs(rt, set(rt.jobs()) - before)):
                assert time.monotonic() < deadline, "the job never started"
                await anyio.sleep(0.2)
            calls.cancel_scope.cancel()
        (job_id,) = started  # this call's: another test's job may start meanwhile
        return job_id

    job_id = _run(body)
    deadline = time.monotonic() + 120
    while rt.job(job_id).status() != "cancelled":  # the job ends when its agents stop
        assert time.monotonic() < deadline, rt.job(job_id).status()
        time.sleep(0.2)


def test_troupe_mcp_serves_the_same_tools_over_stdio(rt, registered, tmp_path):
    troupe = Path(sys.executable).with_name("troupe")
    env = {**os.environ, "TROUPE_STATE_DIR": str(tmp_path)}
    params = StdioServerParameters(
        command=str(troupe),
        env=env,
        args=["mcp", "--address", ray.get_runtime_context().gcs_address, "--tenant", "acme"],
    )

    async def body() -> tuple[set[str], Any]:
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            called = await client.call_tool(f"team_{TEAM}", {"task": "- name one colour."})
        return tools, called

    tools, called = _run(body)
    assert {f"team_{TEAM}", "skill_sentiment"} <= tools
    assert not called.is_error, called.content
    assert StandardOutput.model_validate(called.structured_content).team == TEAM
