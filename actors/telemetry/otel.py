"""Export a job's trace to OpenTelemetry.

Uses the OpenTelemetry API (installed with Ray): without an SDK ``TracerProvider`` configured
in the process, every span is a no-op. Spans keep their times and parents; OpenTelemetry makes
its own ids, and the raytroupe ids ride along as ``raytroupe.*`` attributes.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.context import Context

from raytroupe.protocols import Span

__all__ = ["export_otel"]

_NS = 1_000_000_000


def export_otel(spans: Sequence[Span], tracer: trace.Tracer | None = None) -> int:
    """Create (and end) one OpenTelemetry span per span, parents first; returns how many.

    ``tracer`` defaults to ``get_tracer("raytroupe")`` of the global provider. A span whose
    parent is not among ``spans`` becomes a root.
    """
    tracer = tracer or trace.get_tracer("raytroupe")
    children: dict[str | None, list[Span]] = {}
    known = {s.span_id for s in spans}
    for span in spans:
        children.setdefault(span.parent_id if span.parent_id in known else None, []).append(span)
    made: dict[str, trace.Span] = {}
    pending = list(children.get(None, []))
    while pending:
        span = pending.pop(0)
        parent = made.get(span.parent_id or "")
        context = Context() if parent is None else trace.set_span_in_context(parent)
        attributes = {k: v for k, v in span.attributes.items() if v is not None}
        attributes |= {
            "raytroupe.kind": span.kind,
            "raytroupe.span_id": span.span_id,
            "raytroupe.trace_id": span.trace_id,
        }
        made[span.span_id] = otel = tracer.start_span(
            span.name,
            context=context,
            start_time=int(span.start * _NS),
            attributes=attributes,
        )
        otel.end(end_time=int(span.end * _NS))
        pending.extend(children.get(span.span_id, []))
    return len(made)
