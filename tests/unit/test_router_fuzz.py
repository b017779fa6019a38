"""Fuzzing the router with hypothesis: arbitrary bytes and arbitrary protocol envelopes.

The router is driven in-process (no Ray) through ``request`` and ``send`` only. Whatever it is
given, it never crashes: unreadable bytes raise the codec's own typed error
(``MalformedEnvelope`` / ``UnsupportedSchemaVersion``) and land in the dead-letter queue with
that reason; readable envelopes get exactly one outcome each (delivered, dead-lettered with a
typed reason, or recognised as a duplicate), and the counters add up.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from typing import Any

import msgpack
import pytest
import structlog
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from wiring import Echo, Raising

from raytroupe.actors import MessageRouter
from raytroupe.protocols import (
    AgentMessage,
    ErrorCode,
    ErrorPayload,
    Event,
    MalformedEnvelope,
    TaskRequest,
    ToolCall,
    TroupeError,
    UnsupportedSchemaVersion,
    decode,
    encode,
)
from raytroupe.protocols.codec import MAX_ENVELOPE_BYTES, READABLE_VERSIONS, SCHEMA_VERSION
from tests.support.figures import record

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
RECIPIENTS = ("a", "b", "c", "nobody", "role:worker", "role:ghost", "topic:news", "topic:void")
"""a echoes (role worker, topic news), b raises, c never replies; the others reach nobody."""
DRAIN_S = 5.0


@pytest.fixture(autouse=True)
def _quiet_logs():
    """Thousands of dead letters are logged: drop them here (it halves the run time)."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    yield
    structlog.configure(**saved)


names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,15}", fullmatch=True)
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what msgpack can carry
    | st.floats()
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_dicts = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
any_msgpack = st.recursive(
    json_leaf | st.binary(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(-9, 9), inner, max_size=4)
    ),
    max_leaves=16,
)
payloads = st.one_of(
    st.builds(Event, name=names, data=json_dicts),
    st.builds(
        ErrorPayload,
        code=st.sampled_from(ErrorCode),
        message=st.text(max_size=60),
        retryable=st.booleans(),
    ),
    st.builds(TaskRequest, task_id=names, instructions=st.text(min_size=1, max_size=80)),
    st.builds(ToolCall, call_id=names, tool=names, arguments=json_dicts),
)
deadlines = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-5, max_value=5).map(lambda d: time.time() + d),
)


@st.composite
def messages(draw: st.DrawFn) -> AgentMessage:
    """Envelopes from ``st.builds`` of the payload models, with arbitrary routing fields."""
    fields: dict[str, Any] = {
        "id": draw(st.sampled_from(["dup-1", "dup-2"]) | st.text(min_size=1, max_size=64)),
        "sender": draw(st.sampled_from(["driver", "a", "role:worker"]) | names),
        "recipient": draw(st.sampled_from(RECIPIENTS)),
        "reply_to": draw(st.none() | st.sampled_from(RECIPIENTS)),
        "job_id": draw(st.none() | st.text(max_size=20)),
        "attempt": draw(st.integers(min_value=1, max_value=2**40)),
        "hops": draw(st.integers(min_value=0, max_value=20)),
        "deadline": draw(deadlines),
        "tenant": draw(st.text(min_size=1, max_size=64)),
        "created_at": draw(st.floats(allow_nan=True, allow_infinity=True)),
        "payload": draw(payloads),
    }
    try:
        return AgentMessage.model_validate(fields)
    except ValidationError:
        reject()


