"""OpenTelemetry in an actor process: set up from the OTEL_* variables, or not at all."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from raytroupe.actors.telemetry import tracing
from raytroupe.protocols import AgentMessage, Event, decode, encode

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def clean_env(monkeypatch):
    """No OpenTelemetry variable of the machine's leaks into a test."""
    import os  # noqa: PLC0415

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def memory_spans():
    """This process makes its spans into memory for the test, and none after it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


def _processors(provider: TracerProvider) -> list:
    return list(provider._active_span_processor._span_processors)


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, ()),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, ()),  # no exporter
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),  # the SDK's default endpoint
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, ("console", "otlp")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ()),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ("otlp",)),
    ],
)
def test_the_variables_say_whether_spans_are_exported(env, wanted):
    assert tracing.wanted_exporters(env) == wanted


def test_without_otel_variables_nothing_is_set_up_and_nothing_runs(clean_env):
    threads = {t.name for t in threading.enumerate()}
    clean_env.setenv("OTEL_SERVICE_NAME", "not-enough")  # names a service, asks for no export
    clean_env.setattr(tracing, "_inherited", tracing._inherited)  # as it was, after the test

    assert tracing.configure_worker_tracing("AgentActor") is False

    assert not tracing.active()
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # none was set
    started = {t.name for t in threading.enumerate()} - threads
    assert not [t for t in started if t.startswith("OtelBatch")]
    message = AgentMessage(sender="a", recipient="b", payload=Event(name="e"))
    assert tracing.stamp(message) is message  # the hot path: one test, nothing made
    with tracing.span("plan") as made, tracing.received(VALID) as attached:
        assert made is None
        assert attached is None
        assert trace.get_current_span() is trace.INVALID_SPAN


def test_the_provider_follows_the_standard_variables(clean_env):
    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    clean_env.setenv("OTEL_SERVICE_NAME", "troupe-prod")
    clean_env.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,team=ml")
    clean_env.setenv("OTEL_TRACES_SAMPLER", "always_off")
    clean_env.setenv("OTEL_BSP_SCHEDULE_DELAY", "250")

    provider = tracing.provider_from_env("AgentActor")
    try:
        assert provider is not None
        resource = provider.resource.attributes
        assert resource["service.name"] == "troupe-prod"  # the variable wins over ours
        assert resource["deployment.environment"] == "test"
        assert resource["team"] == "ml"
        assert resource["raytroupe.process"] == "AgentActor"
        assert isinstance(resource["process.pid"], int)
        assert provider.sampler.get_description() == "AlwaysOffSampler"
        (batch,) = _processors(provider)
        assert batch._batch_processor._schedule_delay == 0.25
        exporter = batch._batch_processor._exporter
        assert isinstance(exporter, HttpExporter)
        assert exporter._endpoint == "http://127.0.0.1:9/v1/traces"
    finally:
        provider.shutdown()


def test_service_name_defaults_to_raytroupe_and_grpc_is_offered(clean_env):
    clean_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9")
    clean_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    provider = tracing.provider_from_env()
    try:
        assert provider.resource.attributes["service.name"] == "raytroupe"
        (batch,) = _processors(provider)
        assert isinstance(batch._batch_processor._exporter, GrpcExporter)
    finally:
        provider.shutdown()


def test_an_exporter_or_protocol_not_offered_is_said_and_nothing_is_made(clean_env):
    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    clean_env.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with capture_logs() as logs:
        assert tracing.provider_from_env() is None
    assert logs[0]["event"] == "otel_protocol_unsupported"
    clean_env.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with capture_logs() as logs:
        assert tracing.provider_from_env() is None
    assert logs[0]["event"] == "otel_exporter_unsupported"


def test_only_otel_variables_are_forwarded_and_never_their_headers():
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_SERVICE_NAME": "troupe",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=secret",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer secret",
        "OPENAI_API_KEY": "sk-secret",
        "PATH": "/usr/bin",
    }
    assert tracing.forwarded_env(env) == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_SERVICE_NAME": "troupe",
    }
    assert tracing.forwarded_env({"PATH": "/usr/bin"}) == {}


def test_a_joining_driver_hands_its_variables_on_and_an_actor_does_not(clean_env):
    clean_env.setattr(tracing, "_inherited", False)  # a driver that joined a running Ray
    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    clean_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-key=secret")
    assert tracing.actor_env() == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    tracing.env_inherited()  # it started the Ray, or it is an actor: Ray passes them down
    assert tracing.actor_env() == {}


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (VALID, VALID),
        (VALID.upper(), None),  # W3C: lowercase hex only
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # invalid trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),  # invalid span id
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),  # forbidden version
        ("hello", None),
        ("", None),
        (None, None),
        (VALID + "-" + "a" * 300, None),  # longer than any parse is worth
    ],
)
def test_a_callers_traceparent_is_kept_only_when_valid(given, kept):
    assert tracing.checked_traceparent(given) == kept


def test_an_envelope_carries_its_senders_span_to_the_recipients(memory_spans):
    message = AgentMessage(sender="orchestrator", recipient="agent", payload=Event(name="e"))
    with tracing.span("subtask s1") as subtask:
        sent = tracing.stamp(message)
    arrived = decode(encode(sent))  # as bytes, as between processes

    async def recipient() -> None:  # a task with a context of its own: nothing inherited
        assert trace.get_current_span() is trace.INVALID_SPAN
        with tracing.received(arrived.traceparent), tracing.span("invoke_agent a"):
            pass

    contextvars.Context().run(asyncio.run, recipient())

    (made,) = [s for s in memory_spans.get_finished_spans() if s.name == "invoke_agent a"]
    assert made.parent.span_id == subtask.get_span_context().span_id
    assert made.context.trace_id == subtask.get_span_context().trace_id
    assert made.parent.is_remote
    assert tracing.stamp(sent) is sent  # one that has a traceparent keeps it


def test_a_failure_is_its_type_on_the_span_never_its_message(memory_spans):
    from raytroupe.protocols import ModelTimeout  # noqa: PLC0415

    with pytest.raises(ModelTimeout), tracing.span("chat m", kind="client"):
        raise ModelTimeout("the secret prompt was too slow")
    (made,) = memory_spans.get_finished_spans()
    assert made.kind is trace.SpanKind.CLIENT
    assert made.status.status_code is trace.StatusCode.ERROR
    assert made.attributes["error.type"] == "model_timeout"
    assert not made.events  # no exception event: its message could quote content
    assert "secret" not in str(made.to_json())


def test_a_span_may_continue_a_callers_trace(memory_spans):
    with tracing.span("job t", parent=VALID, start=1_700_000_000.5):
        pass
    (made,) = memory_spans.get_finished_spans()
    assert f"{made.context.trace_id:032x}" == VALID.split("-")[1]
    assert f"{made.parent.span_id:016x}" == VALID.split("-")[2]
    assert made.start_time == 1_700_000_000_500_000_000
