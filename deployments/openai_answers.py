"""A chat's answer: the job's result waited for, or streamed as ``chat.completion.chunk`` events.

The stream's content, joined, is exactly the non-streamed answer: the answer's tokens as the
model writes them when they are the answer (:class:`_AnswerTokens`), else the answer once the
job has it (see :mod:`raytroupe.deployments.openai_compat` for when).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Final

from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.openai_tools import CallerTools, asked_calls, called
from raytroupe.protocols import (
    JobEvent,
    JobFailed,
    JobResult,
    JobTimeout,
    TroupeError,
    orchestrator_address,
)
from raytroupe.runtime.client import SystemClient

__all__: list[str] = []  # nothing public: its names serve openai_compat alone

_CHUNK_CHARS: Final = 64
_POLL_S: Final = 15.0
"""Longest wait for a job's next events; a quiet stream gets a keep-alive comment then."""
_PROGRESS: Final = frozenset(
    {"plan_ready", "subtask_started", "subtask_finished", "job_aggregating"}
)


async def _wait(
    client: SystemClient,
    config: APIConfig,
    job_id: str,
    tenant: str,
    timeout: float | None = None,
) -> JobResult:
    """The job's result within ``timeout`` seconds (default: the chat timeout).

    Raises:
        JobTimeout: it has none by then.
    """
    wait = config.chat_timeout_s if timeout is None else timeout
    result = await client.wait(job_id, wait, tenant=tenant)
    if result is None:
        raise JobTimeout(
            f"job {job_id} did not finish within {config.chat_timeout_s} s; "
            f"follow it at /v1/jobs/{job_id}",
            job_id=job_id,
        )
    return result


def _succeeded(result: JobResult) -> JobResult:
    if result.status != "succeeded":
        why = result.error.message if result.error else result.status
        raise JobFailed(f"job {result.job_id} {result.status}: {why}", job_id=result.job_id)
    return result


@dataclass(frozen=True)
class _Stream:
    job_id: str
    tenant: str
    completion_id: str
    model: str
    include_usage: bool
    as_json: bool = False
    tools: CallerTools | None = None


async def _chunks(client: SystemClient, config: APIConfig, stream: _Stream) -> AsyncIterator[str]:
    """The SSE body of a streamed chat completion (see the module's docstring)."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data(stream, created, [{"index": 0, "delta": delta, "finish_reason": finish}])

    yield chunk({"role": "assistant", "content": ""})
    tokens = _AnswerTokens(stream.job_id)
    try:
        seen, ended = 0, False
        deadline = time.monotonic() + config.chat_timeout_s
        while not ended and (left := deadline - time.monotonic()) > 0:
            events = await client.events(
                stream.job_id, seen, min(_POLL_S, left), tenant=stream.tenant
            )
            for event in events:
                seen, ended = event.seq, ended or event.terminal
                for text in [] if stream.as_json else tokens.take(event):
                    yield chunk({"content": text})
                if event.type in _PROGRESS:
                    yield f": {event.type} {event.subtask_id or ''}\n\n"
            if not events:
                yield ": waiting\n\n"  # keeps proxies from closing a quiet stream
        result = _succeeded(await _wait(client, config, stream.job_id, stream.tenant, 0.0))
        calls = None if stream.tools is None else asked_calls(result.answer, stream.tools)
    except TroupeError as exc:  # headers are sent: report in the stream
        yield _error(exc.message, exc.code.value)
        return
    if calls:
        listed = called(stream.job_id, calls)
        yield chunk({"tool_calls": [{"index": n, **call} for n, call in enumerate(listed)]})
        yield chunk({}, "tool_calls")
        if stream.include_usage:
            yield _data(stream, created, [], usage=_usage(result))
        yield "data: [DONE]\n\n"
        return
    rest = tokens.rest(_content(result, stream.as_json))
    if rest is None:
        yield _error(
            f"the streamed text is not job {stream.job_id}'s answer (the answer was made "
            f"again after it streamed); read it at /v1/jobs/{stream.job_id}",
            "answer_superseded",
        )
        return
    for start in range(0, len(rest), _CHUNK_CHARS):
        yield chunk({"content": rest[start : start + _CHUNK_CHARS]})
    yield chunk({}, "stop")
    if stream.include_usage:
        yield _data(stream, created, [], usage=_usage(result))
    yield "data: [DONE]\n\n"


def _data(stream: _Stream, created: int, choices: list[dict[str, Any]], **extra: Any) -> str:
    """One ``chat.completion.chunk`` event."""
    body = {
        "id": stream.completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": stream.model,
        "choices": choices,
        **extra,
    }
    return f"data: {json.dumps(body)}\n\n"


def _error(message: str, code: str) -> str:
    """OpenAI's in-stream error event (its clients raise ``APIError`` with the message)."""
    return f"data: {json.dumps({'error': {'message': message, 'type': code, 'code': code}})}\n\n"


class _AnswerTokens:
    """Picks the answer's tokens out of a job's events, and what of the answer is left to send.

    They are the ``llm_delta`` events from the job's orchestrator address once the job is
    aggregating: the aggregation, streamed when its text is the answer as it comes (agents'
    deltas come from their own names). Leading whitespace is held back until text comes,
    since a blank aggregation is replaced by the subtasks' outputs.
    """

    def __init__(self, job_id: str) -> None:
        self._source = orchestrator_address(job_id)
        self._aggregating = False
        self._held = ""
        self._sent: list[str] = []

    def take(self, event: JobEvent) -> list[str]:
        """The answer's text ``event`` brings, in pieces (none for any other event)."""
        self._aggregating = self._aggregating or event.type == "job_aggregating"
        if not self._aggregating or event.type != "llm_delta":
            return []
        if event.data.get("agent") != self._source:
            return []
        return [text for piece in _texts(event) if (text := self._shown(piece))]

    def rest(self, answer: str) -> str | None:
        """What of ``answer`` has not been sent; None if what was sent is not its start."""
        sent = "".join(self._sent)
        return answer[len(sent) :] if answer.startswith(sent) else None

    def _shown(self, piece: str) -> str:
        if not self._sent:
            self._held += piece
            if not self._held.strip():
                return ""
            piece, self._held = self._held, ""
        self._sent.append(piece)
        return piece


def _texts(event: JobEvent) -> Iterator[str]:
    """The text pieces of an ``llm_delta`` event (tool-call fragments carry none)."""
    deltas = event.data.get("deltas")
    for delta in deltas if isinstance(deltas, list) else ():
        text = delta.get("text") if isinstance(delta, dict) else None
        if isinstance(text, str) and text:
            yield text


def _content(result: JobResult, as_json: bool) -> str:
    """The message content: the answer, or (asked for JSON) the standard output envelope."""
    if as_json and result.output is not None:
        return result.output.model_dump_json()
    return result.answer


def _usage(result: JobResult) -> dict[str, int]:
    usage = result.usage
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
