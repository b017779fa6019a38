"""HTTP side of the wire test server: rendering behaviours as responses, and uvicorn plumbing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal

import uvicorn
from starlette.requests import Request
from starlette.responses import Response

from tests.support import wire_anthropic, wire_openai
from tests.support.wire_model import (
    Answer,
    Conversation,
    Default,
    Drop,
    Hold,
    HttpError,
    Reply,
    Stall,
    StreamError,
    Truncate,
    default_reply,
    resolve,
)

Protocol = Literal["openai", "anthropic"]
Sleep = Callable[[float], Awaitable[None]]
Wait = Callable[[], Awaitable[None]]


_HOLD_POLL_S = 0.01
"""How often a held stream looks at its release event (set from the test's thread)."""


class DroppedConnection(Exception):
    """Raised after the response started, so that uvicorn closes the TCP connection."""


def _is_drop(exc: BaseException | None) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_drop(e) for e in exc.exceptions)
    return isinstance(exc, DroppedConnection)


class _QuietDrops(logging.Filter):
    """Hide uvicorn's "Exception in ASGI application" for deliberate drops only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _is_drop(record.exc_info[1]))


_UVICORN_LOG = logging.getLogger("uvicorn.error")
if not any(isinstance(f, _QuietDrops) for f in _UVICORN_LOG.filters):
    _UVICORN_LOG.addFilter(_QuietDrops())


class Frames(Response):
    """A body sent frame by frame: optional pause, per-frame delay, abrupt close after N.

    ``pause`` is (frame index, what to wait for before sending it).
    """

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        frames: list[bytes],
        *,
        drop_after: int | None = None,
        pause: tuple[int, Wait] | None = None,
        frame_delay_s: float = 0.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.status_code = status
        self.background = None
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        self.frames = frames
        self.drop_after = drop_after
        self.pause = pause
        self.frame_delay_s = frame_delay_s
        self.sleep = sleep

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:  # noqa: ARG002
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        for i, frame in enumerate(self.frames):
            if i == self.drop_after:
                raise DroppedConnection
            if self.pause and i == self.pause[0]:
                await self.pause[1]()
            elif i and self.frame_delay_s:
                await self.sleep(self.frame_delay_s)
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        if self.drop_after is not None:
            raise DroppedConnection
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class UvicornServer(uvicorn.Server):
    """uvicorn in a non-main thread: signals readiness, and sleeps that stop() can cut short."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping: asyncio.Event | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop, self.stopping = asyncio.get_running_loop(), asyncio.Event()
        await super().startup(sockets=sockets)
        self.ready.set()

    def wake_sleepers(self) -> None:
        """Cut scripted delays short (from any thread) so that shutdown is quick and quiet."""
        if self.loop is not None and self.stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                self.loop.call_soon_threadsafe(self.stopping.set)

    async def sleep(self, seconds: float) -> None:
        """asyncio.sleep that returns early once the server is stopping."""
        if seconds <= 0 or self.stopping is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    async def hold(self, release: threading.Event, seconds: float) -> None:
        """Wait until ``release`` is set (from any thread), at most ``seconds``; stop ends it."""
        deadline = time.monotonic() + seconds
        while not release.is_set() and time.monotonic() < deadline:
            if self.stopping is None or self.stopping.is_set():
                return
            await self.sleep(_HOLD_POLL_S)


