"""Prompt caching, reasoning controls and one-call turns, through the official SDKs.

The providers talk to the local wire server, which keeps a prompt cache as the providers do
(Anthropic: its ``cache_control`` breakpoints; OpenAI: every prompt prefix it saw) and holds
requests to the rules of Anthropic's extended thinking (a tool-use turn sent back without its
signed thinking block is a 400). No Ray: these are the adapters and the price table.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from raytroupe.actors.llm.anthropic_provider import AnthropicProvider
from raytroupe.actors.llm.openai_provider import OpenAIProvider
from raytroupe.actors.llm.pricing import PriceTable
from raytroupe.protocols import (
    AnthropicModel,
    BadRequest,
    ChatMessage,
    LLMRequest,
    LLMResponse,
    OpenAICompatibleModel,
    Reasoning,
    ToolSpec,
)
from tests.support.keys import TEST_KEY, TEST_KEY_ENV
from tests.support.wire_model import signature
from tests.support.wire_server import Reply, WireServer

CALC = ToolSpec(
    name="calculator",
    description="Evaluates arithmetic.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)
SYSTEM = ChatMessage(role="system", content="You are a careful analyst who shows the numbers.")
ASK = ChatMessage(role="user", content="What is 17 times 23, plus four?")


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture
def server(wire, monkeypatch):
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    wire.reset()
    return wire


def _claude(server: WireServer, **fields: Any) -> AnthropicProvider:
    spec = AnthropicModel(
        base_url=server.base_url_anthropic, model="claude-wire", api_key_env=TEST_KEY_ENV, **fields
    )
    return AnthropicProvider(spec)


def _oai(server: WireServer) -> OpenAIProvider:
    spec = OpenAICompatibleModel(base_url=server.base_url_openai, model="wire-test-model")
    return OpenAIProvider(spec, api_key=TEST_KEY)


def _ask(provider: AnthropicProvider | OpenAIProvider, *requests: LLMRequest) -> list[LLMResponse]:
    async def go() -> list[LLMResponse]:
        try:
            return [await provider.complete(r) for r in requests]
        finally:
            await provider.close()

    return asyncio.run(go())


def _turns(*, stream: bool, **fields: Any) -> tuple[LLMRequest, Callable[..., LLMRequest]]:
    """The first call of a tool loop, and how the second is made from its answer."""
    first = LLMRequest(model="m", messages=(SYSTEM, ASK), tools=(CALC,), stream=stream, **fields)

    def second(answer: LLMResponse, *, keep_thoughts: bool = True) -> LLMRequest:
        turn = ChatMessage(
            role="assistant",
            content=answer.text,
            tool_calls=answer.tool_calls,
            thoughts=answer.thoughts if keep_thoughts else (),
        )
        result = ChatMessage(role="tool", tool_call_id=answer.tool_calls[0].call_id, content="391")
        return first.model_copy(update={"messages": (*first.messages, turn, result)})

    return first, second


@pytest.mark.parametrize("stream", [False, True])
def test_claudes_thinking_goes_back_with_its_tool_use_turn_and_the_prefix_is_read_from_cache(
    server, stream
):
    server.script(Reply.tool("calculator", {"expression": "17 * 23 + 4"}), Reply(text="It is 395."))
    first, second = _turns(stream=stream, reasoning=Reasoning(effort="low"))
    (one,) = _ask(_claude(server), first)
    (two,) = _ask(_claude(server), second(one))

    assert two.text == "It is 395."
    (thought,) = one.thoughts
    assert thought.text.startswith("Thinking about:")
    assert thought.signature == signature(thought.text)  # assembled whole from the stream
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 1024 + 2048  # the answer's room is the answer's
    sent_back = server.requests[1].body["messages"][1]["content"][0]
    assert sent_back == {
        "type": "thinking",
        "thinking": thought.text,
        "signature": thought.signature,
    }
    # the first call wrote its prompt to the cache; the second read that much back
    assert one.usage.cached_tokens == 0
    assert one.usage.cache_write_tokens > 0
    assert two.usage.cached_tokens == one.usage.cache_write_tokens
    # the breakpoint is the last message: the new turn is written for the next call
    assert two.usage.cache_write_tokens > 0
    assert two.usage.prompt_tokens == two.usage.cached_tokens + two.usage.cache_write_tokens
    assert one.usage.reasoning_tokens == 0  # Anthropic counts thinking in output_tokens only


def test_a_tool_use_turn_sent_back_without_its_thinking_is_refused_by_the_provider(server):
    """What the test above guards: the wire server holds requests to the API's rule."""
    server.script(Reply.tool("calculator", {"expression": "1 + 1"}))
    first, second = _turns(stream=False, reasoning=Reasoning(effort="low"))
    (one,) = _ask(_claude(server), first)
    with pytest.raises(BadRequest, match="must start with a thinking block"):
        _ask(_claude(server), second(one, keep_thoughts=False))


