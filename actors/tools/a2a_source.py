"""A2A agents as tool sources: one remote agent, one tool ``a2a_<name>`` (A2A protocol 1.0).

::

    async with A2AToolSource(A2AAgentSpec(name="triage", url="https://agents.example/"),
                             outbound=Outbound(policy)) as source:
        [definition] = await source.tools()
        result = await source.call({"message": "Is order 1234 late?"})

What a caller must know:

- Every connection goes through ``outbound`` (the tools' :class:`NetworkPolicy`): the card's
  fetch and each JSON-RPC call. The card's JSON-RPC interface must be at the configured URL's
  scheme, host and port; a card naming another origin is refused before anything is sent there.
  Redirects are not followed. The headers of ``headers_env`` (read from the environment when
  the source starts) therefore go to that origin only.
- The card and the answers are the remote's text, untrusted: the card's description and
  skills reach the tool's description trimmed (``spec.description`` replaces them); an answer
  is the result's data, never configuration. Every HTTP body is read up to ``max_body_bytes``
  (past it the call fails) and the result's data is cut to ``max_output_bytes``.
- A call sends one message (SendMessage, answered at once with the task), then polls the task
  (GetTask) until it ends or ``spec.timeout_s`` passes; then it cancels the task (CancelTask,
  best effort) and fails "timed out". The result's data: ``text`` (the artifacts' text parts,
  else the final status message's), ``data`` (data parts), ``task_id``, ``context_id``,
  ``state``.
- ``call`` never raises: a task that ends failed, rejected, canceled or needing auth, or that
  asks for input, a card that cannot be read, a refused or failed connection, an answer too
  large or not A2A all come back as ``ok=False`` with a ``tool`` error. ``call_id`` is ``""``.
- ``tools()`` never needs the remote: an unreadable card leaves a tool described by the spec
  (or generically), and calls read the card again until it is read once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import structlog
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol

from raytroupe.actors.outbound import Outbound, OutboundRefused
from raytroupe.protocols import A2AAgentSpec, ErrorCode, ErrorPayload, ToolDef, ToolResult
from raytroupe.protocols.llm import ToolArguments

__all__ = ["A2AToolSource"]

log = structlog.get_logger("raytroupe.tools.a2a")

CARD_TEXT_CHARS: Final = 1200
"""Most characters of the card's text (description and skills) put in the tool's description."""
_SKILLS: Final = 8
_SKILL_CHARS: Final = 200
_MESSAGE_CHARS: Final = 100_000
_ID_CHARS: Final = 256
_POLL_FIRST_S: Final = 0.05
_POLL_MAX_S: Final = 1.0
_START_S: Final = 10.0
_CANCEL_S: Final = 5.0
_CANCEL_GRACE_S: Final = _CANCEL_S + 5.0
"""The tool's own timeout is the spec's plus this: time to cancel the remote task."""
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

_WORKING: Final = frozenset(
    {TaskState.TASK_STATE_UNSPECIFIED, TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING}
)


class _Failed(Exception):
    """A call's outcome is a failure: ``message``, and whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = False, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.detail = detail


class _TooLarge(httpx.ReadError):
    """An HTTP body past the source's limit (an ``httpx`` error, which the SDK passes on)."""


