"""A local fake LLM provider speaking the OpenAI and Anthropic wire protocols, for tests.

The official SDKs work against it unmodified::

    with running_wire_server() as server:
        server.script(Reply(text="hi"), rate_limited(retry_after_ms=10), Reply.tool("f", {"q": 1}))
        client = AsyncOpenAI(base_url=server.base_url_openai, api_key="test-key")
        client = AsyncAnthropic(base_url=server.base_url_anthropic, api_key="test-key")

It binds 127.0.0.1 only, on a port the OS picks, and runs uvicorn in a daemon thread. Every
``POST /v1/chat/completions`` or ``POST /v1/messages`` pops the next scripted behaviour (see
``wire_model``) or gets the deterministic default answer. Every request is recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import wire_anthropic, wire_openai
from tests.support.wire_http import (
    Protocol,
    Renderer,
    UvicornServer,
    json_response,
    read_json,
)
from tests.support.wire_model import (
    Behaviour,
    Conversation,
    Default,
    Delay,
    Drop,
    Hold,
    HttpError,
    Reply,
    Stall,
    StreamError,
    ToolCall,
    Truncate,
    context_length_exceeded,
    overloaded,
    rate_limited,
    server_error,
)

__all__ = [
    "Behaviour",
    "Default",
    "Delay",
    "Drop",
    "Hold",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "Stall",
    "StreamError",
    "ToolCall",
    "Truncate",
    "WireServer",
    "context_length_exceeded",
    "overloaded",
    "rate_limited",
    "running_wire_server",
    "server_error",
]

HOST = "127.0.0.1"
DEFAULT_MODEL = "wire-test-model"
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it; secret header values read "<redacted>"."""

    index: int
    method: str
    path: str
    protocol: Protocol
    headers: dict[str, str]
    body: Any
    time: float
    behaviour: Any = None  # what a completion request was answered with (None: not scripted)


