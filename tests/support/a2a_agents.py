"""A real A2A agent for tests, made with the A2A SDK and served by uvicorn on 127.0.0.1.

The agent answers a message by its first word:

- ``fail <why>``: the task ends failed, its status message ``why``;
- ``reject <why>`` / ``auth <why>``: rejected, or auth-required, likewise;
- ``ask <question>``: the task asks for input (``question``); answered, it echoes the answer;
- ``hang``: the task works until it is canceled;
- ``data``: completed, with a text part and a data part ``{"n": 42}`` in its artifact;
- ``big <n>``: completed, with an artifact of ``n`` characters;
- ``quick``: answered with a message at once (no task);
- anything else: completed, its artifact the text upper-cased.

:class:`Seen` counts what reached it. The card's JSON-RPC URL is the server's root unless
``interface_url`` says another (an attacker's card); ``/garbage`` and ``/huge`` answer every
POST with bytes that are not JSON-RPC, and with 2 MB of them.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf import struct_pb2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HUGE_BYTES = 2_000_000


@dataclass
class Seen:
    """What reached the agent: each message's text, each cancel's task id, card fetches."""

    messages: list[str] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    cards: int = 0
    raw_posts: int = 0
    authorization: list[str] = field(default_factory=list)
    """The Authorization header of each request that had one."""


@dataclass
class RunningAgent:
    """The agent while it runs: where it is and what reached it."""

    url: str
    seen: Seen


def _agent_message(text: str, context: RequestContext) -> Message:
    return Message(
        role=Role.ROLE_AGENT,
        message_id=f"m-{context.task_id}-{len(text)}",
        parts=[Part(text=text)],
        task_id=context.task_id or "",
        context_id=context.context_id or "",
    )


class ScriptedExecutor(AgentExecutor):
    """Does what the message's first word says (see the module docstring)."""

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.seen.messages.append(text)
        word, _, rest = text.partition(" ")
        if word == "quick":
            await event_queue.enqueue_event(_agent_message(text.upper(), context))
            return
        task_id, context_id = context.task_id or "", context.context_id or ""
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        asked = context.current_task is not None and (
            context.current_task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        )
        if asked:
            await updater.add_artifact([Part(text=f"ANSWERED: {text}")])
            await updater.complete()
        elif word == "fail":
            await updater.failed(_agent_message(rest, context))
        elif word == "reject":
            await updater.reject(_agent_message(rest, context))
        elif word == "auth":
            await updater.requires_auth(_agent_message(rest, context))
        elif word == "ask":
            await updater.requires_input(_agent_message(rest, context))
        elif word == "hang":
            await asyncio.Event().wait()  # until canceled
        elif word == "data":
            value = struct_pb2.Value()
            value.struct_value.update({"n": 42})
            await updater.add_artifact([Part(text="here"), Part(data=value)])
            await updater.complete()
        elif word == "big":
            await updater.add_artifact([Part(text="x" * int(rest))])
            await updater.complete()
        else:
            await updater.add_artifact([Part(text=text.upper())], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.seen.cancels.append(context.task_id or "")
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def agent_card(
    url: str, *, interface_url: str | None = None, description: str | None = None
) -> AgentCard:
    """The test agent's card; its JSON-RPC interface at ``interface_url`` (default ``url``)."""
    return AgentCard(
        name="Shouter",
        description=description or "Repeats what it is told, louder.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=interface_url or url, protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="shout",
                name="shout",
                description="Upper-cases a text.",
                tags=["text"],
            )
        ],
    )


@contextmanager
def running_agent(
    *,
    card_path: str | None = None,
    interface_path: str = "/",
    interface_url: str | None = None,
    description: str | None = None,
    host: str = "127.0.0.1",
) -> Iterator[RunningAgent]:
    """Serve the test agent on ``host`` (a free port) until exit.

    ``interface_path`` is where its card says JSON-RPC is (on this server), unless
    ``interface_url`` names another place altogether.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    url = f"http://{host}:{sock.getsockname()[1]}"
    seen = Seen()
    card = agent_card(
        url, interface_url=interface_url or f"{url}{interface_path}", description=description
    )
    handler = DefaultRequestHandler(
        agent_executor=ScriptedExecutor(seen), task_store=InMemoryTaskStore(), agent_card=card
    )

    async def raw(request: Request) -> Response:
        seen.raw_posts += 1
        await request.body()
        if request.url.path == "/huge":
            return Response(b"{" + b" " * HUGE_BYTES, media_type="application/json")
        return Response(b"<html>not json-rpc</html>", media_type="application/json")

    card_routes = (
        create_agent_card_routes(card, card_url=card_path)
        if card_path
        else create_agent_card_routes(card)
    )
    app = Starlette(
        routes=[
            *card_routes,
            Route("/garbage", raw, methods=["POST"]),
            Route("/huge", raw, methods=["POST"]),
            *create_jsonrpc_routes(handler, rpc_url="/"),
        ]
    )

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.cards += scope["path"].endswith(".json")
            headers = dict(scope["headers"])
            if b"authorization" in headers:
                seen.authorization.append(headers[b"authorization"].decode())
        await app(scope, receive, send)

    server = uvicorn.Server(uvicorn.Config(counting, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the test A2A agent did not start")
            threading.Event().wait(0.01)
        yield RunningAgent(url=url, seen=seen)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
