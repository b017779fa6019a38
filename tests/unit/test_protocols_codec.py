import math
import pickle
import random

import msgpack
import pytest

from raytroupe.protocols import (
    SCHEMA_VERSION,
    AgentMessage,
    ErrorCode,
    ErrorPayload,
    Event,
    InvalidInput,
    MalformedEnvelope,
    TaskRequest,
    TraceContext,
    UnsupportedSchemaVersion,
    decode,
    encode,
)
from raytroupe.protocols.codec import MAX_ENVELOPE_BYTES, READABLE_VERSIONS, decode_routed

KINDS = [
    "task_request",
    "task_result",
    "llm_request",
    "llm_response",
    "tool_call",
    "tool_result",
    "event",
    "error",
]
DECODE_ERRORS = (MalformedEnvelope, UnsupportedSchemaVersion)


def message(**fields):
    base = {"sender": "driver", "recipient": "orchestrator", "payload": Event(name="ping")}
    return AgentMessage(**{**base, **fields})


def wire(inner, version=SCHEMA_VERSION):
    """``inner`` (an envelope as data, maybe broken) in the layout of ``version``."""
    if version == 1 or not isinstance(inner, dict) or not isinstance(inner.get("payload"), dict):
        outer = {"v": version, "m": inner}
        if version != 1 and isinstance(inner, dict):  # no payload map to split off
            header = {k: v for k, v in inner.items() if k != "payload"}
            outer = {"v": version, "h": header, "p": msgpack.packb(inner.get("payload"))}
        return msgpack.packb(outer, use_bin_type=True)
    header = {k: v for k, v in inner.items() if k != "payload"}
    payload = msgpack.packb(inner["payload"], use_bin_type=True)
    return msgpack.packb({"v": version, "h": header, "p": payload}, use_bin_type=True)


def valid_inner():
    return message(job_id="j1").model_dump(mode="json")


def test_schema_version_is_two_and_one_is_still_read():
    assert SCHEMA_VERSION == 2
    assert READABLE_VERSIONS == (1, 2)
    msg = message(job_id="j1")
    old = msgpack.packb({"v": 1, "m": msg.model_dump(mode="json")}, use_bin_type=True)
    assert decode(old) == msg
    assert decode_routed(old).with_hop() == encode(msg.with_hop())


def test_a_router_passes_the_payload_bytes_on_as_they_are():
    msg = message(hops=2, payload=Event(name="big", data={"x": "y" * 1000}))
    data = encode(msg)
    routed = decode_routed(data)
    hopped = routed.with_hop()
    assert decode(hopped) == msg.with_hop()
    outer, again = msgpack.unpackb(data, raw=False), msgpack.unpackb(hopped, raw=False)
    assert again["p"] == outer["p"]  # the same bytes: not decoded and encoded again
    assert again["h"] == {**outer["h"], "hops": 3}


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_every_payload_kind(kind, sample_payloads):
    msg = message(
        payload=sample_payloads[kind],
        job_id="job-42",
        correlation_id="c-1",
        reply_to="topic:results",
        attempt=3,
        deadline=1_700_000_000.25,
        hops=5,
        tenant="acme",
        trace=TraceContext(trace_id="t" * 32, span_id="s" * 16, parent_span_id="p" * 16),
    )
    data = encode(msg)
    assert isinstance(data, bytes)
    decoded = decode(data)
    assert decoded == msg
    assert decoded.kind == kind
    assert type(decoded.payload) is type(msg.payload)
    assert encode(decoded) == data


@pytest.mark.parametrize("kind", KINDS)
def test_wire_layout_is_a_versioned_map(kind, sample_payloads):
    msg = message(payload=sample_payloads[kind])
    outer = msgpack.unpackb(encode(msg), raw=False)
    assert set(outer) == {"v", "h", "p"}
    assert outer["v"] == SCHEMA_VERSION
    assert outer["h"] == msg.model_dump(mode="json", exclude={"payload"})
    assert msgpack.unpackb(outer["p"], raw=False) == msg.payload.model_dump(mode="json")
    assert outer["h"]["kind"] == kind


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_bytes_like(wrap):
    msg = message()
    assert decode(wrap(encode(msg))) == msg


