"""Official SDK clients aimed at a ``WireServer`` (max_retries=0 unless given), one-shot calls."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tests.support.wire_server import WireServer

OPENAI_MODEL = "gpt-test"
ANTHROPIC_MODEL = "claude-test"


def openai_client(server: WireServer, **kwargs: Any) -> openai.AsyncOpenAI:
    """``AsyncOpenAI`` on the server, api_key "test-key"; use it as ``async with``."""
    options = {"api_key": "test-key", "max_retries": 0, **kwargs}
    return openai.AsyncOpenAI(base_url=server.base_url_openai, **options)


def anthropic_client(server: WireServer, **kwargs: Any) -> anthropic.AsyncAnthropic:
    """``AsyncAnthropic`` on the server, api_key "test-key"; use it as ``async with``."""
    options = {"api_key": "test-key", "max_retries": 0, **kwargs}
    return anthropic.AsyncAnthropic(base_url=server.base_url_anthropic, **options)


def user(text: str) -> list[dict[str, Any]]:
    """A one-message conversation."""
    return [{"role": "user", "content": text}]


async def openai_chat(server: WireServer, messages: list | None = None, **kwargs: Any) -> Any:
    """One non-streamed chat completion (default message "hello there")."""
    async with openai_client(server) as client:
        return await client.chat.completions.create(
            model=OPENAI_MODEL, messages=messages or user("hello there"), **kwargs
        )


async def anthropic_message(server: WireServer, messages: list | None = None, **kwargs: Any) -> Any:
    """One non-streamed message (max_tokens 64, default message "hello there")."""
    async with anthropic_client(server) as client:
        return await client.messages.create(
            model=ANTHROPIC_MODEL, max_tokens=64, messages=messages or user("hello there"), **kwargs
        )


async def openai_stream(server: WireServer, messages: list | None = None, **kwargs: Any) -> list:
    """All chunks of one streamed chat completion (default message "one two three")."""
    async with openai_client(server) as client:
        stream = await client.chat.completions.create(
            model=OPENAI_MODEL, messages=messages or user("one two three"), stream=True, **kwargs
        )
        return [chunk async for chunk in stream]


async def anthropic_stream(server: WireServer, messages: list | None = None, **kwargs: Any) -> list:
    """All events of one streamed message (SDK-parsed; pings are dropped by the SDK)."""
    async with anthropic_client(server) as client:
        stream = await client.messages.create(
            model=ANTHROPIC_MODEL,
            max_tokens=64,
            messages=messages or user("one two three"),
            stream=True,
            **kwargs,
        )
        return [event async for event in stream]
