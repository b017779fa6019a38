"""Fakes shared by the SDK provider tests: a scripted httpx2 server and a broken stream."""

import json
from collections.abc import Callable

import httpx2

from raytroupe.protocols import ToolSpec

CALC = ToolSpec(
    name="calculator",
    description="Evaluates arithmetic.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)
CLOCK = ToolSpec(name="clock", description="Tells the time.")

Handler = Callable[[httpx2.Request], httpx2.Response]


class Server:
    """Answers requests with the given responses in order, and records what it was sent."""

    def __init__(self, *responses: httpx2.Response | Handler) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.responses.pop(0)
        return answer(request) if callable(answer) else answer

    @property
    def body(self) -> dict:
        return json.loads(self.requests[-1].content)


class Broken(httpx2.AsyncByteStream):
    """A response body that yields ``chunks`` and then fails the connection with ``exc``."""

    def __init__(self, chunks: list[bytes], exc: Exception | None = None) -> None:
        self.chunks, self.exc = chunks, exc

    async def __aiter__(self):
        for chunk in self.chunks:
            yield chunk
        if self.exc is not None:
            raise self.exc

    async def aclose(self) -> None:
        pass