def test_special_floats_and_unicode_round_trip():
    msg = message(
        deadline=math.inf,
        created_at=0.1 + 0.2,
        payload=Event(name="ünïcødé ✓ 🚀", data={"big": 2**63 - 1, "neg": -(2**63), "f": 1e-300}),
    )
    decoded = decode(encode(msg))
    assert decoded == msg
    assert decoded.deadline == math.inf
    assert decoded.created_at == 0.1 + 0.2


def test_round_trip_property():
    rng = random.Random(7)  # noqa: S311 - a seeded, reproducible test input
    names = ["a", "writer-1", "role:writer", "topic:news", "orchestrator", "x" * 64]

    def value(depth):
        leaves = [
            lambda: None,
            lambda: rng.choice([True, False]),
            lambda: rng.randint(-(2**40), 2**40),
            lambda: rng.uniform(-1e6, 1e6),
            lambda: "".join(rng.choice("ab ✓\n\x00é") for _ in range(rng.randint(0, 8))),
        ]
        containers = [
            lambda: [value(depth + 1) for _ in range(rng.randint(0, 4))],
            lambda: {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 4))},
        ]
        return rng.choice(leaves + containers if depth < 3 else leaves)()

    for i in range(300):
        payload = (
            Event(name=f"e{i}", data={"v": value(0)})
            if i % 3
            else ErrorPayload(code=rng.choice(list(ErrorCode)), message=str(value(3)))
        )
        msg = message(
            sender=rng.choice(names),
            recipient=rng.choice(names),
            job_id=rng.choice([None, f"job-{i}"]),
            attempt=rng.randint(1, 10),
            hops=rng.randint(0, 100),
            deadline=rng.choice([None, rng.uniform(0, 2e9)]),
            payload=payload,
        )
        assert decode(encode(msg)) == msg


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        b"\xc1\xc1\xc1",
        b"not msgpack at all",
        b"\x00\x01\x02",
        b"\xff",
        b"\x82",
        b"\xdf\xff\xff\xff\xff",
        b"\x91" * 5000,
        b"\x81\x01\x02",
        b"\xd6\xff\x00",
        bytes(range(256)),
        b"{'v': 1, 'm': {}}",
        b'{"v": 1, "m": {}}',
    ],
)
def test_garbage_bytes_are_malformed(data):
    with pytest.raises(MalformedEnvelope):
        decode(data)


def test_every_truncation_is_malformed(sample_payloads):
    data = encode(message(payload=sample_payloads["task_result"]))
    for cut in range(len(data)):
        with pytest.raises(MalformedEnvelope):
            decode(data[:cut])


def test_trailing_bytes_are_malformed():
    data = encode(message())
    with pytest.raises(MalformedEnvelope):
        decode(data + b"\x00")
    with pytest.raises(MalformedEnvelope):
        decode(data + data)


def test_mutated_bytes_never_raise_anything_else_property(sample_payloads):
    rng = random.Random(11)  # noqa: S311 - a seeded, reproducible test input
    originals = [encode(message(payload=p)) for p in sample_payloads.values()]
    for _ in range(3000):
        data = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            decoded = decode(bytes(data))
        except DECODE_ERRORS:
            continue
        assert isinstance(decoded, AgentMessage)
        assert decoded.kind == decoded.payload.kind


@pytest.mark.parametrize(
    "data",
    [
        None,
        "a string",
        123,
        1.5,
        ["b"],
        {"v": 1, "m": {}},
        object(),
        bytes,
    ],
)
def test_non_bytes_input_is_malformed(data):
    with pytest.raises(MalformedEnvelope, match="expected bytes"):
        decode(data)


def test_a_message_object_is_not_bytes():
    with pytest.raises(MalformedEnvelope, match="AgentMessage"):
        decode(message())


