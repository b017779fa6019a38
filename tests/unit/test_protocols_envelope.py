import re
import time
import typing

import pytest
from pydantic import ValidationError

from raytroupe.protocols import (
    AgentMessage,
    ErrorCode,
    ErrorPayload,
    Event,
    Payload,
    TaskRequest,
    ToolError,
    TraceContext,
    new_id,
)

KINDS = [
    "task_request",
    "task_result",
    "llm_request",
    "llm_response",
    "tool_call",
    "tool_result",
    "event",
    "memory_write",
    "memory_query",
    "memory_hits",
    "note_write",
    "notes_query",
    "notes",
    "knowledge_query",
    "passages",
    "approval_request",
    "approval_decision",
    "cancel_job",
    "cancelled",
    "job_ended",
    "ack",
    "llm_deltas",
    "subtask_taken",
    "spend_alert",
    "handoff",
    "error",
]
HEX32 = re.compile(r"^[0-9a-f]{32}$")


def message(**fields):
    base = {"sender": "driver", "recipient": "orchestrator", "payload": Event(name="ping")}
    return AgentMessage(**{**base, **fields})


def test_kinds_cover_the_payload_union(sample_payloads):
    union = typing.get_args(Payload)[0]
    kinds = {member.model_fields["kind"].default for member in typing.get_args(union)}
    assert kinds == set(KINDS)
    assert set(sample_payloads) == set(KINDS)
    for kind, payload in sample_payloads.items():
        assert payload.kind == kind