def _mutate(data: bytes, cut: int, flips: list[int]) -> bytes:
    buf = bytearray(data[: max(0, min(cut, len(data)))] if cut >= 0 else data)
    for bit in flips:
        if buf:
            position = bit % (len(buf) * 8)
            buf[position // 8] ^= 1 << (position % 8)
    return bytes(buf)


@st.composite
def broken_envelopes(draw: st.DrawFn) -> bytes:
    """Truncated or bit-flipped valid encodings, and valid msgpack of the wrong shape."""
    kind = draw(st.sampled_from(["mutated", "wrong_shape", "wrong_version", "bad_fields"]))
    if kind == "mutated":
        data = encode(draw(messages()))
        cut = draw(st.integers(min_value=-1, max_value=len(data)))
        flips = draw(st.lists(st.integers(min_value=0), max_size=4))
        return _mutate(data, cut, flips)
    if kind == "wrong_shape":
        return msgpack.packb(draw(any_msgpack), use_bin_type=True)
    valid = draw(messages()).model_dump(mode="json")
    if kind == "wrong_version":
        version = draw(
            any_msgpack.filter(lambda v: v not in READABLE_VERSIONS or type(v) is not int)
        )
        return msgpack.packb({"v": version, "m": valid}, use_bin_type=True)
    key = draw(st.sampled_from(sorted(valid)))
    if draw(st.booleans()):
        valid.pop(key)
    else:
        valid[key] = draw(any_msgpack)
    return _layout(valid, version=draw(st.sampled_from(READABLE_VERSIONS)))


def _layout(inner: dict[str, Any], *, version: int) -> bytes:
    """``inner`` as envelope bytes of ``version`` (2: header map and payload bytes)."""
    if version == 1:
        return msgpack.packb({"v": 1, "m": inner}, use_bin_type=True)
    header = {k: v for k, v in inner.items() if k != "payload"}
    payload = msgpack.packb(inner.get("payload"), use_bin_type=True)
    return msgpack.packb({"v": version, "h": header, "p": payload}, use_bin_type=True)


class Harness:
    """A fresh router with echoing, raising and silent recipients; checks every outcome."""

    def __init__(self) -> None:
        self.router = MessageRouter(max_hops=16, dedupe_window=64)
        self.echo = Echo("a")
        self.outcomes: Counter[str] = Counter()

    async def setup(self) -> None:
        await self.router.register("a", self.echo, ["worker"])
        await self.router.register("b", Raising(RuntimeError("recipient exploded")))
        await self.router.register("c", Echo("c", reply=False))
        await self.router.subscribe("a", "news")

    async def feed(self, data: bytes, *, one_way: bool) -> None:
        before = len(await self.router.dead_letters(limit=100_000))
        try:
            expected = decode(data)
        except (MalformedEnvelope, UnsupportedSchemaVersion) as exc:
            await self._refused(data, type(exc), before, one_way=one_way)
            return
        if one_way:
            status = await self.router.send(data)
            assert status in {"accepted", "duplicate", "dead_lettered"}
            self.outcomes[f"send_{status}"] += 1
            return
        reply = decode(await self.router.request(data))
        if decode(data).id == expected.id:  # else no id was given: each reading makes one up
            assert reply.correlation_id == expected.id
        assert reply.correlation_id is not None
        if isinstance(reply.payload, ErrorPayload) and reply.sender == "router":
            self.outcomes[f"request_{reply.payload.code.value}"] += 1
        else:
            self.outcomes["request_answered"] += 1

    async def _refused(
        self, data: bytes, error: type[TroupeError], before: int, *, one_way: bool
    ) -> None:
        call = self.router.send if one_way else self.router.request
        with pytest.raises(TroupeError) as info:
            await call(data)
        assert info.type is error, f"{info.type.__name__} != {error.__name__}"
        letters = await self.router.dead_letters(limit=100_000)
        assert len(letters) == before + 1
        letter = letters[-1]
        assert letter.reason is error.code
        assert letter.detail
        assert letter.message is None
        assert letter.raw == data[:65_536]
        self.outcomes[f"refused_{error.code.value}"] += 1

    async def drain(self) -> None:
        """Wait (bounded) for one-way deliveries still running in the background."""
        deadline = time.monotonic() + DRAIN_S
        while self.router._background:
            assert time.monotonic() < deadline, "one-way deliveries never finished"
            await asyncio.gather(*list(self.router._background), return_exceptions=True)

    async def check_accounting(self) -> None:
        """Every routed envelope is delivered, dead-lettered or a duplicate, exactly once."""
        await self.drain()
        stats = await self.router.stats()
        assert stats.routed == stats.delivered + stats.dead_lettered + stats.duplicates, stats
        assert stats.in_flight == {}
        letters = await self.router.dead_letters(limit=100_000)
        assert len(letters) == stats.dead_lettered
        assert all(isinstance(letter.reason, ErrorCode) for letter in letters)


def _run(inputs: list[tuple[bytes, bool]]) -> Counter[str]:
    async def main() -> Counter[str]:
        harness = Harness()
        await harness.setup()
        for data, one_way in inputs:
            await harness.feed(data, one_way=one_way)
        await harness.check_accounting()
        return harness.outcomes

    return asyncio.run(asyncio.wait_for(main(), 30))


def _fuzz(strategy: st.SearchStrategy[bytes], label: str) -> Counter[str]:
    totals: Counter[str] = Counter()
    examples = 0

    @SETTINGS
    @given(st.lists(st.tuples(strategy, st.booleans()), min_size=1, max_size=6))
    def check(inputs: list[tuple[bytes, bool]]) -> None:
        nonlocal examples
        examples += 1
        totals.update(_run(inputs))

    check()
    record("fuzz", f"{label}: hypothesis examples run", examples, "examples")
    record("fuzz", f"{label}: envelopes fed", sum(totals.values()), "envelopes", _note(totals))
    return totals


def _note(totals: Counter[str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(totals.items()))


def test_random_bytes_never_crash_the_router_and_are_dead_lettered():
    totals = _fuzz(st.binary(max_size=512), "random bytes")
    assert sum(v for k, v in totals.items() if k.startswith("refused_")) > 0


def test_broken_encodings_raise_typed_errors_and_are_dead_lettered():
    totals = _fuzz(broken_envelopes(), "broken encodings")
    assert totals[f"refused_{MalformedEnvelope.code.value}"] > 0
    assert totals[f"refused_{UnsupportedSchemaVersion.code.value}"] > 0


def test_arbitrary_protocol_envelopes_get_exactly_one_outcome_each():
    totals = _fuzz(messages().map(encode), "protocol envelopes")
    assert totals["request_answered"] > 0  # valid envelopes are delivered
    assert (
        sum(v for k, v in totals.items() if k.startswith("request_")) > totals["request_answered"]
    )  # and undeliverable ones are told why


def test_huge_fields_and_oversized_envelopes_are_handled():
    big_text = "x" * (1 << 20)
    huge = AgentMessage(
        sender="driver", recipient="a", payload=Event(name="big", data={"blob": big_text})
    )
    long_id = _layout({**huge.model_dump(mode="json"), "id": "i" * 100_000}, version=2)
    deep_bytes = b"\x91" * 200_000 + b"\xc0"  # 200k nested one-element arrays
    inputs = [
        (encode(huge), False),
        (long_id, False),
        (b"\x00" * (MAX_ENVELOPE_BYTES + 1), False),
        (deep_bytes, False),
        (_layout({"payload": {"kind": "event"}}, version=SCHEMA_VERSION), True),
        (msgpack.packb({"v": 2**63, "m": {}}), False),
        (msgpack.packb({"v": math.nan, "m": {}}), True),
    ]
    outcomes = _run(inputs)
    assert outcomes["request_answered"] == 1
    assert outcomes[f"refused_{MalformedEnvelope.code.value}"] == 4
    assert outcomes[f"refused_{UnsupportedSchemaVersion.code.value}"] == 2
    record("fuzz", "huge inputs handled", len(inputs), "envelopes", _note(outcomes))
