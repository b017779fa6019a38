"""The AutoGen side of ``bench/cpu_tools.py``, run in ``bench/.venv-autogen`` (autogen-core).

N worker agents on one ``SingleThreadedAgentRuntime``; a coordinator agent sends each a work
message, concurrently, and gathers the replies. Two ways for a worker's handler to run the
work, each timed: as an AutoGen ``FunctionTool`` (which runs a synchronous function in the
default thread pool: N threads contend for the GIL), or by calling the function itself (which
holds the event loop while it runs). Plain sequential calls of the same function are timed in
this process too.

Started by ``bench/cpu_tools.py`` (``bench/.venv-autogen/bin/python bench/_autogen_cpu.py``); it
speaks JSON lines on stdin and stdout (see :func:`_serve`), so that the caller can interleave
AutoGen's runs with raytroupe's and load changes on the machine hit both alike.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import platform
import sys
import time
from dataclasses import dataclass

from _cpu_work import spin
from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    message_handler,
)
from autogen_core.tools import FunctionTool


@dataclass
class Job:
    """Fan ``n`` pieces of work out to the workers, as tool calls or as plain calls."""

    n: int
    iterations: int
    as_tool: bool


@dataclass
class Work:
    """One piece of work, for the worker's tool."""

    iterations: int
    seed: int


@dataclass
class PlainWork:
    """One piece of work, for the worker to call the function itself."""

    iterations: int
    seed: int


@dataclass
class Done:
    """A worker's result."""

    value: int


@dataclass
class JobDone:
    """Every worker's result, in order."""

    values: list[int]


class Worker(RoutedAgent):
    """Runs the work as a tool call, or calls the function itself."""

    def __init__(self) -> None:
        super().__init__("runs the CPU-bound tool")
        self._tool = FunctionTool(spin, description="CPU-bound busy work.", name="spin")

    @message_handler
    async def on_work(self, message: Work, ctx: MessageContext) -> Done:
        """Call the tool with the message's arguments."""
        arguments = {"iterations": message.iterations, "seed": message.seed}
        value = await self._tool.run_json(arguments, ctx.cancellation_token)
        return Done(value=int(value))

    @message_handler
    async def on_plain_work(self, message: PlainWork, ctx: MessageContext) -> Done:  # noqa: ARG002 - the handler signature AutoGen expects
        """Call the function (on the event loop, as a handler doing CPU work does)."""
        return Done(value=spin(message.iterations, message.seed))


class Coordinator(RoutedAgent):
    """Sends every piece of work at once and gathers the results."""

    def __init__(self) -> None:
        super().__init__("fans the work out")

    @message_handler
    async def on_job(self, message: Job, ctx: MessageContext) -> JobDone:
        """Fan out, gather."""
        replies = await asyncio.gather(
            *(
                self.send_message(
                    (Work if message.as_tool else PlainWork)(
                        iterations=message.iterations, seed=i + 1
                    ),
                    AgentId("worker", str(i)),
                    cancellation_token=ctx.cancellation_token,
                )
                for i in range(message.n)
            )
        )
        return JobDone(values=[r.value for r in replies])


async def _serve() -> None:
    """Answer each request line ``{"n", "iterations"}`` with one JSON line of times.

    Each request times N plain sequential calls, then one AutoGen job of N workers calling
    the tool, then one of N workers calling the function, on one runtime that lives as long
    as this process (agents are created by their first message, so the caller's first
    request of each N is a warm-up). Ends at the end of stdin.
    """
    runtime = SingleThreadedAgentRuntime()
    await Worker.register(runtime, "worker", Worker)
    await Coordinator.register(runtime, "coordinator", Coordinator)
    runtime.start()
    coordinator = AgentId("coordinator", "default")
    hello = {
        "autogen_core": importlib.metadata.version("autogen-core"),
        "python": platform.python_version(),
    }
    print(json.dumps(hello), flush=True)
    try:
        while line := await asyncio.to_thread(sys.stdin.readline):
            request = json.loads(line)
            n, iterations = int(request["n"]), int(request["iterations"])
            start = time.perf_counter()
            expected = [spin(iterations, i + 1) for i in range(n)]
            sequential = time.perf_counter() - start
            times = {"sequential_s": sequential}
            for key, as_tool in (("tool_s", True), ("plain_s", False)):
                start = time.perf_counter()
                job = Job(n=n, iterations=iterations, as_tool=as_tool)
                done = await runtime.send_message(job, coordinator)
                times[key] = time.perf_counter() - start
                if done.values != expected:
                    raise RuntimeError("the workers' results differ from the function's")
            print(json.dumps(times), flush=True)
    finally:
        await runtime.stop()


if __name__ == "__main__":
    asyncio.run(_serve())
