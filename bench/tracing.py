"""Tracing's cost: the same jobs with OpenTelemetry on and off, measured in the same run.

With tracing on, every actor exports its spans live over OTLP/HTTP to a receiver on
127.0.0.1 (tests/support/otlp_receiver.py, decoding each request as a collector would).

1. Per job: a job of ``SUBTASKS`` subtasks on the offline model (no latency, so raytroupe's
   own work is all there is to measure), ``JOBS`` jobs one after another after a warm-up;
   the median ``JobResult.timings.total_s`` with tracing on against off.
2. Cold start: ``runtime.connect()`` in a fresh process until every system actor answers.
   It starts the local Ray with the ``OTEL_*`` variables set, so every actor has them (no
   ``runtime_env``) and imports the SDK and sets its exporter up as it starts.
3. The hot path with tracing off: the envelope stamp every router-client call makes, and a
   span's ``with`` block, against a bare function call (ns per call, in this process).

Each phase of 1 and 2 runs in a fresh process with a Ray of its own; off and on alternate,
``ROUNDS`` times each, so that a change of the machine's load falls on both (the job figure
pools every round's jobs, the cold start takes the median round).

Usage: python bench/tracing.py [--quick] [--json PATH]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from _common import Figure, Section, main, median

ROOT = Path(__file__).resolve().parents[1]
SUBTASKS = 8
JOBS = 20
ROUNDS = 2


def _phase(traced: bool, jobs: int) -> dict[str, Any]:
    """One phase, in this (fresh) process: connect, warm up, then ``jobs`` jobs."""
    sys.path.insert(0, str(ROOT))
    from raytroupe import runtime  # noqa: PLC0415
    from tests.support.otlp_receiver import OtlpReceiver  # noqa: PLC0415

    with OtlpReceiver() as receiver, tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        if traced:
            os.environ |= {
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                "OTEL_BSP_SCHEDULE_DELAY": "500",
            }
        started = time.perf_counter()
        rt = runtime.connect(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=Path(tmp) / "journal.sqlite",
            memory_config=runtime.MemoryConfig(path=Path(tmp) / "memory"),
        )
        connect_s = time.perf_counter() - started
        quiet = runtime.MemoryPolicy(recall=False, write_results=False)
        team = runtime.Team(
            name="bench-trace",
            agents=[runtime.AgentSpec(name=f"bt-{i}", role="worker", max_concurrency=8,
                                      memory=quiet) for i in range(2)],
            max_parallel=SUBTASKS,
        )  # fmt: skip
        task = "\n".join(f"- Summarize note {i}." for i in range(SUBTASKS))
        try:
            for _ in range(3):  # warm-up: provisioning, first calls
                rt.submit(task, team=team).result(timeout=300)
            totals = [rt.submit(task, team=team).result(timeout=300).timings.total_s
                      for _ in range(jobs)]  # fmt: skip
            roots = _roots(receiver, jobs + 3) if traced else 0
            spans = len(receiver.spans())
        finally:
            rt.shutdown()
    return {"connect_s": connect_s, "job_s": totals, "spans": spans, "roots": roots}


def _roots(receiver: Any, jobs: int, within_s: float = 30.0) -> int:
    """The jobs' root spans received, once all ``jobs`` are (or ``within_s`` has passed)."""
    deadline = time.monotonic() + within_s
    while True:
        roots = sum(1 for s in receiver.spans() if s.name.startswith("job "))
        if roots >= jobs or time.monotonic() > deadline:
            return roots
        time.sleep(0.1)


def _run_phase(traced: bool, jobs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    run = subprocess.run(  # noqa: S603 - this very script, as a fresh process
        [sys.executable, __file__, "--phase", "on" if traced else "off", "--jobs", str(jobs)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if run.returncode != 0:
        raise RuntimeError(f"tracing phase failed: {run.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def _pooled(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Several phases of one kind as one: every job's time, the median cold start."""
    return {
        "job_s": [t for p in phases for t in p["job_s"]],
        "connect_s": median([p["connect_s"] for p in phases]),
        "spans": sum(p["spans"] for p in phases),
        "roots": sum(p["roots"] for p in phases),
    }


def _hot_path() -> tuple[float, float, float]:
    """Nanoseconds per call, tracing off: a bare call, the envelope stamp, an empty span."""
    from raytroupe.actors.telemetry import tracing  # noqa: PLC0415
    from raytroupe.protocols import AgentMessage, Event  # noqa: PLC0415

    message = AgentMessage(sender="a", recipient="b", payload=Event(name="e"))

    def bare(m: AgentMessage) -> AgentMessage:
        return m

    def block() -> None:
        with tracing.span("x"):
            pass

    n = 200_000
    per = [
        min(timeit.repeat(call, number=n, repeat=5)) / n * 1e9
        for call in (lambda: bare(message), lambda: tracing.stamp(message), block)
    ]
    return per[0], per[1], per[2]


def run(quick: bool) -> Section:
    """Measure the three figures."""
    jobs, rounds = (6, 1) if quick else (JOBS, ROUNDS)
    section = Section("Tracing: OpenTelemetry on (live OTLP export) against off")
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for _ in range(rounds):  # alternated: a change of the machine's load hits both
        for traced in (False, True):
            runs[traced].append(_run_phase(traced=traced, jobs=jobs))
    off, on = (_pooled(runs[False]), _pooled(runs[True]))
    section.figures.append(
        Figure(
            name=f"job of {SUBTASKS} subtasks, offline model (median total_s)",
            value=median(on["job_s"]) * 1000,
            baseline=median(off["job_s"]) * 1000,
            unit="ms",
            baseline_name="tracing off",
            note=f"{rounds} rounds: {on['spans']} spans received, {on['roots']} job roots of "
            f"{rounds * (jobs + 3)} jobs",
        )
    )
    section.figures.append(
        Figure(
            name="cold start: connect() until system actors up",
            value=on["connect_s"],
            baseline=off["connect_s"],
            unit="s",
            baseline_name="tracing off",
            note="each actor imports the SDK and sets its exporter up (the variables are "
            "inherited: connect() started the Ray)",
        )
    )
    bare, stamp, block = _hot_path()
    section.figures.append(
        Figure(
            name="tracing off: envelope stamp per router call",
            value=stamp,
            baseline=bare,
            unit="ns",
            baseline_name="a bare function call",
        )
    )
    section.figures.append(
        Figure(
            name="tracing off: an empty span block",
            value=block,
            baseline=bare,
            unit="ns",
            baseline_name="a bare function call",
        )
    )
    section.notes.append(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return section


if __name__ == "__main__":
    if "--phase" in sys.argv:
        traced = sys.argv[sys.argv.index("--phase") + 1] == "on"
        count = int(sys.argv[sys.argv.index("--jobs") + 1])
        print(json.dumps(_phase(traced, count)), flush=True)
    else:
        main(run)
