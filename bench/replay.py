"""What turn-level durability costs a call, as ratios against the same call not kept.

1. A model call through ``LLMAdapterPool`` (offline provider, no latency; the ledger in a
   SQLite file, as ``troupe up`` keeps it): named by its place in a subtask's run, so its
   answer is kept in the transaction that bills it, against the same call without a place.
   And the same call asked again at its place: answered from the record.
2. A ``calculator`` call through ``ToolSandbox.call``: at a step of a job's subtask (its
   result kept by step), against the same call outside a job (not kept).

Each pair is measured alternately in the same run. Usage: python bench/replay.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.tools.sandbox import ToolSandbox, ToolsConfig
from raytroupe.protocols import (
    AgentMessage,
    ChatMessage,
    LLMRequest,
    ToolCall,
    decode,
    encode,
)


async def _pair(
    runs: int, first: Callable[[int], Awaitable[object]], second: Callable[[int], Awaitable[object]]
) -> tuple[list[float], list[float]]:
    await first(-1)  # warm both outside the measurement
    await second(-1)
    times: tuple[list[float], list[float]] = ([], [])
    for n in range(runs):
        for call, kept in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            await call(n)
            kept.append((time.perf_counter() - started) * 1000)
    return times


def _ask(pool: LLMAdapterPool, place: str | None) -> Awaitable[bytes | None]:
    request = LLMRequest(
        model="offline", messages=(ChatMessage(role="user", content="Say hi."),), replay=place
    )
    message = AgentMessage(sender="ada", recipient="llm", job_id="bench", payload=request)
    return pool.receive(encode(message))


async def _bench(runs: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="troupe-bench-") as tmp:
        pool = LLMAdapterPool(state=Path(tmp) / "llm.sqlite")
        await pool.on_start()
        fresh = itertools.count()
        kept, plain = await _pair(
            runs,
            lambda _n: _ask(pool, f"s1/{next(fresh)}/c"),  # a new place each time: made, kept
            lambda _n: _ask(pool, None),
        )
        rows.append(("model call", "kept with its cost", kept, "not kept", plain))
        replayed, made = await _pair(
            runs,
            lambda _n: _ask(pool, "s1/0/c"),  # made once (the warm-up), then answered
            lambda _n: _ask(pool, None),
        )
        reply = await _ask(pool, "s1/0/c")
        answer = None if reply is None else decode(reply).payload
        if not getattr(answer, "replayed", False):
            raise RuntimeError(f"the call at s1/0/c was not replayed: {answer!r}")
        rows.append(("model call", "replayed", replayed, "made", made))
        await pool.on_stop()

        config = ToolsConfig(state_dir=Path(tmp) / "state", scratch_root=Path(tmp) / "scratch")
        sandbox = ToolSandbox(config)
        await sandbox.on_start()
        await sandbox.grant("ada", ["calculator"])

        def calculate(job_id: str | None) -> Callable[[int], Awaitable[object]]:
            def call(n: int) -> Awaitable[object]:
                asked = ToolCall(call_id="c", tool="calculator", task_id="s1", step=n + 1,
                                 arguments={"expression": f"{n + 2} * 3"})  # fmt: skip
                return sandbox.call(asked, agent="ada", job_id=job_id)

            return call

        kept, plain = await _pair(runs, calculate("bench"), calculate(None))
        rows.append(("calculator", "kept by step", kept, "not kept", plain))
        await sandbox.close()

    print(f"{platform.platform()}, Python {platform.python_version()}, {runs} runs each")
    heading = [("call", 12, "<"), ("mode", 20, "<"), ("median ms", 10, ">"), ("", 2, "<")]
    heading += [("baseline", 10, "<"), ("median ms", 10, ">"), ("ratio", 8, ">")]
    print("".join(f"{text:{align}{width}}" for text, width, align in heading))
    for what, mode, times, base, base_times in rows:
        median, baseline = statistics.median(times), statistics.median(base_times)
        print(
            f"{what:<12}{mode:<20}{median:>10.3f}  {base:<10}{baseline:>10.3f}"
            f"{median / baseline:>8.2f}"
        )


def main() -> None:
    """Run the benchmark from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(_bench(parser.parse_args().runs))


if __name__ == "__main__":
    main()
