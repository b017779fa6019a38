"""The pool against llmock, a third-party mock of the providers that breaks on demand and then
grades the client (``assert_resilient``: Retry-After honoured, backoff, no retry storms, no
truncated stream accepted). No Ray here: the pool runs in this process, llmock on 127.0.0.1.
"""

from __future__ import annotations

import asyncio

import pytest

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext, RetryPolicy
from raytroupe.protocols import (
    AnthropicModel,
    Budget,
    BudgetExceeded,
    ChatMessage,
    LLMRequest,
    OpenAICompatibleModel,
    RouteSpec,
    StreamInterrupted,
)

POLICY = RetryPolicy(max_attempts=4, base_backoff_s=0.05, max_backoff_s=0.5)


def _pool(llmock, **extra):
    models = {
        "mock-oai": OpenAICompatibleModel(
            base_url=llmock.base_url("openai"), model="gpt-4o-mini", **extra
        ),
        "mock-claude": AnthropicModel(
            base_url=llmock.base_url("anthropic"),
            model="claude-3-5-haiku-latest",
            api_key_env="ANTHROPIC_API_KEY",  # the llmock fixture sets a dummy one
        ),
        "oai-then-claude": RouteSpec(deployments=("mock-oai",), fallbacks=("mock-claude",)),
    }
    return LLMAdapterPool(config=LLMConfig(models=models, retry=POLICY))


def _ask(text: str = "Say hello.", model: str = "mock-oai", **fields) -> LLMRequest:
    return LLMRequest(model=model, messages=(ChatMessage(role="user", content=text),), **fields)


def test_rate_limits_are_retried_after_their_retry_after(llmock):
    llmock.rate_limit(times=2, retry_after=0.2)
    response = asyncio.run(_pool(llmock).complete(_ask()))

    assert response.text
    statuses = [r.status for r in llmock.requests]
    assert statuses == [429, 429, 200]
    llmock.assert_resilient(strict=True)


def test_an_outage_falls_back_to_another_provider(llmock):
    llmock.outage(provider="openai")
    response = asyncio.run(_pool(llmock).complete(_ask(model="oai-then-claude")))

    assert response.provider == "anthropic"
    assert response.deployment == "mock-claude"
    assert [r.provider for r in llmock.requests] == ["openai", "anthropic"]


def test_a_truncated_stream_is_never_accepted(llmock):
    llmock.truncate(after_chunks=3)
    with pytest.raises(StreamInterrupted):
        asyncio.run(_pool(llmock).complete(_ask(stream=True)))
    # content had been delivered, so no retry unless the caller allows one; llmock's verdict
    # cannot tell a raised error from an accepted half answer, so it is not asked here
    assert len(llmock.requests) == 1


def test_a_truncated_stream_is_retried_when_the_caller_allows_it(llmock):
    llmock.truncate(after_chunks=3)
    response = asyncio.run(_pool(llmock).complete(_ask(stream=True, retry_partial_stream=True)))
    assert response.finish_reason == "stop"
    assert len(llmock.requests) == 2
    llmock.assert_resilient(strict=True)


def test_a_broken_stream_is_retried_when_the_caller_allows_it(llmock):
    llmock.disconnect(after_chunks=2)
    deltas = []

    async def collect(delta):
        deltas.append(delta)

    pool = _pool(llmock)
    request = _ask(stream=True, retry_partial_stream=True)
    response = asyncio.run(pool.complete(request, on_delta=collect))

    assert response.text
    assert len(llmock.requests) == 2
    llmock.assert_resilient(strict=True)


def test_fifty_concurrent_calls_never_exceed_a_budget(llmock):
    pool = _pool(llmock, input_usd_per_mtok=2.0, output_usd_per_mtok=8.0)
    budget = Budget(usd=0.05)
    context = CallContext(job_id="job-budget", agent="bench")

    async def main():
        calls = [pool.complete(_ask(budget=budget), context) for _ in range(50)]
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(main())
    answered = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BudgetExceeded)]
    assert len(answered) + len(refused) == 50
    assert answered
    assert refused
    spent = asyncio.run(pool.spent("job:job-budget"))
    assert spent.usd <= budget.usd
    assert spent.usd == pytest.approx(sum(r.usage.cost_usd for r in answered))
    assert len(llmock.requests) == len(answered)  # refused calls never reached the provider


def test_our_rate_limit_keeps_a_quota_from_ever_answering_429(llmock):
    llmock.limits(rpm=120)
    pool = _pool(llmock, rpm=120)

    async def main():
        await asyncio.gather(*(pool.complete(_ask()) for _ in range(6)))

    asyncio.run(main())
    assert [r.status for r in llmock.requests] == [200] * 6
