"""raytroupe's teams and skills as A2A agents, driven by the ``a2a-sdk`` client from PyPI.

``/a2a/{target}`` of the Serve app on 127.0.0.1: the card, SendMessage (blocking and at
once), SendStreamingMessage, GetTask, CancelTask, SubscribeToTask; a tool call held for
approval and a graph's interrupt as ``input-required``, answered by a message naming the task;
each key its tenant.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_data_parts,
    get_message_text,
    new_data_part,
    new_text_part,
)
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

from raytroupe import runtime
from raytroupe.protocols import PlannedSubtask, StandardOutput
from tests.support.http_api import OTHER_KEY, SKILL_KEY, USER_KEY, register, wire_team
from tests.support.listener import listening
from tests.support.wire_server import Default, Hold, Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

EXAMPLES = Path(__file__).parents[2] / "examples"
TEAM = "a2a-team"
SLOW = "a2a-slow"
STREAMED = "a2a-streamed"
APPROVE = "a2a-approve"
GRAPH = "a2a-graph"
ANSWER = "Actors keep state between calls; tasks do not. Both scale out on Ray."
T = TypeVar("T")


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture(scope="module")
def teams(api, rt, wire):
    """A plain team, a slow one, one whose answer streams, one with a held tool, a graph."""
    register(api, runtime.Team(
        name=TEAM, description="Answers questions about Ray.",
        agents=[runtime.AgentSpec(name=f"{TEAM}-0", role="worker")],
    ))  # fmt: skip
    register(api, runtime.Team(
        name=SLOW, models={f"{SLOW}-model": runtime.OfflineModel(latency_s=20.0)},
        agents=[runtime.AgentSpec(name=f"{SLOW}-0", role="worker", model=f"{SLOW}-model")],
    ))  # fmt: skip
    aggregator = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="wire-agg")
    register(api, runtime.Team(
        name=STREAMED, planner_model=f"{STREAMED}-aggregator",
        models={f"{STREAMED}-aggregator": aggregator},
        plan=[PlannedSubtask(id="draft", role="worker", instructions="{task}")],
        agents=[runtime.AgentSpec(name=f"{STREAMED}-0", role="worker", model="offline")],
    ))  # fmt: skip
    register(api, wire_team(wire, APPROVE, ["echo"]))
    register(api, runtime.Team.from_dict({
        "name": GRAPH,
        "agents": [{"name": f"{GRAPH}-writer", "role": "writer"}],
        "graph": {
            "start": "write", "answer": "draft",
            "state": {"json_schema": {"type": "object", "properties": {
                "draft": {"type": "string"}, "tone": {"type": "string"}}}},
            "nodes": [{"id": "write", "role": "writer", "writes": ["draft"],
                       "interrupt": "before", "resume_field": "tone",
                       "instructions": "In a {state.tone} tone: {task}"}],
            "edges": [{"source": "write", "target": "end"}],
        },
    }))  # fmt: skip
    rt.put_skill(EXAMPLES / "skills" / "invoice-fields.yaml")


def _run(body: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(body())  # type: ignore[arg-type]


@asynccontextmanager
async def _client(
    api, target: str, key: str | None = USER_KEY, *, streaming: bool = False
) -> AsyncIterator[tuple[AgentCard, Client]]:
    """The agent's card, and an SDK client made from it (a key: its bearer token)."""
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        card = await A2ACardResolver(http, f"{api.url}/a2a/{target}").get_agent_card()
        yield card, ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def _message(*parts, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=list(parts), task_id=task_id,
        context_id=context_id,
    )  # fmt: skip


async def _send(client: Client, message: Message, **configuration: Any) -> list[StreamResponse]:
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(**configuration)
    )
    return [said async for said in client.send_message(request)]


def _task(said: list[StreamResponse]) -> Task:
    (only,) = said
    assert only.HasField("task"), only
    return only.task