@pytest.mark.parametrize(
    "outer",
    [
        {},
        {"m": "INNER"},
        {"v": SCHEMA_VERSION},
        {"version": SCHEMA_VERSION, "message": "INNER"},
        {"V": SCHEMA_VERSION, "M": "INNER"},
        ["INNER"],
        [SCHEMA_VERSION, "INNER"],
        "INNER",
        SCHEMA_VERSION,
        None,
        True,
        b"raw",
    ],
)
def test_msgpack_that_is_not_an_envelope_is_malformed(outer):
    def fill(value):
        if value == "INNER":
            return valid_inner()
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    with pytest.raises(MalformedEnvelope, match="not an envelope"):
        decode(msgpack.packb(fill(outer), use_bin_type=True))


def test_non_string_map_keys_are_malformed():
    with pytest.raises(MalformedEnvelope):
        decode(msgpack.packb({1: 1, "v": 1, "m": valid_inner()}))


@pytest.mark.parametrize("version", [0, 3, 99, -1, 2**40, "1", "2", "v1"])
def test_other_schema_versions_are_unsupported(version):
    with pytest.raises(UnsupportedSchemaVersion) as info:
        decode(wire(valid_inner(), version=version))
    err = info.value
    assert not isinstance(err, MalformedEnvelope)
    assert isinstance(err, InvalidInput)
    assert err.code is ErrorCode.UNSUPPORTED_VERSION
    assert err.detail["version"] == version
    assert type(err.detail["version"]) is type(version)
    assert err.detail["supported"] == [1, SCHEMA_VERSION]
    assert repr(version) in str(err)


@pytest.mark.parametrize(("version", "shown"), [(None, "None"), (1.5, "1.5"), ([1], "[1]")])
def test_unsupported_version_detail_is_plain(version, shown):
    with pytest.raises(UnsupportedSchemaVersion) as info:
        decode(wire(valid_inner(), version=version))
    assert info.value.detail["version"] == shown


def test_version_is_checked_before_the_message():
    with pytest.raises(UnsupportedSchemaVersion):
        decode(wire({"garbage": True}, version=3))


@pytest.mark.parametrize("version", [True, 1.0])
def test_look_alike_versions_are_unsupported(version):
    with pytest.raises(UnsupportedSchemaVersion):
        decode(wire(valid_inner(), version=version))


def _set(path, value):
    def mutate(inner):
        target = inner
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path):
    def mutate(inner):
        target = inner
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (_set(["sender"], "a b"), "sender"),
        (_set(["sender"], "role:"), "sender"),
        (_set(["recipient"], ""), "recipient"),
        (_set(["recipient"], "x" * 65), "recipient"),
        (_set(["recipient"], "queue:x"), "recipient"),
        (_set(["reply_to"], "topic:"), "reply_to"),
        (_set(["attempt"], 0), "attempt"),
        (_set(["hops"], -1), "hops"),
        (_set(["hops"], "many"), "hops"),
        (_set(["tenant"], ""), "tenant"),
        (_set(["id"], ""), "id"),
        (_set(["deadline"], "tomorrow"), "deadline"),
        (_set(["created_at"], None), "created_at"),
        (_set(["trace"], "not a trace"), "trace"),
        (_set(["trace", "trace_id"], ""), "trace.trace_id"),
        (_set(["bogus"], 1), "bogus"),
        (_delete(["sender"]), "sender"),
        (_delete(["recipient"]), "recipient"),
        (_delete(["payload"]), "payload"),
        (_set(["payload"], "text"), "payload"),
        (_set(["payload", "name"], ""), "payload.event.name"),
        (_set(["payload", "data"], [1, 2]), "payload.event.data"),
        (_set(["payload", "extra"], 1), "payload.event.extra"),
    ],
)
def test_invalid_fields_are_malformed_with_problems(mutate, field):
    inner = valid_inner()
    mutate(inner)
    with pytest.raises(MalformedEnvelope, match="invalid envelope") as info:
        decode(wire(inner))
    problems = info.value.detail["problems"]
    assert isinstance(problems, list)
    assert all(isinstance(p, str) for p in problems)
    assert any(p.startswith(f"{field}: ") for p in problems), problems


