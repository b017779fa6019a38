"""An OTLP/HTTP trace receiver on 127.0.0.1: what a collector would get, decoded for tests.

``POST /v1/traces`` with a protobuf ``ExportTraceServiceRequest`` (gzip or deflate when the
exporter compresses), answered as a collector answers. Each span is kept as a
:class:`Received`, with its resource's attributes and the time it arrived.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

MAX_BODY = 16 * 1024 * 1024
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class Received:
    """One span as the receiver got it (ids as lowercase hex, as in a traceparent)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    start_ns: int
    end_ns: int
    received_at: float

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return None if which is None else getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        found[pair.key] = _value(pair.value)
    return found


def decode_request(body: bytes, encoding: str | None, at: float) -> list[Received]:
    """The spans of one export request's body."""
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    request = ExportTraceServiceRequest.FromString(body)
    return [
        Received(
            name=span.name,
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            kind=KINDS.get(span.kind, str(span.kind)),
            attributes=_attributes(span.attributes),
            resource=_attributes(resource_spans.resource.attributes),
            status_code=span.status.code,
            start_ns=span.start_time_unix_nano,
            end_ns=span.end_time_unix_nano,
            received_at=at,
        )
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


class OtlpReceiver:
    """The receiver, serving on a free port of 127.0.0.1 while the ``with`` block runs."""

    def __init__(self) -> None:
        self._spans: list[Received] = []
        self._changed = threading.Condition()
        self.requests = 0
        self.refused: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                if self.path != "/v1/traces" or not 0 < size <= MAX_BODY:
                    receiver.refused.append(f"{self.path} ({size} bytes)")
                    self.send_error(404 if self.path != "/v1/traces" else 400)
                    return
                body = self.rfile.read(size)
                if self.headers.get("Content-Type") != "application/x-protobuf":
                    receiver.refused.append(f"content type {self.headers.get('Content-Type')}")
                    self.send_error(415)
                    return
                spans = decode_request(body, self.headers.get("Content-Encoding"), time.time())
                receiver._add(spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # quiet: the test reads what arrived, not access lines

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL an OTLP/HTTP exporter is given (OTEL_EXPORTER_OTLP_ENDPOINT)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _add(self, spans: list[Received]) -> None:
        with self._changed:
            self.requests += 1
            self._spans.extend(spans)
            self._changed.notify_all()

    def spans(self) -> list[Received]:
        """Every span received so far, in the order they came."""
        with self._changed:
            return list(self._spans)

    def wait_for(self, found: Callable[[Received], bool], timeout: float) -> Received | None:
        """The first span received for which ``found`` holds, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                match = next((s for s in self._spans if found(s)), None)
                left = deadline - time.monotonic()
                if match is not None or left <= 0:
                    return match
                self._changed.wait(left)