def test_a_team_is_an_agent_with_a_card_and_answers_a_message_as_a_task(api, teams):
    async def body():
        async with _client(api, TEAM) as (card, client):
            first = _task(await _send(client, _message(new_text_part("What is a Ray actor?"))))
            again = _task(await _send(client, _message(
                new_text_part("And a Ray task?"), context_id=first.context_id)))  # fmt: skip
            got = await client.get_task(GetTaskRequest(id=first.id))
        return card, first, again, got

    card, first, again, got = _run(body)
    assert card.name == TEAM
    assert card.description == "Answers questions about Ray."
    assert card.supported_interfaces[0].url == f"{api.url}/a2a/{TEAM}"
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert card.capabilities.streaming
    assert card.capabilities.push_notifications
    assert "bearer" in card.security_schemes
    assert [s.id for s in card.skills] == [TEAM]

    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    with api.client(USER_KEY) as http:
        job = http.get(f"/v1/jobs/{first.id}").json()
        turns = http.get(f"/v1/sessions/{first.context_id}").json()["turns"]
    answer = next(a for a in first.artifacts if a.name == "answer")
    assert get_artifact_text(answer) == job["result"]["answer"]
    (output,) = get_data_parts(next(a for a in first.artifacts if a.name == "output").parts)
    assert StandardOutput.model_validate(output).text == job["result"]["answer"]
    assert get_message_text(first.history[0]) == "What is a Ray actor?"
    # one context is one session: the second message is its second turn
    assert again.context_id == first.context_id
    assert [t["job_id"] for t in turns] == [first.id, again.id]
    assert got.id == first.id
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert got.context_id == first.context_id


def test_a_streamed_task_says_its_steps_and_its_answer_as_its_tokens_come(api, teams, wire):
    release = threading.Event()
    wire.reset()
    wire.script(Hold(after_chunks=3, release=release, then=Reply(text=ANSWER)))
    threading.Timer(1.0, release.set).start()

    async def body():
        async with _client(api, STREAMED, streaming=True) as (_, client):
            return await _send(client, _message(new_text_part("Compare actors and tasks.")))

    said = _run(body)
    assert said[0].HasField("task")
    job_id = said[0].task.id
    states = [s.status_update.status.state for s in said if s.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    steps = [get_message_text(s.status_update.status.message) for s in said
             if s.HasField("status_update")]  # fmt: skip
    assert "subtask draft started" in steps
    updates = [s.artifact_update for s in said if s.HasField("artifact_update")]
    chunks = [u for u in updates if u.artifact.name == "answer"]
    assert len(chunks) > 3
    assert not chunks[0].append
    assert all(c.append for c in chunks[1:])
    assert chunks[-1].last_chunk
    assert "".join(get_artifact_text(c.artifact) for c in chunks) == ANSWER
    assert all(s.status_update.task_id == job_id for s in said if s.HasField("status_update"))


def test_a_held_tool_call_is_input_required_and_a_message_approves_it(api, teams, wire):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "deploy v2"}), Default())

    async def body():
        async with _client(api, APPROVE) as (_, client):
            held = _task(await _send(client, _message(new_text_part("Echo the deploy call."))))
            unclear = None
            try:
                await _send(client, _message(new_text_part("hmm"), task_id=held.id))
            except (A2AClientError, A2AError) as exc:
                unclear = exc
            done = _task(await _send(client, _message(
                new_text_part("approve: reviewed"), task_id=held.id)))  # fmt: skip
        return held, unclear, done

    held, unclear, done = _run(body)
    assert held.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    asked = get_message_text(held.status.message)
    assert "echo" in asked
    assert "deploy v2" in asked
    assert "approve" in str(unclear)
    assert done.id == held.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert wire.requests[1].body["messages"][-1]["content"] == "deploy v2"