@pytest.mark.parametrize("kind", KINDS)
def test_kind_is_copied_from_payload(kind, sample_payloads):
    msg = message(payload=sample_payloads[kind])
    assert msg.kind == kind
    assert msg.payload == sample_payloads[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_explicit_matching_kind_is_accepted(kind, sample_payloads):
    assert message(kind=kind, payload=sample_payloads[kind]).kind == kind


@pytest.mark.parametrize("kind", KINDS)
def test_mismatched_kind_is_rejected(kind, sample_payloads):
    other = KINDS[(KINDS.index(kind) + 1) % len(KINDS)]
    with pytest.raises(ValidationError, match="does not match payload kind"):
        message(kind=other, payload=sample_payloads[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_mismatched_kind_is_rejected_from_plain_data(kind, sample_payloads):
    data = message(payload=sample_payloads[kind]).model_dump(mode="json")
    data["kind"] = "event" if kind != "event" else "error"
    with pytest.raises(ValidationError, match="does not match payload kind"):
        AgentMessage.model_validate(data)


@pytest.mark.parametrize("kind", KINDS)
def test_plain_data_round_trip(kind, sample_payloads):
    msg = message(payload=sample_payloads[kind], job_id="j1", reply_to="role:writer")
    assert AgentMessage.model_validate(msg.model_dump(mode="json")) == msg
    assert AgentMessage.model_validate_json(msg.model_dump_json()) == msg


def test_unknown_payload_kind_is_rejected():
    data = message().model_dump(mode="json")
    data["payload"] = {"kind": "gossip", "name": "x"}
    data.pop("kind")
    with pytest.raises(ValidationError):
        AgentMessage.model_validate(data)


def test_payload_without_kind_is_rejected():
    data = message().model_dump(mode="json")
    del data["payload"]["kind"]
    del data["kind"]
    with pytest.raises(ValidationError):
        AgentMessage.model_validate(data)


@pytest.mark.parametrize("field", ["sender", "recipient", "reply_to"])
@pytest.mark.parametrize("bad", ["role:", "a b", "", "x" * 65, "queue:x", "topic:", "-x"])
def test_invalid_addresses_are_rejected(field, bad):
    with pytest.raises(ValidationError, match=field):
        message(**{field: bad})


@pytest.mark.parametrize("field", ["sender", "recipient", "reply_to"])
@pytest.mark.parametrize("good", ["role:writer", "topic:news", "researcher-1", "x" * 64])
def test_valid_addresses_are_accepted(field, good):
    assert getattr(message(**{field: good}), field) == good


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("attempt", 0),
        ("attempt", -1),
        ("hops", -1),
        ("tenant", ""),
        ("tenant", "t" * 65),
        ("id", ""),
        ("id", "i" * 65),
        ("deadline", "soon"),
        ("created_at", "now"),
        ("bogus", 1),
    ],
)
def test_invalid_fields_are_rejected(field, value):
    with pytest.raises(ValidationError, match=field):
        message(**{field: value})


def test_required_fields():
    for missing in ("sender", "recipient", "payload"):
        data = message().model_dump(mode="json")
        del data[missing]
        with pytest.raises(ValidationError, match=missing):
            AgentMessage.model_validate(data)


def test_defaults():
    before = time.time()
    msg = message()
    after = time.time()
    assert HEX32.match(msg.id)
    assert msg.attempt == 1
    assert msg.hops == 0
    assert msg.tenant == "default"
    assert msg.job_id is None
    assert msg.correlation_id is None
    assert msg.reply_to is None
    assert msg.deadline is None
    assert before <= msg.created_at <= after
    assert msg.id != message().id


def test_messages_are_frozen():
    msg = message()
    with pytest.raises(ValidationError):
        msg.hops = 3
    with pytest.raises(ValidationError):
        msg.payload = Event(name="other")
    assert msg.hops == 0


def test_new_id_is_32_hex_and_unique():
    ids = [new_id() for _ in range(2000)]
    assert all(HEX32.match(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_trace_context_defaults_and_child():
    trace = TraceContext()
    assert HEX32.match(trace.trace_id)
    assert re.fullmatch(r"[0-9a-f]{16}", trace.span_id)
    assert trace.parent_span_id is None
    child = trace.child()
    assert child.trace_id == trace.trace_id
    assert child.parent_span_id == trace.span_id
    assert child.span_id != trace.span_id
    grandchild = child.child()
    assert grandchild.trace_id == trace.trace_id
    assert grandchild.parent_span_id == child.span_id


@pytest.mark.parametrize("field", ["trace_id", "span_id"])
@pytest.mark.parametrize("value", ["", "z" * 65])
def test_trace_context_rejects_bad_ids(field, value):
    with pytest.raises(ValidationError, match=field):
        TraceContext(**{field: value})


def test_trace_context_forbids_extra_fields():
    with pytest.raises(ValidationError):
        TraceContext(baggage="x")


@pytest.mark.parametrize(
    ("deadline", "now", "expired"),
    [
        (None, 1e12, False),
        (100.0, 99.0, False),
        (100.0, 100.0, False),
        (100.0, 100.001, True),
        (100.0, 1e9, True),
        (0.0, 0.0, False),
    ],
)
def test_expired_with_explicit_now(deadline, now, expired):
    assert message(deadline=deadline).expired(now) is expired


def test_expired_uses_the_clock_by_default():
    assert message(deadline=time.time() - 3600).expired() is True
    assert message(deadline=time.time() + 3600).expired() is False
    assert message().expired() is False


def test_derive_keeps_job_context_with_a_new_span(sample_payloads):
    parent = message(
        job_id="job-1",
        attempt=2,
        deadline=1234.5,
        hops=3,
        tenant="acme",
        user="ana",
        key="ci-bot",
        team="crew",
        correlation_id="c-0",
        reply_to="driver",
    )
    child = parent.derive(
        sender="orchestrator", recipient="role:writer", payload=sample_payloads["task_request"]
    )
    answer = child.reply(sample_payloads["task_request"])
    for said in (child, answer):  # who the job is for: the budgets and limits key on these
        assert (said.user, said.key, said.team) == ("ana", "ci-bot", "crew")
    assert child.sender == "orchestrator"
    assert child.recipient == "role:writer"
    assert child.kind == "task_request"
    assert child.job_id == "job-1"
    assert child.attempt == 2
    assert child.deadline == 1234.5
    assert child.hops == 3
    assert child.tenant == "acme"
    assert child.trace.trace_id == parent.trace.trace_id
    assert child.trace.parent_span_id == parent.trace.span_id
    assert child.id != parent.id
    assert child.correlation_id is None
    assert child.reply_to is None


def test_derive_validates_addresses():
    with pytest.raises(ValidationError):
        message().derive(sender="a b", recipient="x", payload=Event(name="e"))


def test_reply_goes_back_to_sender(sample_payloads):
    request = message(
        sender="orchestrator", recipient="writer-1", job_id="j", tenant="acme", hops=4, attempt=3
    )
    reply = request.reply(sample_payloads["task_result"])
    assert reply.sender == "writer-1"
    assert reply.recipient == "orchestrator"
    assert reply.correlation_id == request.id
    assert reply.kind == "task_result"
    assert reply.job_id == "j"
    assert reply.tenant == "acme"
    assert reply.hops == 4
    assert reply.attempt == 3
    assert reply.trace.trace_id == request.trace.trace_id
    assert reply.trace.parent_span_id == request.trace.span_id
    assert reply.id != request.id


def test_reply_prefers_reply_to_and_explicit_sender():
    request = message(sender="orchestrator", recipient="role:writer", reply_to="topic:results")
    reply = request.reply(Event(name="done"), sender="writer-2")
    assert reply.recipient == "topic:results"
    assert reply.sender == "writer-2"


def test_error_reply_carries_a_troupe_error():
    request = message(sender="orchestrator", recipient="writer-1")
    reply = request.error_reply(ToolError("search failed", tool="search", attempts=2))
    assert reply.kind == "error"
    assert isinstance(reply.payload, ErrorPayload)
    assert reply.payload.code is ErrorCode.TOOL
    assert reply.payload.message == "search failed"
    assert reply.payload.detail == {"tool": "search", "attempts": 2}
    assert reply.correlation_id == request.id
    assert reply.recipient == "orchestrator"


def test_error_reply_wraps_foreign_exceptions_as_internal():
    reply = message().error_reply(KeyError("k"), sender="router")
    assert reply.sender == "router"
    assert reply.payload.code is ErrorCode.INTERNAL
    assert reply.payload.message.startswith("KeyError")
    assert reply.payload.retryable is False


def test_with_hop_increments_only_hops():
    msg = message(hops=2, job_id="j")
    hopped = msg.with_hop().with_hop()
    assert hopped.hops == 4
    assert msg.hops == 2
    assert hopped.model_dump(exclude={"hops"}) == msg.model_dump(exclude={"hops"})


def test_payload_models_forbid_extra_fields():
    with pytest.raises(ValidationError):
        TaskRequest(task_id="t", instructions="i", surprise=True)
    with pytest.raises(ValidationError):
        TaskRequest(task_id="", instructions="i")
    with pytest.raises(ValidationError):
        TaskRequest(task_id="t", instructions="")
    with pytest.raises(ValidationError):
        TaskRequest(task_id="t", instructions="i", max_turns=0)
