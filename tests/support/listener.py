"""A stand-in for an attacker's server: a loopback HTTP listener that records every request.

It answers everything with 200 (or a redirect, when told), so a client that reaches it
succeeds; tests assert it was never reached. Bound to 127.0.0.1 on a port the OS picks,
served by a daemon thread, shut down on exit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Seen:
    """One request the listener received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Listener:
    """The running listener: its URL and what reached it."""

    url: str
    requests: list[Seen] = field(default_factory=list)
    redirect_to: str | None = None
    answers: list[int] = field(default_factory=list)
    """Statuses to answer first, one per request, in order (then 200)."""

    @property
    def reached(self) -> bool:
        """Whether anything reached it."""
        return bool(self.requests)


@contextmanager
def listening(
    *, redirect_to: str | None = None, answers: tuple[int, ...] = ()
) -> Iterator[Listener]:
    """Run a recording listener until exit (answering 307 to ``redirect_to`` if given, else
    ``answers`` in turn, then 200)."""
    listener = Listener(url="", redirect_to=redirect_to, answers=list(answers))

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            listener.requests.append(
                Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if listener.redirect_to is not None:
                self.send_response(307)
                self.send_header("Location", listener.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = b'{"ok": true}'
            self.send_response(listener.answers.pop(0) if listener.answers else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = _record  # noqa: N815 - http.server's naming

        def log_message(self, *_: object) -> None:  # quiet
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    listener.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield listener
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
