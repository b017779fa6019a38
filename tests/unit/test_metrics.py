"""Metrics without Ray: a no-op outside Ray, never raising, bounded tags, right recordings."""

import threading

import pytest
import ray
from structlog.testing import capture_logs
from wiring import Echo, ask, llm_request, ping, run, started_now

from raytroupe.actors import LLMAdapterPool, MessageRouter
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.actors.telemetry import metrics
from raytroupe.actors.telemetry.metric_backends import HeldGauges
from raytroupe.actors.tools.sandbox import ToolSandbox, ToolsConfig
from raytroupe.protocols import (
    ConfigError,
    ErrorCode,
    MalformedEnvelope,
    MemoryQuery,
    MemoryWrite,
    ToolCall,
)


def _every_function():
    metrics.message_routed("event")
    metrics.dead_lettered(ErrorCode.UNKNOWN_RECIPIENT)
    metrics.job_status(None, "pending")
    metrics.job_status("pending", "succeeded")
    metrics.llm_usage(
        "default", "default", "t", input_tokens=3, output_tokens=4, cost_usd=0.5, latency_s=0.1
    )
    metrics.llm_failed("default", ErrorCode.MODEL_TIMEOUT)
    metrics.tool_call("calculator", ok=True, seconds=0.01)
    metrics.memory_op("write", 2)
    metrics.queue_depth("router", "a", 1)


def _values(samples, metric, **tags):
    return [s.value for s in samples if s.name == metric and tags.items() <= s.tags.items()]


