"""One deployment's live state: its provider, limits, cooldown and observed latency."""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from aiolimiter import AsyncLimiter

from raytroupe.actors.llm.pricing import Price
from raytroupe.actors.llm.provider import LLMProvider
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import ConfigError, DeploymentSpec

__all__ = ["DeploymentState", "backoff_s", "split"]

_LATENCY_WEIGHT = 0.3
"""Weight of the newest sample in the latency moving average."""


def backoff_s(failures: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: in [d/2, d] for d = base * 2^(failures-1), capped."""
    ceiling = min(cap_s, base_s * 2 ** max(0, failures - 1))
    return rng.uniform(ceiling / 2, ceiling)


def split(total: int, replica: int, replicas: int) -> int:
    """``replica``'s part of ``total`` between ``replicas``: the parts add up to ``total``."""
    return total // replicas + (1 if replica < total % replicas else 0)


def _request_limiter(per_minute: float | None) -> AsyncLimiter | None:
    """Requests paced evenly: one every ``60/per_minute`` seconds, no burst.

    Any window of ``w`` seconds then sees at most ``w * per_minute / 60 + 1`` requests, so a
    provider's per-minute quota is never overrun, even by the first second's burst.
    """
    return None if per_minute is None else AsyncLimiter(1, 60.0 / per_minute)


def _token_limiter(per_minute: float | None) -> AsyncLimiter | None:
    """Tokens in a bucket holding 6 s worth (one call may need thousands at once)."""
    return None if per_minute is None else AsyncLimiter(per_minute / 10.0, 6.0)


@dataclass
class DeploymentState:
    """A bound deployment, shared by every call routed to it."""

    name: str
    spec: DeploymentSpec
    provider: LLMProvider
    price: Price | None
    clock: Callable[[], float]
    in_flight: int = 0
    failures: int = 0
    cooldown_until: float = 0.0
    latency_s: float | None = None
    calls: int = 0
    share: tuple[int, int] = (0, 1)
    """``(replica, replicas)``: this pool's part of the deployment's limits."""
    _rpm: AsyncLimiter | None = field(init=False, default=None)
    _tpm: AsyncLimiter | None = field(init=False, default=None)
    _slots: asyncio.Semaphore | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        replica, replicas = self.share
        spec = self.spec
        self._rpm = None if spec.rpm is None else _request_limiter(spec.rpm / replicas)
        self._tpm = None if spec.tpm is None else _token_limiter(spec.tpm / replicas)
        if spec.max_concurrency is not None:
            slots = split(spec.max_concurrency, replica, replicas)
            if slots == 0:
                raise ConfigError(
                    f"{self.name} allows {spec.max_concurrency} concurrent calls, fewer than "
                    f"the pool's {replicas} replicas: raise its max_concurrency or lower "
                    "LLMConfig.replicas",
                    deployment=self.name,
                )
            self._slots = asyncio.Semaphore(slots)

    @property
    def cost_rank(self) -> float:
        """Price of a typical call (1 prompt token to 1 completion token), for ordering.

        A deployment without a known price ranks last.
        """
        if self.price is None:
            return math.inf
        return self.price.input_usd_per_mtok + self.price.output_usd_per_mtok

    def cooling(self) -> float:
        """Seconds until this deployment may be tried again (0: now)."""
        return max(0.0, self.cooldown_until - self.clock())

    def failed(self, wait_s: float) -> None:
        """Record a retryable failure: cool down for ``wait_s`` at least.

        The deadline only ever moves later: a short Retry-After on one failure never cuts
        short the longer cooldown an earlier failure asked for.
        """
        self.failures += 1
        self.cooldown_until = max(self.cooldown_until, self.clock() + wait_s)

    def cool(self, wait_s: float) -> None:
        """Rest for ``wait_s`` at least (another replica saw this deployment fail)."""
        self.cooldown_until = max(self.cooldown_until, self.clock() + wait_s)

    def succeeded(self, latency_s: float) -> None:
        """Record a success and its latency."""
        self.failures = 0
        self.calls += 1
        previous = self.latency_s
        self.latency_s = (
            latency_s if previous is None else previous + _LATENCY_WEIGHT * (latency_s - previous)
        )

    @contextlib.asynccontextmanager
    async def admitted(self, tokens: int) -> AsyncIterator[None]:
        """Wait for a concurrency slot and for the rpm and tpm buckets; hold the slot.

        ``in_flight`` counts the call from the moment it queues here.
        """
        self.in_flight += 1  # queued calls count: least_busy must see them
        metrics.queue_depth("llm", self.name, self.in_flight)
        try:
            slot = self._slots
            if slot is not None:
                await slot.acquire()
            try:
                if self._rpm is not None:
                    await self._rpm.acquire()
                if self._tpm is not None:
                    await self._tpm.acquire(min(float(tokens), self._tpm.max_rate))
                yield
            finally:
                if slot is not None:
                    slot.release()
        finally:
            self.in_flight -= 1
            metrics.queue_depth("llm", self.name, self.in_flight)

    async def charge_tokens(self, extra: int) -> None:
        """Take tokens a call used beyond its estimate out of the tpm bucket."""
        if self._tpm is not None and extra > 0:
            await self._tpm.acquire(min(float(extra), self._tpm.max_rate))


def estimate_prompt_tokens(texts: list[str]) -> int:
    """A deliberately high estimate of prompt tokens: a token per 3 bytes, 4 per message."""
    return sum(math.ceil(len(t.encode()) / 3) + 4 for t in texts)
