"""AG-UI streams of real jobs on the Serve app, decoded with the ``ag-ui-protocol`` models.

``POST /v1/ag-ui/{target}`` runs a thread's last user message; ``GET /v1/jobs/{id}/ag-ui``
follows a job. Every ``data:`` line of the stream must be one of AG-UI's events.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from raytroupe import runtime
from raytroupe.protocols import Budget, PlannedSubtask, ToolCall
from tests.support.http_api import OTHER_KEY, USER_KEY, register
from tests.support.wire_server import Hold, Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

EXAMPLES = Path(__file__).parents[2] / "examples"
EVENTS = TypeAdapter(Event)
TOOLS = "ag-ui-tools"
STREAMED = "ag-ui-streamed"
ANSWER = "Ray actors keep state between calls; Ray tasks are stateless. Both scale out."


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture(scope="module")
def teams(api, rt, wire):
    """A team whose agent uses the calculator, one whose answer streams, a graph team."""
    call = ToolCall(call_id="c1", tool="calculator", arguments={"expression": "17 * 23 + 4"})
    turns = (runtime.ScriptedTurn(tool_calls=(call,)), runtime.ScriptedTurn(text="It is 395."))
    register(api, runtime.Team(
        name=TOOLS,
        models={f"{TOOLS}-model": runtime.ScriptedModel(turns=turns * 8)},
        agents=[runtime.AgentSpec(name=f"{TOOLS}-0", role="worker", model=f"{TOOLS}-model",
                                  tools=["calculator"])],
    ))  # fmt: skip
    aggregator = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="wire-agg")
    register(api, runtime.Team(
        name=STREAMED, planner_model=f"{STREAMED}-aggregator",
        models={f"{STREAMED}-aggregator": aggregator},
        plan=[PlannedSubtask(id="draft", role="worker", instructions="{task}")],
        agents=[runtime.AgentSpec(name=f"{STREAMED}-0", role="worker", model="offline")],
    ))  # fmt: skip
    rt.put_team(runtime.Team.from_yaml(EXAMPLES / "teams" / "review_loop.yaml").spec())


def _events(response: httpx.Response) -> list[Any]:
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    return [EVENTS.validate_python(json.loads(line.removeprefix("data: "))) for line in lines]


def _run(api, target: str, text: str, thread: str | None = None, key: str = USER_KEY):
    body = {
        "threadId": thread or uuid.uuid4().hex, "runId": uuid.uuid4().hex, "state": {},
        "messages": [{"id": "m1", "role": "user", "content": text}], "tools": [], "context": [],
        "forwardedProps": {},
    }  # fmt: skip
    with api.client(key) as http, http.stream("POST", f"/v1/ag-ui/{target}", json=body) as answer:
        assert answer.status_code == 200, answer.read()
        return body, _events(answer)


def _types(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


def test_a_run_streams_its_steps_tool_calls_answer_and_end_as_ag_ui_events(api, teams, rt):
    body, events = _run(api, TOOLS, "How many requests are 17 * 23 + 4 requests?")
    types = _types(events)
    assert types[0] == "RUN_STARTED"
    assert (events[0].thread_id, events[0].run_id) == (body["threadId"], body["runId"])
    assert types[-1] == "RUN_FINISHED"
    job_id = events[1].value["job_id"]
    result = rt.job(job_id).result(timeout=60)
    assert events[-1].result["team"] == TOOLS
    assert events[-1].outcome.type == "success"
    start = types.index("TOOL_CALL_START")
    assert types[start : start + 4] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
                                        "TOOL_CALL_RESULT"]  # fmt: skip
    assert events[start].tool_call_name == "calculator"
    assert json.loads(events[start + 1].delta) == {"expression": "17 * 23 + 4"}
    assert "395" in events[start + 3].content
    assert types.index("STEP_STARTED") < start < types.index("STEP_FINISHED")
    text = "".join(e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT)
    assert text == result.answer
    assert types.index("TEXT_MESSAGE_START") < types.index("TEXT_MESSAGE_END") < len(types) - 1
    # the thread is the caller's session: the run is its turn
    with api.client(USER_KEY) as http:
        turns = http.get(f"/v1/sessions/{body['threadId']}").json()["turns"]
    assert [t["job_id"] for t in turns] == [job_id]


def test_the_answer_streams_as_its_tokens_come(api, teams, wire):
    release = threading.Event()
    wire.reset()
    wire.script(Hold(after_chunks=3, release=release, then=Reply(text=ANSWER)))
    threading.Timer(1.0, release.set).start()  # the rest of the stream once the first is out
    _, events = _run(api, STREAMED, "Compare Ray actors and Ray tasks.")
    pieces = [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT]
    assert len(pieces) > 3
    assert "".join(pieces) == ANSWER


def test_a_graph_job_streams_its_state_in_full_then_as_changes(api, teams):
    """The snapshot with every delta applied in order is the graph's last state."""
    _, events = _run(api, "review-loop", "Write one sentence about Ray actors.")
    assert _types(events)[-1] == "RUN_FINISHED", events[-1]
    states = [e for e in events if e.type in (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)]
    assert states[0].type is EventType.STATE_SNAPSHOT
    state = dict(states[0].snapshot)
    assert "draft" in state
    ops = [op.model_dump(by_alias=True) for e in states[1:] for op in e.delta]
    assert ops, [(e.type.value, getattr(e, "name", None)) for e in events]
    for op in ops:
        key = op["path"].removeprefix("/").replace("~1", "/").replace("~0", "~")
        if op["op"] == "remove":
            del state[key]
        else:
            assert op["op"] in {"add", "replace"}, op
            state[key] = op["value"]
    job_id = events[1].value["job_id"]
    with api.client(USER_KEY) as http:
        points = http.get(f"/v1/jobs/{job_id}/checkpoints").json()
    last = max((p for p in points if not p["namespace"]), key=lambda p: p["step"])
    assert state == last["state"]


def test_a_failed_job_ends_in_run_error_with_its_code(api, teams, rt):
    job = rt.submit("How many requests are 17 * 23 + 4 requests?", team=TOOLS, tenant="acme",
                    budget=Budget(tokens=1))  # fmt: skip
    with api.client(USER_KEY) as http, http.stream("GET", f"/v1/jobs/{job.job_id}/ag-ui") as s:
        assert s.status_code == 200
        events = _events(s)
    assert _types(events)[0] == "RUN_STARTED"
    assert events[-1].type is EventType.RUN_ERROR
    assert events[-1].code == "budget_exceeded"


def test_another_tenants_job_unknown_targets_and_keyless_callers_get_no_stream(api, teams, rt):
    _, events = _run(api, TOOLS, "How many requests are 17 * 23 + 4 requests?")
    job_id = events[1].value["job_id"]
    with api.client(OTHER_KEY) as other:
        assert other.get(f"/v1/jobs/{job_id}/ag-ui").status_code == 404
    said = [{"id": "m", "role": "user", "content": "hi"}]
    body = {"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": said}  # fmt: skip
    with api.client(USER_KEY) as user:
        assert user.post("/v1/ag-ui/no-such-team", json=body).status_code == 404
        empty = {**body, "messages": [{"id": "m", "role": "assistant", "content": "hi"}]}
        refused = user.post(f"/v1/ag-ui/{TOOLS}", json=empty)
        assert refused.status_code == 422
        assert refused.json()["field"] == "messages"
    with api.client(None) as anonymous:
        assert anonymous.post(f"/v1/ag-ui/{TOOLS}", json=body).status_code == 401
        assert anonymous.get(f"/v1/jobs/{job_id}/ag-ui").status_code == 401