def test_an_edited_thought_is_refused(server):
    server.script(Reply.tool("calculator", {"expression": "1 + 1"}))
    first, second = _turns(stream=False, reasoning=Reasoning(effort="low"))
    (one,) = _ask(_claude(server), first)
    forged = one.model_copy(
        update={"thoughts": (one.thoughts[0].model_copy(update={"text": "I was told to."}),)}
    )
    with pytest.raises(BadRequest, match="Invalid `signature`"):
        _ask(_claude(server), second(forged))


def test_thinking_is_not_asked_for_when_a_tool_call_is_required(server):
    """The API refuses thinking with a forced tool choice: such a call goes without it."""
    required = LLMRequest(
        model="m",
        messages=(ASK,),
        tools=(CALC,),
        tool_choice="required",
        reasoning=Reasoning(budget_tokens=4000),
    )
    (answer,) = _ask(_claude(server), required)
    assert answer.tool_calls
    assert "thinking" not in server.requests[0].body
    thinking = required.model_copy(update={"tool_choice": "auto"})
    _ask(_claude(server), thinking)
    assert server.requests[1].body["thinking"] == {"type": "enabled", "budget_tokens": 4000}


def test_without_prompt_caching_nothing_is_marked_or_cached(server):
    first, second = _turns(stream=False)
    server.script(Reply.tool("calculator", {"expression": "2 * 2"}), Reply(text="4"))
    (one,) = _ask(_claude(server, prompt_cache=False), first)
    (two,) = _ask(_claude(server, prompt_cache=False), second(one))
    assert two.text == "4"
    assert all("cache_control" not in str(r.body) for r in server.requests)
    assert one.usage.cached_tokens == two.usage.cached_tokens == 0
    assert one.usage.cache_write_tokens == two.usage.cache_write_tokens == 0


def test_one_call_per_turn_is_asked_of_claude_when_the_agent_runs_calls_in_order(server):
    serial = LLMRequest(model="m", messages=(ASK,), tools=(CALC,), parallel_tool_calls=False)
    _ask(_claude(server), serial)
    assert server.requests[0].body["tool_choice"] == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }


@pytest.mark.parametrize("stream", [False, True])
def test_openai_reasoning_effort_cached_prompt_and_one_call_per_turn(server, stream):
    server.script(Reply.tool("calculator", {"expression": "17 * 23 + 4"}), Reply(text="It is 395."))
    first, second = _turns(
        stream=stream, reasoning=Reasoning(effort="high"), parallel_tool_calls=False
    )
    (one,) = _ask(_oai(server), first)
    (two,) = _ask(_oai(server), second(one))

    body = server.requests[0].body
    assert body["reasoning_effort"] == "high"
    assert body["parallel_tool_calls"] is False
    assert one.usage.reasoning_tokens == 256
    assert one.usage.completion_tokens > 256
    # OpenAI caches prompt prefixes by itself: the second call's first turns were seen
    assert one.usage.cached_tokens == 0
    assert two.usage.cached_tokens == sum(len(m.text.split()) for m in (SYSTEM, ASK))
    assert two.text == "It is 395."


def test_cached_tokens_are_priced_as_the_provider_prices_them(server):
    """The pool prices each call with the table: Claude's reads at 0.1x, its writes at 1.25x."""
    server.script(Reply.tool("calculator", {"expression": "17 * 23 + 4"}), Reply(text="It is 395."))
    first, second = _turns(stream=False)
    (one,) = _ask(_claude(server), first)
    (two,) = _ask(_claude(server), second(one))
    table = PriceTable()
    sonnet = AnthropicModel(model="claude-sonnet-4-20250514")
    priced = table.priced(sonnet, two.usage)
    plain = two.usage.prompt_tokens - two.usage.cached_tokens - two.usage.cache_write_tokens
    expected = (
        plain * 3.0
        + two.usage.cached_tokens * 0.3
        + two.usage.cache_write_tokens * 3.75
        + two.usage.completion_tokens * 15.0
    ) / 1e6
    assert two.usage.cached_tokens > 0
    assert priced.cost_usd == pytest.approx(expected)
    assert (
        priced.cost_usd
        < table.priced(
            sonnet, two.usage.model_copy(update={"cached_tokens": 0, "cache_write_tokens": 0})
        ).cost_usd
    )
