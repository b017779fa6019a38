"""Spans reach a collector: OTLP/HTTP on 127.0.0.1, live, from every actor, in one tree.

The session's Ray was started without OpenTelemetry variables, so this test's Ray runs in a
child process of its own (tests/support/otel_child.py), which sets them only after its Ray
started: the actors and the HTTP replica get them from raytroupe, as documented. The child's
receiver stands for the collector; this test checks what it received.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.inline import agent_name

pytestmark = pytest.mark.system  # system tier: a Ray of its own in a child process

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def received() -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.otel_child"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _trace(received: dict, trace_id: str) -> list[dict]:
    return [s for s in received["spans"] if s["trace_id"] == trace_id]


def _one(spans: list[dict], name: str) -> dict:
    (span,) = [s for s in spans if s["name"] == name]
    return span


def test_an_http_callers_trace_is_continued_and_the_job_is_one_tree(received):
    caller = received["caller"]
    spans = _trace(received, caller["trace_id"])  # the caller's trace id, continued
    by_id = {s["span_id"]: s for s in spans}
    assert len(by_id) == len(spans)
    for span in spans:  # every span hangs below the caller's, through spans that arrived
        seen = span
        while seen["parent_span_id"] != caller["span_id"]:
            seen = by_id[seen["parent_span_id"]]

    def parent(span: dict) -> dict:
        return by_id[span["parent_span_id"]]

    root = _one(spans, "job traced")
    # the application traces its requests: the caller's child is the request's server span,
    # and the job's root hangs below it (below FastAPI's span of the endpoint)
    above = [parent(root)]
    while above[-1]["parent_span_id"] != caller["span_id"]:
        above.append(parent(above[-1]))
    request = above[-1]
    assert (request["name"], request["kind"]) == ("POST /v1/jobs", "server")
    assert request["attributes"]["http.response.status_code"] == 202
    assert {s["resource"]["raytroupe.process"] for s in above} == {"TroupeAPI"}
    assert root["attributes"]["raytroupe.job.id"] == received["http"]["job_id"]
    assert root["attributes"]["raytroupe.job.status"] == "succeeded"
    assert received["http"]["status"] == "succeeded"

    plan = _one(spans, "plan")
    (subtask,) = [s for s in spans if s["name"].startswith("subtask ")]
    agent = _one(spans, "invoke_agent counter")
    tool = _one(spans, "execute_tool calculator")
    chats = [s for s in spans if s["name"] == "chat traced-worker"]
    assert parent(plan) is root
    assert parent(subtask) is root
    assert parent(agent) is subtask
    assert parent(tool) is agent
    assert len(chats) == 2
    assert all(parent(chat) is agent for chat in chats)
    assert parent(_one(spans, "aggregate")) is root
    for span in spans:  # the job's work, in every actor, below its root
        if span["resource"]["raytroupe.process"] != "TroupeAPI":
            seen = span
            while seen is not root:
                seen = parent(seen)


def test_spans_come_from_each_actors_own_process(received):
    spans = _trace(received, received["caller"]["trace_id"])
    processes = {s["resource"]["raytroupe.process"]: s["resource"]["process.pid"] for s in spans}
    assert {"Orchestrator", "AgentActor", "LLMAdapterPool"} <= set(processes)
    assert len(set(processes.values())) == len(processes)  # each in a process of its own
    assert len({s["resource"]["process.pid"] for s in spans}) >= 3
    for span in spans:
        assert span["resource"]["service.name"] == "raytroupe-test"  # OTEL_SERVICE_NAME
        assert span["resource"]["deployment.environment"] == "test"  # OTEL_RESOURCE_ATTRIBUTES
    owner = {s["name"]: s["resource"]["raytroupe.process"] for s in spans}
    assert owner["job traced"] == owner["plan"] == "Orchestrator"
    assert owner["invoke_agent counter"] == owner["execute_tool calculator"] == "AgentActor"
    assert owner["chat traced-worker"] == "LLMAdapterPool"


def test_model_tool_and_agent_spans_speak_gen_ai(received):
    spans = _trace(received, received["caller"]["trace_id"])
    chats = sorted(
        (s for s in spans if s["name"] == "chat traced-worker"), key=lambda s: s["start_ns"]
    )
    for chat in chats:
        attributes = chat["attributes"]
        assert chat["kind"] == "client"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        assert attributes["gen_ai.request.model"] == "traced-worker"
        assert attributes["gen_ai.response.model"] == "traced-worker"
        assert attributes["raytroupe.job.id"] == received["http"]["job_id"]
    usage = [
        (
            c["attributes"]["gen_ai.usage.input_tokens"],
            c["attributes"]["gen_ai.usage.output_tokens"],
        )
        for c in chats
    ]
    assert usage == [(31, 7), (45, 4)]  # as the scripted provider reported them
    finishes = [c["attributes"]["gen_ai.response.finish_reasons"] for c in chats]
    assert finishes == [["tool_calls"], ["stop"]]
    tool = _one(spans, "execute_tool calculator")["attributes"]
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.name"] == "calculator"
    assert tool["gen_ai.tool.call.id"] == received["tool_call_id"]
    agent = _one(spans, "invoke_agent counter")["attributes"]
    assert agent["gen_ai.operation.name"] == "invoke_agent"
    assert agent["gen_ai.agent.name"] == "counter"
    assert (agent["gen_ai.usage.input_tokens"], agent["gen_ai.usage.output_tokens"]) == (76, 11)
    root = _one(spans, "job traced")["attributes"]
    assert root["gen_ai.operation.name"] == "invoke_workflow"
    assert root["gen_ai.usage.input_tokens"] >= 76


def test_spans_arrive_while_the_job_runs(received):
    http = received["http"]
    # the approval was given only after the model call's span had arrived; the job could
    # not end before it: so that span reached the collector while the job was running
    assert http["first_chat_received_at"] is not None
    assert http["first_chat_received_at"] <= http["approved_at"] < http["result_at"]
    spans = _trace(received, received["caller"]["trace_id"])
    first_chat = min(
        (s for s in spans if s["name"] == "chat traced-worker"), key=lambda s: s["received_at"]
    )
    root = _one(spans, "job traced")
    assert first_chat["received_at"] < root["received_at"]
    assert first_chat["end_ns"] < root["end_ns"]


def test_a_drivers_own_span_is_continued(received):
    driver = received["driver"]
    assert driver["status"] == "succeeded"
    spans = _trace(received, driver["trace_id"])
    # the driver's inline team: exported spans name its actors (scoped to its tenant)
    root = _one(spans, f"job {agent_name('driven')}")
    assert root["parent_span_id"] == driver["span_id"]
    assert root["attributes"]["raytroupe.job.id"] == driver["job_id"]
    assert _one(spans, f"invoke_agent {agent_name('writer')}")


def test_no_secret_and_no_content_is_sent(received):
    shown = json.dumps(received["spans"])
    for secret in received["secrets"]:
        assert secret not in shown
    assert "six times seven" not in shown  # the task
    assert "6 * 7" not in shown  # the tool's arguments
    assert "It is 42" not in shown  # the answer
    assert not received["refused"]  # every export was a well-formed OTLP/HTTP request
    servers = {
        s["resource"]["raytroupe.process"] for s in received["spans"] if s["kind"] == "server"
    }
    assert servers == {"TroupeAPI"}  # the actors' spans are internal, or client (model calls)
