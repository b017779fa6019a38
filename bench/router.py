"""Router throughput: envelopes per second between two agents through the router.

Baseline, measured in the same run: raw Ray, one async actor calling another (1:1, the same
bytes there and back), with the same number of calls in flight. Through the router each
envelope is decoded, checked (dedupe, hop limit, deadline, registry), re-encoded and handed
to the recipient, whose reply comes back the same way: two Ray hops and four codec passes
where the baseline has one hop and none. The router's client batches the requests of one
event-loop turn into one call, and the router hands each recipient its envelopes as one
batch: that is what the figure measures, against the same path unbatched.

Usage: python bench/router.py [--quick] [--json PATH]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray
from _common import Curve, Figure, Section, main, median

from raytroupe.actors.endpoint import TakesBatches, serve_envelope
from raytroupe.actors.ray_handles import ray_mailbox
from raytroupe.actors.router import MessageRouter
from raytroupe.actors.router_handles import RayRouterClient
from raytroupe.protocols import Ack, AgentMessage, Event

IN_FLIGHT = (1, 10, 100, 400)
GOAL_IN_FLIGHT = 100


@ray.remote(num_cpus=0, max_concurrency=1000)
class Echo:
    """The baseline's recipient: returns what it is given."""

    async def echo(self, data: bytes) -> bytes:
        """``data``, unchanged."""
        return data


class _Agent:
    """A recipient agent: decodes each envelope and answers with an ack envelope."""

    async def _ack(self, message: AgentMessage, _payload: Event) -> AgentMessage:
        return message.reply(Ack(), sender="bench-b")

    async def receive(self, data: bytes) -> bytes | None:
        return await serve_envelope(data, self._ack, me="bench-b", accepts=(Event,))


class BatchAgent(TakesBatches, _Agent):
    """The same recipient, taking batches too."""


@ray.remote(num_cpus=0, max_concurrency=1000)
class Sender:
    """Sends ``n`` calls with ``in_flight`` outstanding at a time; returns the seconds taken."""

    def __init__(self, echo: Any, router: Any, max_batch: int) -> None:
        self._echo = echo
        self._client = RayRouterClient(router, max_batch=max_batch)

    async def raw(self, n: int, in_flight: int, payload: bytes) -> float:
        """Raw Ray: ``n`` echo calls."""
        return await _timed(n, in_flight, lambda: self._echo.echo.remote(payload))

    async def routed(self, n: int, in_flight: int) -> float:
        """``n`` requests to ``bench-b`` through the router."""

        async def one() -> None:
            message = AgentMessage(sender="bench-a", recipient="bench-b", payload=Event(name="p"))
            reply = await self._client.request(message)
            assert reply.kind == "ack"  # noqa: S101 - an error reply would be a failed run

        return await _timed(n, in_flight, one)


async def _timed(n: int, in_flight: int, call: Any) -> float:
    gate = asyncio.Semaphore(in_flight)

    async def one() -> None:
        async with gate:
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - start


def _router(agent_cls: type, name: str) -> Any:
    router = (
        ray.remote(MessageRouter)
        .options(num_cpus=0, max_concurrency=1000, name=name)
        .remote(mailbox_factory=ray_mailbox)
    )
    agent = ray.remote(agent_cls).options(num_cpus=0, max_concurrency=1000).remote()
    ray.get(router.register.remote("bench-b", agent, []))
    return router


def run(quick: bool) -> Section:
    """Measure raw Ray, the router unbatched and batched, at several numbers in flight."""
    n = 1000 if quick else 3000
    repeats = 2 if quick else 3
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        echo = Echo.remote()
        batched = Sender.remote(echo, _router(BatchAgent, "bench-router-batched"), 256)
        unbatched = Sender.remote(echo, _router(_Agent, "bench-router-unbatched"), 1)
        payload = AgentMessage(sender="a", recipient="b", payload=Event(name="p")).model_dump_json()
        data = payload.encode()
        ray.get([batched.raw.remote(200, 10, data), batched.routed.remote(200, 10)])  # warm-up
        ray.get(unbatched.routed.remote(200, 10))
        rates: dict[str, list[tuple[float, float]]] = {"raw Ray 1:1": [], "router": [],
                                                       "router, unbatched": []}  # fmt: skip
        for k in IN_FLIGHT:
            calls = {
                "raw Ray 1:1": lambda k=k: batched.raw.remote(n, k, data),
                "router": lambda k=k: batched.routed.remote(n, k),
                "router, unbatched": lambda k=k: unbatched.routed.remote(n, k),
            }
            for label, call in calls.items():
                seconds = median([ray.get(call()) for _ in range(repeats)])
                rates[label].append((k, n / seconds))
    finally:
        ray.shutdown()
    at = {label: dict(points)[GOAL_IN_FLIGHT] for label, points in rates.items()}
    section = Section(title="Router throughput (envelopes/s, A -> router -> B and back)")
    section.figures.append(
        Figure(
            name=f"through the router, {GOAL_IN_FLIGHT} in flight",
            value=at["router"],
            baseline=at["raw Ray 1:1"],
            unit="msg/s",
            baseline_name="raw Ray 1:1 async calls",
            goal=1.0,
        )
    )
    section.figures.append(
        Figure(
            name=f"router unbatched, {GOAL_IN_FLIGHT} in flight",
            value=at["router, unbatched"],
            baseline=at["raw Ray 1:1"],
            unit="msg/s",
            baseline_name="raw Ray 1:1 async calls",
            note="the same path with batching off (max_batch=1, no receive_many): before",
        )
    )
    one = {label: dict(points)[1] for label, points in rates.items()}
    section.figures.append(
        Figure(
            name="through the router, 1 in flight",
            value=one["router"],
            baseline=one["raw Ray 1:1"],
            unit="msg/s",
            baseline_name="raw Ray 1:1 async calls",
            goal=0.45,
            note="one at a time nothing can be batched: two hops against one (ceiling 0.5x)",
        )
    )
    section.curves.append(
        Curve(
            title="Router throughput",
            x_label="envelopes in flight",
            y_label="envelopes / s",
            series=rates,
            log_x=True,
        )
    )
    section.notes.append(f"{n} envelopes per point, median of {repeats} runs")
    return section


if __name__ == "__main__":
    main(run)
