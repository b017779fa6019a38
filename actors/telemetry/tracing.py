"""Live OpenTelemetry traces: each actor process sends its spans to a collector as they end.

Every raytroupe actor process, and every Serve replica, calls :func:`configure_worker_tracing`
as it starts. The standard OpenTelemetry variables decide what happens:

- traces are on when ``OTEL_TRACES_EXPORTER`` names ``otlp`` or ``console``, or, with it
  unset, when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set;
  ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` turns them off;
- then an SDK ``TracerProvider`` is made, with a batch span processor (``OTEL_BSP_*``) and an
  OTLP exporter over HTTP (``http/protobuf``, the default) or gRPC
  (``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``), which reads its endpoint, headers, timeout,
  compression and certificates from its variables; the resource has ``service.name``
  ``raytroupe`` and the process's id unless ``OTEL_SERVICE_NAME`` and
  ``OTEL_RESOURCE_ATTRIBUTES`` say otherwise; the sampler is ``OTEL_TRACES_SAMPLER``'s;
- with none of them set nothing is made or imported, and every helper here returns after one
  test of a module variable.

The variables reach the actors through their processes' environment: a driver that starts
the local Ray, and every node of a ``ray up`` cluster (``~/.troupe/env``), hand theirs to
all of Ray's processes; a driver that joins a running Ray gives the actors it starts its own
in their ``runtime_env`` (:func:`actor_env`), which Ray hands down to the actors they start.

Context crosses processes in the envelope: a router client stamps each envelope it sends with
the W3C ``traceparent`` of the span current where it is sent (:func:`stamp`), and
:func:`raytroupe.actors.endpoint.serve_envelope` makes the sender's span current while the recipient
handles it (:func:`received`), so an agent's span is a child of its subtask's, a model call's
of the agent's. Only the W3C trace-context propagator is used, never hand-written parsing.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, Literal

import structlog

from raytroupe.protocols import AgentMessage, TroupeError
from raytroupe.protocols.traceparent import (
    checked_traceparent,
    context_of,
    current_traceparent,
    traceparent_of,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "OFF",
    "Kind",
    "active",
    "actor_env",
    "checked_traceparent",
    "configure_worker_tracing",
    "current_traceparent",
    "env_inherited",
    "failed",
    "forwarded_env",
    "install",
    "note",
    "provider_from_env",
    "received",
    "span",
    "stamp",
    "wanted_exporters",
]

log = structlog.get_logger("raytroupe.tracing")

Kind = Literal["internal", "client", "server"]
"""A span's kind: ``client`` for a call to another service (a model provider)."""

TRACER_NAME: Final = "raytroupe"
DEFAULT_SERVICE: Final = "raytroupe"
CREDENTIAL_SUFFIX: Final = "_HEADERS"
"""``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`` carry a collector's credentials: never forwarded."""

_tracer: Tracer | None = None
"""This process's tracer once tracing is on; None: off (the one test the hot paths make)."""
_inherited = False
"""Every Ray process started from here has this process's environment (see actor_env)."""
OFF: Final = nullcontext(None)
"""What a span helper returns when tracing is off: a ``with`` block that gets None."""


def wanted_exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The span exporters ``environ``'s OpenTelemetry variables ask for; () for none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if named:
        return tuple(n for n in (part.strip() for part in named.split(",")) if n and n != "none")
    endpoint = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )
    return ("otlp",) if endpoint else ()


def forwarded_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The ``OTEL_*`` variables of ``environ`` that may go in an actor's Ray ``runtime_env``.

    All of them but the exporter's headers, which may hold a collector's key: Ray shows an
    actor's ``runtime_env`` on its dashboard. Headers are set on the nodes themselves
    (``~/.troupe/env`` on a ``ray up`` cluster). Empty when no such variable is set.
    """
    return {
        k: v
        for k, v in environ.items()
        if k.startswith("OTEL_") and not k.endswith(CREDENTIAL_SUFFIX)
    }


def actor_env() -> dict[str, str]:
    """The ``OTEL_*`` variables to give an actor started from this process (its ``runtime_env``).

    None from an actor (Ray hands an actor's ``runtime_env`` down to the actors it starts, and
    they share its node's environment), nor from a driver that started the local Ray itself
    (every Ray process has its environment): see :func:`env_inherited`. Otherwise, from a
    driver that joined a running Ray, :func:`forwarded_env` of this process.
    """
    return {} if _inherited else forwarded_env()


def env_inherited() -> None:
    """Say that the Ray processes started from here already have this process's variables."""
    global _inherited  # noqa: PLW0603 - one fact about the process
    _inherited = True


def provider_from_env(process: str = "") -> TracerProvider | None:
    """An SDK tracer provider as the process's ``OTEL_*`` variables ask; None if they don't.

    ``process`` (an actor's class, ``TroupeAPI``) goes on the resource as
    ``raytroupe.process``. Exporters the variables name that raytroupe does not offer are
    logged and left out.
    """
    exporters = [e for name in wanted_exporters(os.environ) if (e := _exporter(name)) is not None]
    if not exporters:
        return None
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    ours: dict[str, str | int] = {
        "service.name": DEFAULT_SERVICE,
        "process.pid": os.getpid(),
        "host.name": socket.gethostname(),
    }
    if process:
        ours["raytroupe.process"] = process
    given = OTELResourceDetector().detect().attributes  # OTEL_RESOURCE_ATTRIBUTES, _SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({**ours, **given}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name: str) -> SpanExporter | None:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning("otel_exporter_unsupported", exporter=name, supported=["otlp", "console"])
        return None
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
        or "http/protobuf"
    ).lower()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        return OTLPSpanExporter()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter()
    log.warning("otel_protocol_unsupported", protocol=protocol, supported=["http/protobuf", "grpc"])
    return None


