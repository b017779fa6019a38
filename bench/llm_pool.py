"""LLM pool benchmarks, each a ratio against a baseline measured in the same run.

1. Overhead per call: the pool (gateway, limits, budget ledger, pricing) against calling the
   OpenAI SDK directly, both against the same local llmock server on 127.0.0.1.
2. Rate limit held: 200 calls in flight against a deployment limited to ``RPM`` requests a
   minute, the server answering after 50 ms; the rate the server saw against the limit.

Usage: python bench/llm_pool.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time

import openai
from llmock.pytest_plugin import LLMock
from llmock.testing import LLMockServer

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.protocols import Budget, ChatMessage, LLMRequest, OpenAICompatibleModel

RPM = 1200
IN_FLIGHT = 200


def _request(model: str) -> LLMRequest:
    return LLMRequest(model=model, messages=(ChatMessage(role="user", content="ping"),))


async def _per_call_sdk(server: LLMock, calls: int) -> list[float]:
    client = openai.AsyncOpenAI(base_url=server.base_url("openai"), api_key="bench", max_retries=0)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "ping"}]
        )
        times.append(time.perf_counter() - start)
    await client.close()
    return times


async def _per_call_pool(server: LLMock, calls: int) -> list[float]:
    spec = OpenAICompatibleModel(base_url=server.base_url("openai"), model="gpt-4o-mini")
    pool = LLMAdapterPool(config=LLMConfig(models={"bench": spec}))
    context = CallContext(job_id="bench", agent="bench")
    request = _request("bench").model_copy(update={"budget": Budget(usd=1000.0)})
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await pool.complete(request, context)
        times.append(time.perf_counter() - start)
    await pool.close()
    return times


async def _rate_held(server: LLMock) -> tuple[float, float, int]:
    spec = OpenAICompatibleModel(base_url=server.base_url("openai"), model="gpt-4o-mini", rpm=RPM)
    pool = LLMAdapterPool(config=LLMConfig(models={"limited": spec}))
    await asyncio.gather(*(pool.complete(_request("limited")) for _ in range(IN_FLIGHT)))
    await pool.close()
    stamps = sorted(r.started_at for r in server.requests)
    span = stamps[-1] - stamps[0]
    rate = (len(stamps) - 1) / span * 60
    worst = max(sum(1 for t in stamps if s <= t < s + 1.0) for s in stamps) * 60
    return rate, worst, len(stamps)


def main() -> None:
    """Run both benchmarks and print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400, help="sequential calls per side")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    with LLMockServer() as mock:
        server = LLMock(mock).reset()
        asyncio.run(_per_call_sdk(server, 20))  # warm both paths
        asyncio.run(_per_call_pool(server, 20))
        sdk = statistics.median(asyncio.run(_per_call_sdk(server, args.calls)))
        pool = statistics.median(asyncio.run(_per_call_pool(server, args.calls)))
        server.reset().delay(0.05, times=None)
        rate, worst, seen = asyncio.run(_rate_held(server))
    print(f"{'measure':<44}{'value':>14}{'baseline':>14}{'ratio':>9}  goal")
    print(
        f"{'per call, median (pool vs OpenAI SDK direct)':<44}{pool * 1e3:>11.2f} ms"
        f"{sdk * 1e3:>11.2f} ms{pool / sdk:>8.2f}x  <= 1.2x"
    )
    print(
        f"{f'rate with {IN_FLIGHT} in flight, rpm {RPM}':<44}{rate:>10.0f} rpm{RPM:>10d} rpm"
        f"{rate / RPM:>8.3f}x  <= 1.05x"
    )
    print(
        f"{'busiest 1 s window, as rpm':<44}{worst:>10.0f} rpm{RPM:>10d} rpm"
        f"{worst / RPM:>8.3f}x  (bucket: 1 s)"
    )
    print(f"calls seen by the server in the rate run: {seen}")


if __name__ == "__main__":
    main()
