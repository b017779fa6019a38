"""Sandbox overhead per run, as a ratio against a plain subprocess measured in the same run.

1. ``/bin/true``: ``Isolation.run`` (launcher, namespaces, the sandbox's root, uid drop or a
   user namespace, rlimits, pipes, reaping)
   against ``asyncio.create_subprocess_exec("/bin/true")`` with the same pipes.
2. ``print(1)`` in Python: ``Isolation.run_python`` against the same interpreter started plainly.

Needs namespaces: as root, or as another user where user namespaces are allowed (the probe says
when it cannot, and the first line printed says which). Usage:
python bench/sandbox.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from raytroupe.actors.tools.isolation import Isolation


async def _plain(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={},
        start_new_session=True,
    )
    await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}")


async def _times(runs: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    await call()  # warm caches (and the probe) outside the measurement
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def _bench(runs: int) -> None:
    iso = Isolation()
    ok, reason = iso.probe()
    if not ok:
        sys.exit(f"cannot isolate here: {reason}")
    with tempfile.TemporaryDirectory(prefix="troupe-bench-") as tmp:
        scratch = Path(tmp)

        async def sandboxed_true() -> None:
            result = await iso.run(["/bin/true"], scratch=scratch)
            if result.exit_code != 0:
                raise RuntimeError(result)

        async def sandboxed_python() -> None:
            result = await iso.run_python("print(1)", scratch=scratch)
            if result.exit_code != 0:
                raise RuntimeError(result)

        rows = [
            ("/bin/true", await _times(runs, lambda: _plain("/bin/true")), "plain"),
            ("/bin/true", await _times(runs, sandboxed_true), "sandboxed"),
            (
                "python print(1)",
                await _times(runs, lambda: _plain(iso.python, "-I", "-S", "-c", "print(1)")),
                "plain",
            ),
            ("python print(1)", await _times(runs, sandboxed_python), "sandboxed"),
        ]
    print(f"{platform.platform()}, Python {platform.python_version()}, {runs} runs each")
    print(f"sandbox: {reason}")
    print(f"{'program':<18}{'mode':<11}{'median ms':>10}{'p90 ms':>9}")
    medians = {}
    for program, times, mode in rows:
        medians[program, mode] = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"{program:<18}{mode:<11}{medians[program, mode]:>10.2f}{p90:>9.2f}")
    for program in ("/bin/true", "python print(1)"):
        extra = medians[program, "sandboxed"] - medians[program, "plain"]
        ratio = medians[program, "sandboxed"] / medians[program, "plain"]
        print(
            f"{program}: sandbox overhead {extra:.2f} ms per run, {ratio:.1f}x a plain subprocess"
        )


def main() -> None:
    """Run the benchmark from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(_bench(parser.parse_args().runs))


if __name__ == "__main__":
    main()