def configure_worker_tracing(process: str = "") -> bool:
    """Turn tracing on in this process if its ``OTEL_*`` variables ask; whether it is on.

    Called by every actor as it starts (see :func:`raytroupe.actors.lifecycle.with_lifecycle`) and
    by the Serve replica. The provider becomes the global one too when none is set yet (tools and
    libraries in the process then trace into the same pipeline). A variable the SDK refuses is
    logged, and the actor runs untraced: tracing never stops an actor.
    """
    env_inherited()  # what this actor starts inherits its runtime_env and its node's variables
    if _tracer is not None:
        return True
    try:
        provider = provider_from_env(process)
    except Exception:  # a bad variable must not stop the actor
        log.exception("otel_not_configured")
        return False
    if provider is None:
        return False
    from opentelemetry import trace  # noqa: PLC0415

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    install(provider)
    return True


def install(provider: TracerProvider | None) -> None:
    """Make this process's spans with ``provider`` (None: make none). Tests use it as well."""
    global _tracer  # noqa: PLW0603 - the process's one tracer, tested on every hot path
    _tracer = None if provider is None else provider.get_tracer(TRACER_NAME)


def active() -> bool:
    """Whether this process makes spans."""
    return _tracer is not None


def span(
    name: str,
    *,
    kind: Kind = "internal",
    parent: str | None = None,
    start: float | None = None,
    attributes: Mapping[str, str | int | float | bool | Sequence[str]] | None = None,
) -> AbstractContextManager[Span | None]:
    """A span, current within the ``with`` block; the block gets None when tracing is off.

    Its parent is ``parent`` (a W3C traceparent, e.g. an HTTP caller's) when given, else the
    current span. ``start`` is a UNIX time (default: now). An exception leaving the block
    marks the span failed with its type (:func:`failed`), never its message or stack.
    """
    if _tracer is None:
        return OFF
    return _span(_tracer, name, kind, parent, start, attributes)


@contextmanager
def _span(  # noqa: PLR0917 - span()'s arguments, checked there
    tracer: Tracer,
    name: str,
    kind: Kind,
    parent: str | None,
    start: float | None,
    attributes: Mapping[str, Any] | None,
) -> Iterator[Span]:
    from opentelemetry.trace import SpanKind  # noqa: PLC0415

    with tracer.start_as_current_span(
        name,
        context=None if parent is None else context_of(parent),
        kind=SpanKind[kind.upper()],
        attributes=attributes,
        start_time=None if start is None else int(start * 1e9),
        record_exception=False,  # its message and stack may quote content
        set_status_on_exception=False,
    ) as made:
        try:
            yield made
        except BaseException as exc:
            failed(made, exc)
            raise


def note(made: Span | None, **attributes: str | int | float | bool | None) -> None:
    """Set ``attributes`` (those not None) on ``made``, a span of :func:`span` (None: off)."""
    if made is not None:
        made.set_attributes({k: v for k, v in attributes.items() if v is not None})


def failed(made: Span | None, error: BaseException | str) -> None:
    """Mark ``made`` failed: status ERROR and ``error.type``, never the error's message.

    The type is a ``TroupeError``'s code, another exception's class name, or ``error`` itself
    (a code).
    """
    if made is None:
        return
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    if isinstance(error, TroupeError):
        kind = error.code.value
    elif isinstance(error, BaseException):
        kind = type(error).__qualname__
    else:
        kind = error
    made.set_attribute("error.type", kind)
    made.set_status(Status(StatusCode.ERROR, kind))


def stamp(message: AgentMessage) -> AgentMessage:
    """``message`` carrying the current span's ``traceparent`` (tracing on, none set yet)."""
    if _tracer is None or message.traceparent is not None:
        return message
    found = traceparent_of(None)
    return message if found is None else message.model_copy(update={"traceparent": found})


def received(traceparent: str | None) -> AbstractContextManager[None]:
    """The sender's span (``traceparent``) made current within the ``with`` block.

    A no-op when tracing is off or the envelope carries none.
    """
    if _tracer is None or traceparent is None:
        return OFF
    return _attached(context_of(traceparent))


@contextmanager
def _attached(context: Context) -> Iterator[None]:
    from opentelemetry import context as otel_context  # noqa: PLC0415

    token = otel_context.attach(context)
    try:
        yield None
    finally:
        otel_context.detach(token)