def test_a_push_config_of_a_waiting_task_pushes_each_change_to_its_url(api, teams, wire):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "ship it"}), Default())

    async def body(url: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with (
            _client(api, APPROVE) as (_, client),
            _client(api, APPROVE, OTHER_KEY) as (_, other),
        ):
            held = _task(await _send(client, _message(new_text_part("Echo the ship call."))))
            config = TaskPushNotificationConfig(
                task_id=held.id, id="ops", url=f"{url}/push", token="tok-ops",  # noqa: S106
                authentication=AuthenticationInfo(scheme="Bearer", credentials="abc"),
            )  # fmt: skip
            seen["made"] = await client.create_task_push_notification_config(config)
            asked = GetTaskPushNotificationConfigRequest(task_id=held.id, id="ops")
            seen["got"] = await client.get_task_push_notification_config(asked)
            listed = ListTaskPushNotificationConfigsRequest(task_id=held.id)
            seen["listed"] = await client.list_task_push_notification_configs(listed)
            inside = TaskPushNotificationConfig(
                task_id=held.id, id="x", url="http://169.254.169.254/latest/"
            )
            for name, attempt in {
                "other get": other.get_task_push_notification_config(asked),
                "other list": other.list_task_push_notification_configs(listed),
                "other create": other.create_task_push_notification_config(config),
                "metadata": client.create_task_push_notification_config(inside),
            }.items():
                try:
                    await attempt
                    seen[name] = None
                except (A2AClientError, A2AError) as exc:
                    seen[name] = str(exc)
            seen["done"] = _task(await _send(client, _message(
                new_text_part("approve"), task_id=held.id)))  # fmt: skip
        return seen

    with listening() as receiver:
        seen = _run(lambda: body(receiver.url))
        deadline = time.monotonic() + 60
        while not any(b'"TASK_STATE_COMPLETED"' in r.body for r in receiver.requests):
            assert time.monotonic() < deadline, receiver.requests
            time.sleep(0.2)
    done = seen["done"]
    assert seen["made"].id == "ops"
    assert seen["made"].url.endswith("/push")
    assert (seen["got"].id, seen["got"].task_id) == ("ops", done.id)
    assert [c.id for c in seen["listed"].configs] == ["ops"]
    assert all(seen[k] is not None for k in ("other get", "other list", "other create"))
    assert "refused" in seen["metadata"]
    pushed = [ParseDict(json.loads(r.body), StreamResponse()) for r in receiver.requests]
    states = [p.status_update.status.state for p in pushed]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert TaskState.TASK_STATE_WORKING in states  # the approval decided
    assert {p.status_update.task_id for p in pushed} == {done.id}
    for request in receiver.requests:
        assert request.path == "/push"
        assert request.headers["x-a2a-notification-token"] == "tok-ops"
        assert request.headers["authorization"] == "Bearer abc"


def test_a_graph_waiting_for_input_takes_the_next_message_as_its_value(api, teams):
    async def body():
        async with _client(api, GRAPH) as (_, client):
            waiting = _task(await _send(client, _message(new_text_part("Greet the team."))))
            done = _task(await _send(client, _message(
                new_data_part("cheerful"), task_id=waiting.id)))  # fmt: skip
        return waiting, done

    waiting, done = _run(body)
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "write" in get_message_text(waiting.status.message)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    with api.client(USER_KEY) as http:
        job = http.get(f"/v1/jobs/{done.id}").json()
    assert job["result"]["state"]["tone"] == "cheerful"


def test_a_task_started_at_once_is_followed_then_cancelled(api, teams):
    async def body():
        async with (
            _client(api, SLOW) as (_, client),
            _client(api, SLOW, streaming=True) as (_, streaming),
        ):
            started = _task(await _send(
                client, _message(new_text_part("Take your time.")), return_immediately=True,
            ))  # fmt: skip
            seen: list[StreamResponse] = []
            updated = asyncio.Event()

            async def follow() -> None:
                async for said in streaming.subscribe(SubscribeToTaskRequest(id=started.id)):
                    seen.append(said)
                    updated.set()

            following = asyncio.create_task(follow())
            await asyncio.wait_for(updated.wait(), 60)  # the task, as it is now
            cancelled = await client.cancel_task(CancelTaskRequest(id=started.id))
            await asyncio.wait_for(following, 60)
            errors = []
            for call in (
                client.cancel_task(CancelTaskRequest(id=started.id)),
                _collect(streaming.subscribe(SubscribeToTaskRequest(id=started.id))),
            ):
                try:
                    await call
                except (A2AClientError, A2AError) as exc:
                    errors.append(str(exc))
        return started, seen, cancelled, errors

    started, seen, cancelled, errors = _run(body)
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert seen[0].task.id == started.id
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert len(errors) == 2
    assert "cannot be canceled" in errors[0] or "already finished" in errors[0]
    assert "ended" in errors[1]


async def _collect(stream) -> list[Any]:
    return [said async for said in stream]


def test_a_skill_takes_its_input_as_a_data_part_checked_by_its_schema(api, teams):
    async def body():
        async with _client(api, "skill:invoice-fields") as (card, client):
            done = _task(await _send(client, _message(
                new_data_part({"text": "Invoice 7: 120 EUR", "currency": "EUR"}))))  # fmt: skip
            try:
                await _send(client, _message(new_data_part({"currency": "euros"})))
            except (A2AClientError, A2AError) as exc:
                return card, done, str(exc)
        return card, done, None

    card, done, refused = _run(body)
    assert card.name == "skill:invoice-fields"
    assert "application/json" in card.default_input_modes
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "text" in str(refused)


def test_other_tenants_tasks_keyless_callers_and_bad_messages_are_refused(api, teams):
    async def body():
        refusals: dict[str, str] = {}
        async with _client(api, TEAM) as (_, client), _client(api, TEAM, OTHER_KEY) as (_, other):
            mine = _task(await _send(client, _message(new_text_part("Mine."))))
            attempts: dict[str, Awaitable[Any]] = {
                "get": other.get_task(GetTaskRequest(id=mine.id)),
                "cancel": other.cancel_task(CancelTaskRequest(id=mine.id)),
                "answer": _send(other, _message(new_text_part("approve"), task_id=mine.id)),
                "empty": _send(client, _message()),
                "data to a team": _send(client, _message(new_data_part({"a": 1}))),
                "finished": _send(client, _message(new_text_part("more"), task_id=mine.id)),
            }
            theirs = _task(await _send(  # the same context id: a session of globex's own
                other, _message(new_text_part("Theirs."), context_id=mine.context_id)))  # fmt: skip
            for name, attempt in attempts.items():
                try:
                    await attempt
                except (A2AClientError, A2AError) as exc:
                    refusals[name] = str(exc)
            async with httpx.AsyncClient(timeout=30) as anonymous:
                card = await anonymous.get(f"{api.url}/a2a/{TEAM}/.well-known/agent-card.json")
                rpc = await anonymous.post(f"{api.url}/a2a/{TEAM}", json={})
            async with httpx.AsyncClient(headers={"X-API-Key": SKILL_KEY}, timeout=30) as skills:
                hidden = await skills.get(f"{api.url}/a2a/{TEAM}/.well-known/agent-card.json")
        return mine, theirs, refusals, card, rpc, hidden

    mine, theirs, refusals, card, rpc, hidden = _run(body)
    assert set(refusals) == {"get", "cancel", "answer", "empty", "data to a team", "finished"}
    for name in ("get", "cancel", "answer"):
        assert refusals[name] == f"no job {mine.id!r}"  # as if there were none
    assert "no text part" in refusals["empty"]
    assert "only a skill" in refusals["data to a team"]
    assert "waits for no input" in refusals["finished"]
    assert (card.status_code, rpc.status_code) == (401, 401)
    assert hidden.status_code in (403, 404), hidden.text
    with api.client(USER_KEY) as http:
        assert http.get(f"/v1/jobs/{mine.id}").json()["status"] == "succeeded"
        turns = http.get(f"/v1/sessions/{mine.context_id}").json()["turns"]
        assert [t["job_id"] for t in turns] == [mine.id]
    with api.client(OTHER_KEY) as http:
        turns = http.get(f"/v1/sessions/{mine.context_id}").json()["turns"]
        assert [t["job_id"] for t in turns] == [theirs.id]
