"""Fakes for gateway tests: a fake clock, scriptable providers, and a gateway rig around them.

``FakeClock`` is both the gateway's clock and its sleep: a sleep advances the clock and
records the wait it was asked for, so retry-after, backoff and cooldown assertions are exact
and take no real time. ``FakeProvider`` plays outcomes in order (an exception instance is
raised, a string is answered), can stream deltas first, hold every call at a gate, and
advance the fake clock to simulate latency.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Callable, Iterable

from wiring import llm_request

from raytroupe.actors.llm.budget import Ledger
from raytroupe.actors.llm.gateway import CallContext, Gateway, RetryPolicy
from raytroupe.actors.llm.pricing import PriceTable
from raytroupe.actors.llm.provider import DeltaSink
from raytroupe.protocols import (
    DeploymentSpec,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    OfflineModel,
    RouteSpec,
    RouteStrategy,
    Usage,
)

__all__ = ["FakeClock", "FakeProvider", "Rig", "spin"]


async def spin(until: Callable[[], bool], turns: int = 500) -> None:
    """Let other tasks run until ``until()`` holds; fail if it never does (no real time)."""
    for _ in range(turns):
        if until():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"still not true after {turns} turns of the event loop")


class FakeClock:
    """A monotonic clock that only moves when told to, or when something sleeps on it."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # yield, as a real sleep would; takes no time

    @property
    def waited(self) -> float:
        """Total seconds slept."""
        return sum(self.sleeps)


class FakeProvider:
    """Plays ``outcomes`` in order, then answers ``then`` forever.

    An outcome that is an exception is raised (a copy, so details never leak between calls);
    a string is the answer text. ``deltas`` are streamed before each outcome when the request
    streams. With ``gate``, every call waits for it after entering; ``latency_s`` advances
    ``clock`` during each call.
    """

    name = "fake"

    def __init__(
        self,
        label: str,
        outcomes: Iterable[BaseException | str] = (),
        *,
        then: BaseException | str = "ok",
        log: list[str] | None = None,
        clock: FakeClock | None = None,
        latency_s: float = 0.0,
        gate: asyncio.Event | None = None,
        deltas: tuple[str, ...] = (),
        prompt_tokens: int = 3,
        completion_tokens: int = 2,
    ) -> None:
        self.label = label
        self.outcomes = list(outcomes)
        self.then = then
        self.log = log if log is not None else []
        self.clock = clock
        self.latency_s = latency_s
        self.gate = gate
        self.deltas = deltas
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.requests: list[LLMRequest] = []
        self.times: list[float] = []
        self.current = 0
        self.peak = 0
        self.entered = asyncio.Event()
        self.closed = False

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        self.requests.append(request)
        self.log.append(self.label)
        self.times.append(self.clock() if self.clock is not None else 0.0)
        outcome = self.outcomes.pop(0) if self.outcomes else self.then
        self.current += 1
        self.peak = max(self.peak, self.current)
        self.entered.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.clock is not None:
                self.clock.advance(self.latency_s)
            if request.stream and on_delta is not None:
                for text in self.deltas:
                    await on_delta(LLMDelta(text=text))
            if isinstance(outcome, BaseException):
                raise copy.copy(outcome)
            return LLMResponse(
                text=outcome,
                usage=Usage(
                    prompt_tokens=self.prompt_tokens,
                    completion_tokens=self.completion_tokens,
                    calls=1,
                ),
                model=request.model,
                provider=self.name,
            )
        finally:
            self.current -= 1

    async def close(self) -> None:
        self.closed = True


class Rig:
    """A gateway on a fake clock, with a seeded rng, and the fake deployments bound to it."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        ledger: Ledger | None = None,
        prices: PriceTable | None = None,
        seed: int = 0,
    ) -> None:
        self.clock = FakeClock()
        self.ledger = ledger or Ledger()
        self.log: list[str] = []
        self.providers: dict[str, FakeProvider] = {}
        self.gateway = Gateway(
            policy or RetryPolicy(),
            prices or PriceTable(),
            self.ledger,
            clock=self.clock,
            sleep=self.clock.sleep,
            rng=random.Random(seed),  # noqa: S311 - jitter, not secrets
        )

    def deploy(
        self,
        name: str,
        *outcomes: BaseException | str,
        spec: DeploymentSpec | None = None,
        **options: object,
    ) -> FakeProvider:
        provider = FakeProvider(name, outcomes, log=self.log, clock=self.clock, **options)  # type: ignore[arg-type]
        self.gateway.bind(name, spec or OfflineModel(), provider)
        self.providers[name] = provider
        return provider

    def route(
        self,
        name: str,
        *deployments: str,
        fallbacks: tuple[str, ...] = (),
        strategy: RouteStrategy = "static",
    ) -> None:
        spec = RouteSpec(deployments=deployments, fallbacks=fallbacks, strategy=strategy)
        self.gateway.bind(name, spec, None)

    async def ask(
        self,
        model: str,
        *,
        context: CallContext | None = None,
        on_delta: DeltaSink | None = None,
        **fields: object,
    ) -> LLMResponse:
        request = llm_request("hello there", model=model, **fields)
        return await self.gateway.complete(request, context or CallContext(), on_delta)