class Renderer:
    """Turns an HttpError or a (possibly faulty) reply into the protocol's HTTP response.

    ``new_id(prefix)`` makes unique ids, ``sleep`` is the server's interruptible sleep,
    ``chunk_delay_s()`` reads the current delay between SSE frames and ``hold(release,
    seconds)`` waits for a test's ``threading.Event`` (see ``Hold``).
    """

    def __init__(
        self,
        new_id: Callable[[str], str],
        sleep: Sleep,
        chunk_delay_s: Callable[[], float],
        *,
        hold: Callable[[threading.Event, float], Awaitable[None]],
    ) -> None:
        self.new_id = new_id
        self.sleep = sleep
        self.chunk_delay_s = chunk_delay_s
        self.hold = hold

    def error(self, err: HttpError, conv: Conversation, protocol: Protocol) -> Response:
        """The provider's error JSON (or ``err.body``) with retry and request-id headers."""
        request_id = self.new_id("req_wire")
        headers = {"x-request-id" if protocol == "openai" else "request-id": request_id}
        if err.retry_after is not None:
            headers["retry-after"] = str(err.retry_after)
        if err.retry_after_ms is not None:
            headers["retry-after-ms"] = str(err.retry_after_ms)
        headers.update(err.headers)
        if isinstance(err.body, str):
            return Response(err.body, err.status, headers=headers, media_type="text/plain")
        if err.body is not None:
            return json_response(err.status, err.body, headers)
        if protocol == "openai":
            payload = wire_openai.error_body(err, conv)
        else:
            payload = wire_anthropic.error_body(err, conv, request_id)
        return json_response(err.status, payload, headers)

    def answer(
        self,
        reply: Reply | Default,
        fault: Truncate | Drop | StreamError | Stall | Hold | None,
        conv: Conversation,
        protocol: Protocol,
    ) -> Response:
        """JSON or SSE for the reply (default answer for ``Default``), with ``fault`` applied."""
        if isinstance(reply, Default):
            reply = default_reply(conv)
        openai = protocol == "openai"
        answer: Answer = resolve(
            reply, conv, lambda: self.new_id("call_wire" if openai else "toolu_wire")
        )
        rid = self.new_id("chatcmpl-wire" if openai else "msg_wire")
        request_id = self.new_id("req_wire")
        headers = {"x-request-id" if openai else "request-id": request_id}
        if not conv.stream:
            if isinstance(fault, StreamError):
                return self.error(HttpError(500, message=fault.message), conv, protocol)
            if openai:
                payload = wire_openai.completion(answer, conv, rid, int(time.time()))
            else:
                payload = wire_anthropic.message(answer, conv, rid)
            return self._json_answer(payload, headers, fault)
        if openai:
            body, tail = wire_openai.stream_frames(answer, conv, rid, int(time.time()))
        else:
            body, tail = wire_anthropic.stream_frames(answer, conv, rid)
        error = b""
        if isinstance(fault, StreamError):
            if openai:
                error = wire_openai.stream_error(fault.error_type, fault.message)
            else:
                error = wire_anthropic.stream_error(fault.error_type, fault.message, request_id)
        return self._stream_answer(body, tail, error, headers, fault)

    def _json_answer(
        self, payload: Any, headers: dict[str, str], fault: Truncate | Drop | Stall | Hold | None
    ) -> Response:
        """The JSON body; a fault sends half of it, then drops the connection or pauses."""
        if fault is None:
            return json_response(200, payload, headers)
        raw = json.dumps(payload).encode()
        half = [raw[: len(raw) // 2], raw[len(raw) // 2 :]]
        headers |= {"content-type": "application/json", "content-length": str(len(raw))}
        if isinstance(fault, Stall | Hold):
            return Frames(200, headers, half, pause=(1, self._wait(fault)), sleep=self.sleep)
        return Frames(200, headers, half, drop_after=1)

    def _wait(self, fault: Stall | Hold) -> Wait:
        """What a paused body waits for: a stall's seconds, or a hold's release."""
        if isinstance(fault, Hold):
            return partial(self.hold, fault.release, fault.seconds)
        return partial(self.sleep, fault.seconds)

    def _stream_answer(
        self,
        body: list[bytes],
        tail: list[bytes],
        error: bytes,
        headers: dict[str, str],
        fault: Truncate | Drop | StreamError | Stall | Hold | None,
    ) -> Response:
        """SSE frames: body then tail, or cut after ``fault.after_chunks`` body frames."""
        headers |= {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
        frames = partial(Frames, 200, headers, frame_delay_s=self.chunk_delay_s(), sleep=self.sleep)
        cut = min(max(0, getattr(fault, "after_chunks", 0)), len(body))
        if isinstance(fault, Truncate):
            return frames(body[:cut])
        if isinstance(fault, Drop):
            return frames(body, drop_after=cut)
        if isinstance(fault, StreamError):
            return frames([*body[:cut], error])
        pause = (cut, self._wait(fault)) if isinstance(fault, Stall | Hold) else None
        return frames(body + tail, pause=pause)


async def read_json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError:
        return None


def json_response(status: int, payload: Any, headers: dict[str, str]) -> Response:
    return Response(json.dumps(payload), status, headers=headers, media_type="application/json")