class WireServer:
    """Fake OpenAI + Anthropic endpoint on 127.0.0.1; use ``with WireServer() as s:`` or start/stop.

    ``latency_s`` delays every completion before it answers; ``chunk_delay_s`` separates SSE
    frames; ``api_key`` (when set) makes a wrong Bearer / x-api-key a 401; ``models`` is what
    GET /v1/models lists. Both delays may be changed while the server runs.
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        chunk_delay_s: float = 0.0,
        api_key: str | None = None,
        models: tuple[str, ...] = (DEFAULT_MODEL,),
        startup_timeout_s: float = 10.0,
        shutdown_timeout_s: float = 5.0,
    ) -> None:
        self.latency_s = latency_s
        self.chunk_delay_s = chunk_delay_s
        self.api_key = api_key
        self.models = list(models)
        self._startup_timeout_s = startup_timeout_s
        self._shutdown_timeout_s = shutdown_timeout_s
        self._cond = threading.Condition()
        self._script: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self._cached: set[str] = set()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._server: UvicornServer | None = None
        self._sock: socket.socket | None = None
        self._failure: BaseException | None = None
        self.port = 0
        self._renderer = Renderer(
            self._new_id, self._sleep, lambda: self.chunk_delay_s, hold=self._hold
        )
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{HOST}:{self.port}"

    @property
    def base_url_openai(self) -> str:
        """Base URL for ``OpenAI(base_url=...)`` (ends in /v1)."""
        return f"{self.base_url}/v1"

    @property
    def base_url_anthropic(self) -> str:
        """Base URL for ``Anthropic(base_url=...)`` (the SDK appends /v1/messages)."""
        return self.base_url

    def start(self) -> WireServer:
        """Bind 127.0.0.1:0, serve in a daemon thread, return once accepting connections."""
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((HOST, 0))
        sock.listen(256)
        self._sock, self.port = sock, sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            host=HOST,
            port=self.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        ready = threading.Event()
        self._failure = None
        self._server = UvicornServer(config, ready)
        self._thread = threading.Thread(
            target=self._serve, name=f"wire-server-{self.port}", daemon=True
        )
        self._thread.start()
        if not ready.wait(self._startup_timeout_s) or self._failure or not self._server.started:
            error = self._failure
            self.stop()
            raise RuntimeError(f"wire server did not start on {self.base_url}") from error
        return self

    def _serve(self) -> None:
        assert self._server is not None
        assert self._sock is not None
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._failure = exc
        finally:
            self._server.ready.set()

    def stop(self) -> None:
        """Stop serving; scripted delays end at once, other work gets ~1 s; bounded joins."""
        thread, server, sock = self._thread, self._server, self._sock
        self._thread = None
        if thread is None or server is None:
            return
        server.should_exit = True
        server.wake_sleepers()
        thread.join(self._shutdown_timeout_s)
        if thread.is_alive():
            server.force_exit = True
            thread.join(self._shutdown_timeout_s)
        if sock is not None:
            sock.close()
        if thread.is_alive():
            raise RuntimeError(f"wire server thread {thread.name} did not stop")

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting and records -------------------------------------------------------------

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours; each completion request pops one, in order (default when empty)."""
        with self._cond:
            self._script.extend(behaviours)

    def clear_script(self) -> None:
        """Drop the behaviours not yet used."""
        with self._cond:
            self._script.clear()

    @property
    def pending(self) -> int:
        """How many scripted behaviours are still queued."""
        with self._cond:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        """How many requests arrived (all endpoints)."""
        with self._cond:
            return len(self._requests)

    def wait_for_requests(self, count: int, timeout_s: float = 5.0) -> bool:
        """Block until ``count`` requests arrived (True) or ``timeout_s`` passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._requests) >= count, timeout_s)

    def reset(self) -> None:
        """Forget recorded requests and queued behaviours (between tests sharing a server)."""
        with self._cond:
            self._script.clear()
            self._requests.clear()
            self._cached.clear()

    def _record(
        self, request: Request, protocol: Protocol, body: Any, *, pop: bool
    ) -> RecordedRequest:
        headers = {
            k: "<redacted>" if k in _SECRET_HEADERS else v for k, v in request.headers.items()
        }
        with self._cond:
            behaviour: Any = None
            if pop:
                behaviour = self._script.popleft() if self._script else Default()
            rec = RecordedRequest(
                index=len(self._requests),
                method=request.method,
                path=request.url.path,
                protocol=protocol,
                headers=headers,
                body=body,
                time=time.time(),
                behaviour=behaviour,
            )
            self._requests.append(rec)
            self._cond.notify_all()
        return rec

    async def _sleep(self, seconds: float) -> None:
        if self._server is not None:
            await self._server.sleep(seconds)

    async def _hold(self, release: threading.Event, seconds: float) -> None:
        if self._server is not None:
            await self._server.hold(release, seconds)

    def _cache(self, conv: Conversation, protocol: Protocol) -> Conversation:
        """``conv`` with the prompt words read from and written to the server's prompt cache.

        Read: the longest cache point of ``conv`` written before. Written: its points that
        are written and were not (beyond what was read); OpenAI writes without telling.
        """
        with self._cond:
            read = max((n for d, n, _ in conv.cache_points if d in self._cached), default=0)
            fresh = [n for d, n, w in conv.cache_points if w and d not in self._cached]
            self._cached.update(d for d, _, w in conv.cache_points if w)
        written = max(fresh, default=0) - read if protocol == "anthropic" else 0
        return dataclasses.replace(conv, cached=read, written=max(0, written))

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # -- endpoints -------------------------------------------------------------------------

    async def _openai(self, request: Request) -> Response:
        return await self._complete(request, "openai")

    async def _anthropic(self, request: Request) -> Response:
        return await self._complete(request, "anthropic")

    async def _count_tokens(self, request: Request) -> Response:
        body = await read_json(request)
        self._record(request, "anthropic", body, pop=False)
        conv = wire_anthropic.conversation(body if isinstance(body, dict) else {})
        return json_response(200, {"input_tokens": conv.words}, {})

    async def _models(self, request: Request) -> Response:
        anthropic = "anthropic-version" in request.headers
        self._record(request, "anthropic" if anthropic else "openai", None, pop=False)
        if anthropic:
            return json_response(200, wire_anthropic.models_body(self.models), {})
        return json_response(200, wire_openai.models_body(self.models, int(time.time())), {})

    def _authorized(self, request: Request) -> bool:
        if self.api_key is None:
            return True
        bearer = request.headers.get("authorization", "")
        return self.api_key in (request.headers.get("x-api-key"), bearer.removeprefix("Bearer "))

    async def _complete(self, request: Request, protocol: Protocol) -> Response:
        body = await read_json(request)
        module = wire_openai if protocol == "openai" else wire_anthropic
        conv = module.conversation(body if isinstance(body, dict) else {})
        if not isinstance(body, dict) or not self._authorized(request):
            self._record(request, protocol, body, pop=False)
            status = 400 if not isinstance(body, dict) else 401
            message = "Could not parse the JSON body of your request." if status == 400 else None
            return self._renderer.error(HttpError(status, message=message), conv, protocol)
        if conv.problem is not None:  # refused before anything is answered, as the API does
            self._record(request, protocol, body, pop=False)
            return self._renderer.error(HttpError(400, message=conv.problem), conv, protocol)
        rec = self._record(request, protocol, body, pop=True)
        conv = self._cache(conv, protocol)
        await self._sleep(self.latency_s)
        behaviour = rec.behaviour
        while callable(behaviour) or isinstance(behaviour, Delay):
            if isinstance(behaviour, Delay):
                await self._sleep(behaviour.seconds)
                behaviour = behaviour.then or Default()
            else:
                behaviour = behaviour(rec)
        if isinstance(behaviour, HttpError):
            return self._renderer.error(behaviour, conv, protocol)
        if isinstance(behaviour, Reply | Default):
            return self._renderer.answer(behaviour, None, conv, protocol)
        if isinstance(behaviour, Truncate | Drop | StreamError | Stall | Hold):
            return self._renderer.answer(behaviour.then or Default(), behaviour, conv, protocol)
        raise TypeError(f"not a wire-server behaviour: {behaviour!r}")


@contextmanager
def running_wire_server(**kwargs: Any) -> Iterator[WireServer]:
    """``with running_wire_server(latency_s=0.01) as server:`` — started, always stopped."""
    server = WireServer(**kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
