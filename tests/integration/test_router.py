"""The router actor on a real Ray: named actors, dead letters, typed errors for bad bytes."""

from __future__ import annotations

import asyncio
import time

import msgpack
import pytest
import ray
from ray.util.state import list_actors

from raytroupe import runtime
from raytroupe.actors.router_handles import RayRouterClient
from raytroupe.protocols import (
    LLM_POOL,
    AgentMessage,
    ErrorCode,
    ErrorPayload,
    Event,
    LLMRequest,
    LLMResponse,
    MalformedEnvelope,
    UnsupportedSchemaVersion,
    decode,
    encode,
)
from tests.support.inline import agent_actor, agent_name


def _request(rt, message: AgentMessage) -> AgentMessage:
    return decode(ray.get(rt.actor("router/0").request.remote(encode(message))))


def _letter(rt, message_id: str):
    return next((d for d in rt.dead_letters(limit=1000) if d.message_id == message_id), None)


def test_named_actors_are_listed_in_the_troupe_namespace(rt):
    team = runtime.Team(agents=[runtime.AgentSpec(name="lister", role="listing")])
    rt.submit("- one\n- two", team=team).result(timeout=60)

    alive = {
        a.name
        for a in list_actors(
            address="http://" + ray._private.worker.global_worker.node.address_info["webui_url"],
            filters=[("ray_namespace", "=", "troupe"), ("state", "=", "ALIVE")],
            limit=10_000,  # the default (100) cuts the list once the session has more actors
            raise_on_missing_output=False,
        )
    }
    assert {
        "router/0",
        "router/1",
        "llm/0",
        "desk",
        "orchestrator/0",
        "orchestrator/1",
        agent_actor("lister"),
    } <= alive


def test_unknown_recipient_is_dead_lettered_with_its_reason(rt):
    message = AgentMessage(sender="driver", recipient="nobody-here", payload=Event(name="ping"))
    reply = _request(rt, message)

    assert reply.correlation_id == message.id
    assert isinstance(reply.payload, ErrorPayload)
    assert reply.payload.code is ErrorCode.UNKNOWN_RECIPIENT
    letter = _letter(rt, message.id)
    assert letter is not None
    assert letter.reason is ErrorCode.UNKNOWN_RECIPIENT
    assert "nobody-here" in letter.detail
    assert letter.message == message


def test_unknown_role_is_dead_lettered(rt):
    message = AgentMessage(sender="driver", recipient="role:nobody", payload=Event(name="ping"))
    assert ray.get(rt.actor("router/0").send.remote(encode(message))) == "dead_lettered"
    letter = _letter(rt, message.id)
    assert letter is not None
    assert letter.reason is ErrorCode.UNKNOWN_RECIPIENT


def test_expired_deadline_is_dead_lettered(rt):
    message = AgentMessage(
        sender="driver", recipient=LLM_POOL, deadline=time.time() - 1, payload=Event(name="late")
    )
    reply = _request(rt, message)

    assert reply.payload.code is ErrorCode.DEADLINE_EXCEEDED
    assert reply.payload.retryable is True
    assert _letter(rt, message.id).reason is ErrorCode.DEADLINE_EXCEEDED


def test_dead_recipient_is_dead_lettered_as_unavailable(rt):
    team = runtime.Team(agents=[runtime.AgentSpec(name="doomed", role="doomed-role")])
    rt.submit("- a\n- b", team=team).result(timeout=60)
    ray.kill(rt.actor(agent_actor("doomed")), no_restart=True)

    doomed = agent_name("doomed")  # an inline agent of the driver's tenant
    message = AgentMessage(sender="driver", recipient=doomed, payload=Event(name="hello"))
    reply = _request(rt, message)

    assert reply.payload.code is ErrorCode.RECIPIENT_UNAVAILABLE
    assert reply.payload.retryable is True
    assert _letter(rt, message.id).reason is ErrorCode.RECIPIENT_UNAVAILABLE
    ray.get([shard.unregister.remote(doomed) for shard in rt.client.handles.routers.handles])


def test_malformed_bytes_raise_the_typed_error_and_are_kept(rt):
    router = rt.actor("router/0")
    garbage = b"\x93not an envelope"
    with pytest.raises(MalformedEnvelope):
        ray.get(router.request.remote(garbage))
    with pytest.raises(MalformedEnvelope):
        ray.get(router.send.remote(b""))

    letters = [d for d in rt.dead_letters(limit=1000) if d.raw == garbage]
    assert letters
    assert letters[-1].reason is ErrorCode.MALFORMED_ENVELOPE
    assert letters[-1].message is None


def test_unknown_schema_version_is_a_typed_error(rt):
    data = msgpack.packb({"v": 99, "m": {}})
    with pytest.raises(UnsupportedSchemaVersion) as info:
        ray.get(rt.actor("router/0").request.remote(data))
    assert info.value.detail["version"] == 99


def test_duplicate_request_runs_once_and_gets_the_same_reply(rt):
    asked = AgentMessage(
        sender="driver",
        recipient=LLM_POOL,
        payload=LLMRequest(
            model="offline",
            messages=[{"role": "user", "content": "Ray is fast. What is Ray?"}],
            purpose="chat",
        ),
    )
    before = rt.router_stats().duplicates
    first, second = ray.get([rt.actor("router/0").request.remote(encode(asked)) for _ in range(2)])

    assert first == second
    assert isinstance(decode(first).payload, LLMResponse)
    assert rt.router_stats().duplicates == before + 1


def test_router_client_from_the_driver(rt):
    """The same client agents use works from any process holding the router handle."""
    client = RayRouterClient(rt.actor("router/0"))
    message = AgentMessage(
        sender="driver",
        recipient=LLM_POOL,
        payload=LLMRequest(
            model="offline",
            purpose="plan",
            messages=[{"role": "user", "content": "- first\n- second\n- third"}],
        ),
    )
    reply = asyncio.run(client.request(message))
    assert reply.payload.provider == "offline"
    assert '"instructions": "third"' in reply.payload.text