@pytest.fixture
def outside_ray(monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(metrics, "_live", None)


def test_outside_ray_every_function_is_a_no_op_and_creates_nothing(outside_ray):
    with capture_logs() as logs:
        _every_function()
        metrics.memory_op("write", "not a number")  # a broken caller is not even looked at

    assert metrics._live is None
    assert logs == []


def test_inside_ray_the_metrics_are_created_once_per_process(monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(metrics, "_live", None)
    # Ray's metric objects record nowhere without a core worker, and do not fail

    _every_function()
    first = metrics._live
    _every_function()

    assert first is not None
    assert metrics._live is first


def test_held_gauges_set_every_series_again_until_closed():
    """Ray forgets a gauge two export intervals after it was last set: values are re-set."""

    class Gauge:
        def __init__(self):
            self.sets = []

        def set(self, value, tags):
            self.sets.append((value, tags))

    held = HeldGauges(period_s=0.01)
    jobs, queue = Gauge(), Gauge()
    held_jobs, held_queue = held.wrap(jobs), held.wrap(queue)
    held_jobs.set(2, {"status": "running"})
    held_jobs.set(0, {"status": "running"})  # the last value of a series is the one held
    held_jobs.set(1, {"status": "planning"})
    held_queue.set(3, {"queue": "router", "name": "router-0"})
    for _ in range(2000):  # bounded: ~0.01 s a round
        if len(jobs.sets) >= 9 and len(queue.sets) >= 3:
            break
        threading.Event().wait(0.005)
    held.close()
    assert jobs.sets[:3] == [(2, {"status": "running"}), (0, {"status": "running"}),
                             (1, {"status": "planning"})]  # fmt: skip
    assert set(map(str, jobs.sets[3:])) <= {"(0, {'status': 'running'})",
                                            "(1, {'status': 'planning'})"}  # fmt: skip
    assert len(jobs.sets) >= 9
    assert queue.sets[-1] == (3, {"queue": "router", "name": "router-0"})
    after = len(jobs.sets)
    threading.Event().wait(0.05)
    assert len(jobs.sets) == after  # closed: no more


def test_a_failing_recording_is_logged_once_and_never_raised():
    with capture_logs() as logs, metrics.capture() as samples:
        metrics.memory_op("write", "not a number")
        metrics.memory_op("write", "not a number")
        metrics.memory_op("query", 1)

    assert [e["metric"] for e in logs if e["event"] == "metric_failed"] == ["memory_op"]
    assert _values(samples, "troupe_memory_ops", op="query") == [1.0]


def test_zero_usage_is_not_recorded_because_ray_refuses_zero_increments():
    with capture_logs() as logs, metrics.capture() as samples:
        metrics.llm_usage(
            "offline", "offline", "t", input_tokens=5, output_tokens=0, cost_usd=0.0, latency_s=0
        )
        metrics.memory_op("forget", 0)

    assert logs == []
    assert _values(samples, "troupe_llm_calls") == [1.0]
    assert _values(samples, "troupe_llm_tokens", direction="input") == [5.0]
    assert _values(samples, "troupe_llm_tokens", direction="output") == []
    assert _values(samples, "troupe_llm_cost_usd") == []
    assert _values(samples, "troupe_memory_ops", op="forget") == [1.0]
    assert _values(samples, "troupe_memory_items") == []


def test_jobs_by_status_gauge_follows_transitions_and_never_goes_negative():
    with metrics.capture() as samples:
        metrics.job_status(None, "pending")
        metrics.job_status(None, "pending")
        metrics.job_status("pending", "planning")
        metrics.job_status("planning", "planning")  # no change, nothing recorded
        metrics.job_status("planning", "succeeded")
        metrics.job_status("running", "failed")  # never seen running: stays at zero

    assert _values(samples, "troupe_jobs", status="pending") == [1.0, 2.0, 1.0]
    assert _values(samples, "troupe_jobs", status="planning") == [1.0, 0.0]
    assert _values(samples, "troupe_jobs", status="running") == [0.0]
    assert _values(samples, "troupe_jobs", status="succeeded") == []
    assert _values(samples, "troupe_jobs_finished", status="succeeded") == [1.0]
    assert _values(samples, "troupe_jobs_finished", status="failed") == [1.0]


def test_configured_name_tags_are_capped():
    with metrics.capture() as samples:
        for n in range(metrics.MAX_TAG_VALUES + 3):
            metrics.queue_depth("router", f"agent-{n}", 1)
        metrics.queue_depth("router", "agent-0", 2)  # a name seen before keeps its own series

    names = [s.tags["name"] for s in samples]
    assert len(set(names)) == metrics.MAX_TAG_VALUES + 1
    assert names[-4:] == ["other", "other", "other", "agent-0"]


def test_router_counts_routed_messages_dead_letters_and_in_flight():
    async def main():
        router = MessageRouter()
        await router.register("a", Echo("a"))
        await ask(router, ping("a"))
        await ask(router, ping("nobody"))
        with pytest.raises(MalformedEnvelope):
            await router.request(b"\x00not an envelope")

    with metrics.capture() as samples:
        run(main())

    assert _values(samples, "troupe_messages_routed", kind="event") == [1.0, 1.0]
    assert _values(samples, "troupe_messages_routed", kind="malformed") == [1.0]
    reasons = [s.tags["reason"] for s in samples if s.name == "troupe_dead_letters"]
    assert reasons == ["unknown_recipient", "malformed_envelope"]
    assert _values(samples, "troupe_queue_depth", queue="router", name="a") == [1.0, 0.0]


def test_llm_pool_records_usage_by_alias_deployment_and_tenant_and_failures():
    async def main():
        pool = LLMAdapterPool(config=LLMConfig())
        await pool.complete(llm_request("hello"), CallContext(tenant="acme"))
        with pytest.raises(ConfigError):
            await pool.complete(llm_request("hello", model="no-such-alias"))

    with metrics.capture() as samples:
        run(main())

    tags = {"alias": "default", "deployment": "default", "tenant": "acme"}
    assert _values(samples, "troupe_llm_calls", **tags) == [1.0]
    assert _values(samples, "troupe_llm_tokens", direction="input", **tags)[0] > 0
    assert _values(samples, "troupe_llm_tokens", direction="output", **tags)[0] > 0
    assert len(_values(samples, "troupe_llm_latency_seconds", alias="default")) == 1
    assert _values(samples, "troupe_queue_depth", queue="llm", name="default") == [1.0, 0.0]
    assert _values(samples, "troupe_llm_failures", alias="unknown", code="config") == [1.0]


def test_sandbox_records_tool_calls_by_tool_and_outcome(tmp_path):
    box = started_now(
        ToolSandbox(ToolsConfig(state_dir=tmp_path / "state", scratch_root=tmp_path / "s"))
    )

    async def main():
        await box.grant("ada", ["calculator"])
        good = ToolCall(call_id="c1", tool="calculator", arguments={"expression": "1 + 2"})
        assert (await box.call(good, agent="ada", job_id=None)).ok
        invented = ToolCall(call_id="c2", tool="made-up-by-a-model", arguments={})
        assert not (await box.call(invented, agent="ada", job_id=None)).ok
        await box.close()

    with metrics.capture() as samples:
        run(main())

    outcomes = [
        (s.tags["tool"], s.tags["outcome"]) for s in samples if s.name == "troupe_tool_calls"
    ]
    assert outcomes == [("calculator", "ok"), ("unknown", "tool_not_allowed")]
    assert len(_values(samples, "troupe_tool_call_seconds", tool="calculator")) == 1


def test_memory_store_records_writes_and_queries(tmp_path):
    store = started_now(MemoryStore(MemoryConfig(path=tmp_path, embedding="hashing")))

    async def main():
        await store.write_many("t", [MemoryWrite(text="Ada likes tea."), MemoryWrite(text="x")])
        await store.query("t", MemoryQuery(query="tea", k=1))
        await store.close()

    with metrics.capture() as samples:
        run(main())

    assert _values(samples, "troupe_memory_ops", op="write") == [1.0]
    assert _values(samples, "troupe_memory_items", op="write") == [2.0]
    assert _values(samples, "troupe_memory_ops", op="query") == [1.0]
    assert _values(samples, "troupe_memory_items", op="query") == [1.0]