@pytest.mark.parametrize("inner", [None, [], "m", 7, b"bin"])
def test_inner_message_of_the_wrong_type_is_malformed(inner):
    with pytest.raises(MalformedEnvelope, match="invalid envelope") as info:
        decode(wire(inner, version=1))
    assert info.value.detail["problems"]
    with pytest.raises(MalformedEnvelope, match="not an envelope"):
        decode(wire(inner))  # version 2: the header must be a map


def test_problems_are_capped_at_ten():
    inner = {f"extra{i}": i for i in range(30)}
    with pytest.raises(MalformedEnvelope) as info:
        decode(wire(inner))
    assert 1 <= len(info.value.detail["problems"]) <= 10


@pytest.mark.parametrize("kind", KINDS)
def test_kind_payload_mismatch_on_the_wire_is_malformed(kind, sample_payloads):
    inner = message(payload=sample_payloads[kind]).model_dump(mode="json")
    inner["kind"] = KINDS[(KINDS.index(kind) + 1) % len(KINDS)]
    with pytest.raises(MalformedEnvelope, match="does not match payload kind") as info:
        decode(wire(inner))
    assert info.value.detail["problems"]


@pytest.mark.parametrize("kind", KINDS)
def test_payload_tag_changed_on_the_wire_is_malformed(kind, sample_payloads):
    inner = message(payload=sample_payloads[kind]).model_dump(mode="json")
    inner["payload"]["kind"] = "event" if kind != "event" else "error"
    with pytest.raises(MalformedEnvelope):
        decode(wire(inner))


def test_missing_kind_on_the_wire_is_taken_from_the_payload(sample_payloads):
    msg = message(payload=sample_payloads["tool_call"])
    inner = msg.model_dump(mode="json")
    del inner["kind"]
    assert decode(wire(inner)) == msg


def test_unknown_payload_kind_on_the_wire_is_malformed():
    inner = valid_inner()
    inner["payload"] = {"kind": "gossip"}
    inner["kind"] = "gossip"
    with pytest.raises(MalformedEnvelope):
        decode(wire(inner))


def test_oversized_input_is_rejected_before_parsing():
    with pytest.raises(MalformedEnvelope, match="too large") as info:
        decode(b"\x00" * (MAX_ENVELOPE_BYTES + 1))
    assert info.value.detail == {"size": MAX_ENVELOPE_BYTES + 1, "limit": MAX_ENVELOPE_BYTES}


def test_input_at_the_limit_is_parsed_not_refused():
    with pytest.raises(MalformedEnvelope) as info:
        decode(b"\x00" * MAX_ENVELOPE_BYTES)
    assert "too large" not in str(info.value)


def test_oversized_envelope_is_refused_by_encode_and_decode():
    big = message(payload=Event(name="blob", data={"text": "x" * (MAX_ENVELOPE_BYTES + 10)}))
    with pytest.raises(InvalidInput, match="too large"):
        encode(big)
    data = msgpack.packb({"v": 1, "m": big.model_dump(mode="json")})
    assert len(data) > MAX_ENVELOPE_BYTES
    with pytest.raises(MalformedEnvelope, match="too large"):
        decode(data)
    with pytest.raises(MalformedEnvelope, match="too large"):
        decode(memoryview(data))


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1",
        msgpack.packb({"v": 1}),
        msgpack.packb({"v": 1, "m": {"sender": "a b"}}),
        msgpack.packb({"v": 3, "m": {}}),
    ],
)
def test_decode_errors_survive_pickling(data):
    with pytest.raises(DECODE_ERRORS) as info:
        decode(data)
    err = info.value
    clone = pickle.loads(pickle.dumps(err))  # noqa: S301 - our own bytes
    assert type(clone) is type(err)
    assert clone.detail == err.detail
    assert str(clone) == str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_encode_is_deterministic(kind, sample_payloads):
    msg = message(payload=sample_payloads[kind])
    assert encode(msg) == encode(msg)
    assert encode(msg) == encode(AgentMessage.model_validate(msg.model_dump()))


def test_task_request_inputs_survive_the_wire():
    msg = message(payload=TaskRequest(task_id="t", instructions="i", inputs={"a": "", "b": "ü"}))
    assert decode(encode(msg)).payload.inputs == {"a": "", "b": "ü"}
