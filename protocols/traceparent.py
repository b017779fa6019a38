"""The W3C ``traceparent``: a wire field (an envelope's, a job's) and the helpers that make it.

Only OpenTelemetry's W3C trace-context propagator reads and writes one, never hand-written
parsing; its API is imported on first use, and works without an SDK (a driver with its own
OpenTelemetry set-up hands its current span to the jobs it submits). Where spans are made
and sent is ``raytroupe.actors.telemetry.tracing``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = [
    "MAX_TRACEPARENT",
    "checked_traceparent",
    "context_of",
    "current_traceparent",
    "traceparent_of",
]

MAX_TRACEPARENT: Final = 256
"""A longer ``traceparent`` (a version-00 one has 55 characters) is not even parsed."""


def checked_traceparent(value: str | None) -> str | None:
    """``value`` if it is a valid W3C ``traceparent`` (as the propagator writes it), else None.

    What an HTTP caller sent is passed on only so: anything else (too long, malformed, an
    invalid trace or span id) is dropped, as the W3C recommendation says.
    """
    if not value or len(value) > MAX_TRACEPARENT:
        return None
    return traceparent_of(context_of(value))


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the span current here, if there is a valid one.

    Works without an SDK: a driver with its own OpenTelemetry set-up hands its span to the
    job it submits.
    """
    return traceparent_of(None)


def context_of(traceparent: str) -> Context:
    """The OpenTelemetry context whose span ``traceparent`` names."""
    from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
        TraceContextTextMapPropagator,
    )

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def traceparent_of(context: Context | None) -> str | None:
    """The ``traceparent`` of ``context``'s span (None: the current one's), if it is valid."""
    from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
        TraceContextTextMapPropagator,
    )

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=context)
    return carrier.get("traceparent")