class A2AToolSource:
    """The tool of one remote A2A agent (``spec``), reached under ``outbound``.

    Args:
        spec: the agent, as the operator configured it.
        outbound: the policy every connection passes (default: public addresses only).
        max_body_bytes: the most bytes of any HTTP body read from the agent.
        max_output_bytes: the most bytes of a result's data (as JSON).
    """

    def __init__(
        self,
        spec: A2AAgentSpec,
        *,
        outbound: Outbound | None = None,
        max_body_bytes: int = 1_000_000,
        max_output_bytes: int = 64_000,
    ) -> None:
        self.spec = spec
        self.name = spec.tool_name
        self._outbound = outbound or Outbound()
        self._max_body = max_body_bytes
        self._max_output = max_output_bytes
        parts = urlsplit(spec.url)
        self._origin = _origin(spec.url)
        self._card_path: str | None = None  # the SDK's default: /.well-known/agent-card.json
        self._base = spec.url.rstrip("/")
        if parts.path.endswith(".json"):
            self._base, self._card_path = f"{parts.scheme}://{parts.netloc}", parts.path
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self._card: AgentCard | None = None
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> A2AToolSource:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Read the agent's card now, if it can be read (a failure is logged, not raised).

        It waits ``min(spec.timeout_s, 10 s)`` at most: a sandbox starts whatever the remote does.
        """
        try:
            await self._connected(min(self.spec.timeout_s, _START_S))
        except _Failed as exc:
            log.warning("a2a_card_unread", agent=self.spec.name, error=exc.message)

    async def close(self) -> None:
        """Close the HTTP client; idempotent (a later call opens another)."""
        async with self._lock:
            http, self._http, self._client = self._http, None, None
            if http is not None:
                await http.aclose()

    async def tools(self) -> list[ToolDef]:
        """The one tool, ``a2a_<name>``, described by the spec or the card (trimmed)."""
        return [
            ToolDef(
                name=self.name,
                description=self._description(),
                parameters={
                    "type": "object",
                    "properties": {
                        "message": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": _MESSAGE_CHARS,
                            "description": "What to ask the agent, in words.",
                        },
                        "context_id": {
                            "type": "string",
                            "maxLength": _ID_CHARS,
                            "description": "Continue a conversation: a context_id it returned.",
                        },
                        "task_id": {
                            "type": "string",
                            "maxLength": _ID_CHARS,
                            "description": "Answer a task that asked for input: its task_id.",
                        },
                    },
                    "required": ["message"],
                    "additionalProperties": False,
                },
                timeout_s=min(self.spec.timeout_s + _CANCEL_GRACE_S, 3600.0),
                side_effects=self.spec.side_effects,
                tags=("a2a", "agent"),
                source=f"a2a:{self.spec.name}",
            )
        ]

    async def call(self, arguments: ToolArguments, *, timeout_s: float | None = None) -> ToolResult:
        """Ask the agent; every failure is ``ok=False`` (see the module docstring)."""
        started = time.perf_counter()
        limit = self.spec.timeout_s if timeout_s is None else min(timeout_s, self.spec.timeout_s)
        data: Any = None
        error: ErrorPayload | None = None
        try:
            data = self._bounded(await self._ask(arguments, limit))
        except _Failed as exc:
            detail = {"agent": self.spec.name, "tool": self.name, **exc.detail}
            error = ErrorPayload(
                code=ErrorCode.TOOL, message=exc.message, retryable=exc.retryable, detail=detail
            )
        except Exception as exc:  # call never raises: an unforeseen failure too
            log.exception("a2a_call_crashed", agent=self.spec.name)
            error = ErrorPayload(
                code=ErrorCode.TOOL,
                message=f"{self._where()} failed: {type(exc).__name__}: {exc}",
                detail={"agent": self.spec.name, "tool": self.name},
            )
        metadata = {"duration_s": time.perf_counter() - started, "agent": self.spec.name}
        return ToolResult(
            call_id="", tool=self.name, ok=error is None, data=data, error=error, metadata=metadata
        )

    # -- the exchange ---------------------------------------------------------------------

    async def _ask(self, arguments: ToolArguments, limit: float) -> dict[str, Any]:
        deadline = time.monotonic() + limit
        client = await self._connected(limit)
        message = Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=str(arguments["message"]))],
            context_id=str(arguments.get("context_id") or ""),
            task_id=str(arguments.get("task_id") or ""),
        )
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        sent: list[Task] = []  # the task, once the agent made one: what a timeout cancels
        try:
            async with asyncio.timeout_at(_loop_time(deadline)):
                answer = await self._exchange(client, request, sent)
        except TimeoutError:
            task_id = sent[-1].id if sent else None
            canceled = task_id is not None and await self._cancel(client, task_id)
            raise _Failed(
                f"{self._where()} timed out after {limit:g} s"
                + ("; its task was canceled" if canceled else ""),
                retryable=True,
                task_id=task_id,
            ) from None
        except _Failed:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK's errors and httpx's, told apart here
            raise self._failure(exc) from None
        if isinstance(answer, Message):
            return self._answer_message(answer)
        return self._answer_task(answer)

    async def _exchange(
        self, client: Client, request: SendMessageRequest, sent: list[Task]
    ) -> Task | Message:
        """Send ``request``; its answer: a message, or the task polled until it stops working."""
        task: Task | None = None
        async for event in _first(client.send_message(request)):
            if event.HasField("message"):
                return event.message  # type: ignore[no-any-return]
            if event.HasField("task"):
                task = event.task
        if task is None:
            raise _Failed(f"{self._where()} answered with neither a task nor a message")
        sent.append(task)
        pause = _POLL_FIRST_S
        while task.status.state in _WORKING:
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL_MAX_S)
            task = await client.get_task(GetTaskRequest(id=task.id, history_length=0))
        return task

    async def _cancel(self, client: Client, task_id: str) -> bool:
        try:
            async with asyncio.timeout(_CANCEL_S):
                await client.cancel_task(CancelTaskRequest(id=task_id))
        except Exception as exc:  # noqa: BLE001 - best effort: the call fails anyway
            log.info("a2a_cancel_failed", agent=self.spec.name, task_id=task_id, error=str(exc))
            return False
        return True

    def _answer_message(self, message: Message) -> dict[str, Any]:
        return {
            "agent": self.spec.name,
            "state": "completed",
            "task_id": message.task_id or None,
            "context_id": message.context_id or None,
            "text": "\n".join(get_text_parts(message.parts)),
            "data": get_data_parts(message.parts),
        }

    def _answer_task(self, task: Task) -> dict[str, Any]:
        state = _state(task.status.state)
        said = "\n".join(get_text_parts(task.status.message.parts))
        ids: dict[str, Any] = {
            "task_id": task.id,
            "context_id": task.context_id or None,
            "state": state,
        }
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            raise _Failed(
                f"{self._where()} asks for input: {_quoted(said)} (answer with task_id "
                f"{task.id!r} to go on)",
                **ids,
            )
        if task.status.state != TaskState.TASK_STATE_COMPLETED:
            raise _Failed(f"{self._where()} ended {state}: {_quoted(said)}", **ids)
        parts = [p for artifact in task.artifacts for p in artifact.parts]
        text = "\n".join(get_text_parts(parts)) or said
        data = get_data_parts(parts) or get_data_parts(task.status.message.parts)
        return {"agent": self.spec.name, **ids, "text": text, "data": data}

    def _bounded(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` whose JSON fits ``max_output_bytes``: data parts dropped, then text cut."""
        if _size(data) <= self._max_output:
            return data
        if data["data"]:
            data = {**data, "data": [], "data_omitted": len(data["data"])}
        data = {**data, "truncated": True}
        room = self._max_output - _size({**data, "text": ""})
        text = data["text"].encode()[: max(room - 16, 0)]  # JSON escapes may grow it: cut more
        while text and _size({**data, "text": text.decode("utf-8", "ignore")}) > self._max_output:
            text = text[: len(text) * 9 // 10]
        return {**data, "text": text.decode("utf-8", "ignore")}

    # -- the connection -------------------------------------------------------------------

    async def _connected(self, limit: float) -> Client:
        """The SDK client, reading the card first if it is not read yet."""
        async with self._lock:
            if self._client is not None:
                return self._client
            if self._http is None:
                self._http = httpx.AsyncClient(
                    headers=self._headers(),
                    timeout=httpx.Timeout(self.spec.timeout_s),
                    follow_redirects=False,
                    transport=_Capped(self._outbound.httpx_transport(), self._max_body),
                )
            try:
                await self._outbound.check_url(self.spec.url)  # a clear refusal before the fetch
                resolver = A2ACardResolver(self._http, self._base)
                async with asyncio.timeout(limit):
                    card = await resolver.get_agent_card(relative_card_path=self._card_path)
            except TimeoutError:
                raise _Failed(
                    f"{self._where()}: its card was not read in {limit:g} s", retryable=True
                ) from None
            except Exception as exc:  # noqa: BLE001 - a refused or failed fetch, or not a card
                raise self._failure(exc, what="its card cannot be read") from None
            self._card = card
            self._client = ClientFactory(self._config()).create(self._pinned(card))
            return self._client

    def _config(self) -> ClientConfig:
        return ClientConfig(
            streaming=False,
            polling=True,
            httpx_client=self._http,
            supported_protocol_bindings=[TransportProtocol.JSONRPC],
        )

    def _pinned(self, card: AgentCard) -> AgentCard:
        """``card`` with only its JSON-RPC interfaces at the configured origin.

        Raises:
            _Failed: it has none (the card's other URLs are never called).
        """
        offered = [i for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"]
        kept = [i for i in offered if _origin(i.url) == self._origin]
        if not kept:
            urls = [i.url[:200] for i in card.supported_interfaces][:5]
            self._card = None
            raise _Failed(
                f"{self._where()}: its card offers no JSON-RPC interface at {self._origin} "
                f"(the configured URL's scheme, host and port), only {urls}: refused",
                interfaces=urls,
            )
        pinned = AgentCard()
        pinned.CopyFrom(card)
        del pinned.supported_interfaces[:]
        pinned.supported_interfaces.extend(kept)
        return pinned

    def _headers(self) -> dict[str, str]:
        headers = {}
        for header, variable in self.spec.headers_env.items():
            value = os.environ.get(variable)
            if not value:
                raise _Failed(
                    f"{self._where()}: header {header!r} comes from the environment variable "
                    f"{variable!r}, which is not set in the sandbox's process"
                )
            headers[header] = value
        return headers

    def _description(self) -> str:
        if self.spec.description:
            return self.spec.description
        lead = f"Ask the remote A2A agent {self.spec.name!r} (send a message; get its answer)."
        if self._card is None:
            return lead
        lines = [_clean(self._card.description, CARD_TEXT_CHARS)]
        for skill in list(self._card.skills)[:_SKILLS]:
            what = _clean(f"{skill.name}: {skill.description}", _SKILL_CHARS)
            lines.append(f"- {what}")
        card = _clean("\n".join(line for line in lines if line), CARD_TEXT_CHARS, keep_lines=True)
        return f"{lead} Its card says (the remote's own words): {card}" if card else lead

    def _where(self) -> str:
        return f"A2A agent {self.spec.name!r}"

    def _failure(self, exc: BaseException, what: str = "the call failed") -> _Failed:
        """The ``_Failed`` for an exception of the SDK, httpx or the policy."""
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, _TooLarge):
                return _Failed(f"{self._where()}: {what}: {cause}")
            if isinstance(cause, OutboundRefused):  # trying again changes nothing
                return _Failed(f"{self._where()}: {what}: the outbound policy refused: {cause}")
            cause = cause.__cause__ or cause.__context__
        return _Failed(
            f"{self._where()}: {what}: {type(exc).__name__}: {str(exc)[:500]}", retryable=True
        )


class _Capped(httpx.AsyncBaseTransport):
    """A transport whose response bodies end in an error past ``max_bytes``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._max = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max:
            await response.aclose()
            raise _TooLarge(
                f"an answer of {declared} bytes, past the limit of {self._max}", request=request
            )
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._max, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, max_bytes: int, request: httpx.Request) -> None:
        self._inner = inner
        self._max = max_bytes
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._max:
                raise _TooLarge(
                    f"an answer past the limit of {self._max} bytes", request=self._request
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _first(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The events of a non-streaming send (one), the iterator closed after it."""
    try:
        async for event in events:
            yield event
            return
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    port = port or {"http": 80, "https": 443}.get(scheme)
    host = (parts.hostname or "").lower()
    return f"{scheme}://{host}:{port}" if host and scheme in {"http", "https"} else ""


def _state(state: int) -> str:
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _clean(text: str, limit: int, *, keep_lines: bool = False) -> str:
    text = _CONTROL.sub(" ", text) if keep_lines else " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quoted(text: str) -> str:
    return json.dumps(_clean(text, 2000)) if text else "(no message)"


def _size(data: Any) -> int:
    return len(json.dumps(data, default=str).encode())


def _loop_time(deadline: float) -> float:
    """``deadline`` (a ``time.monotonic()``) on the running loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline - time.monotonic())
