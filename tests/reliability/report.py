"""Run the reliability and security suites and write ``RELIABILITY.md`` from their figures.

Usage: python -m tests.reliability.report [--out RELIABILITY.md]

Six pytest runs, each in its own process: the suites that share one local Ray (router
fuzzing, chaos smoke and full, full restarts, security, sandbox escapes, model faults,
load), node loss (a 3-node cluster of its own), the node-loss matrix (a cluster of its own),
the GCS kill (a head of its own, its GCS tables in Redis), the head node lost (a 2-node
cluster of its own, the GCS tables in Redis), and `ray up` on two SSH nodes of
this host (root: it makes accounts and runs sshd). Every figure a test records
(``tests.support.figures.record``) lands in a fresh folder; the report is a table of them
per suite, with the machine, the date, each run's outcome and duration. Exits non-zero if
a run failed (the report says so too).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED_RAY = (
    "tests/unit/test_router_fuzz.py",
    "tests/integration/test_chaos_smoke.py",
    "tests/integration/test_full_restart.py",
    "tests/integration/test_security.py",
    "tests/integration/test_sandbox_escapes.py",
    "tests/reliability/test_chaos.py",
    "tests/reliability/test_model_faults.py",
    "tests/reliability/test_load.py",
)
OWN_CLUSTER = ("tests/reliability/test_node_loss.py",)
MATRIX = ("tests/reliability/test_node_loss_matrix.py",)
OWN_HEAD = ("tests/reliability/test_gcs_restart.py",)
HEAD_LOSS = ("tests/reliability/test_head_loss.py",)
RAY_UP = ("tests/cluster/test_ray_up.py",)
TITLES = {
    "chaos": "Chaos: jobs while actors are killed",
    "node_loss": "Node loss: a worker node removed mid-job (3-node cluster)",
    "node_loss_matrix": "Node loss, all of it: the nodes of the orchestrator, the LLM pool, the "
    "sandboxes, the memory actor, one at a time and together (state in PostgreSQL)",
    "gcs": "The head's GCS killed mid-job and started again (tables in Redis)",
    "head_loss": "The head node lost mid-job: every process of it killed, then a head started "
    "again at its address (GCS tables in Redis, the journal in PostgreSQL)",
    "full_restart": "Full restart: every process of a deployment stopped and started again "
    "on the same state, with work waiting at each kind of point",
    "ray_up": "`ray up` of deployments/cluster.local.yaml: two SSH nodes on this host",
    "model_faults": "Model faults: 5xx, 429 + Retry-After, cut streams (llmock)",
    "load": "Load: concurrent jobs on loopback",
    "fuzz": "Fuzzing: the router and the envelope codec (hypothesis)",
    "security": "Security",
}
COMMAND = "python -m tests.reliability.report"


def pytest_command(files: tuple[str, ...]) -> list[str]:
    """A pytest run of ``files`` in a process of its own. ``-m ""``: every test of the files,
    whatever its tier (the default deselects the system tier); ``-n0``: in that one process,
    as the files that start a Ray of their own need."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n0", "-m", "",
            *files]  # fmt: skip


def _pytest(files: tuple[str, ...], figures: Path) -> tuple[int, float, str]:
    env = {**os.environ, "TROUPE_FIGURES_DIR": str(figures)}
    command = pytest_command(files)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines() or ["(no output)"]
    failed = [line.split(" - ", 1)[0].split(" ", 1)[1] for line in lines
              if line.startswith(("FAILED ", "ERROR "))]  # fmt: skip
    summary = lines[-1] + (f" ({', '.join(f'`{t}`' for t in failed)})" if failed else "")
    return done.returncode, time.perf_counter() - start, summary


def _rows(figures: Path) -> dict[str, list[dict[str, object]]]:
    suites: dict[str, list[dict[str, object]]] = {}
    for path in sorted(figures.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            suites.setdefault(str(row["suite"]), []).append(row)
    return suites


def _value(row: dict[str, object]) -> str:
    value = row["value"]
    text = (
        f"{value:,.3g}"
        if isinstance(value, float)
        else f"{value:,}"
        if isinstance(value, int)
        else str(value)
    )
    return f"{text} {row['unit']}".strip()


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(runs: list[tuple[tuple[str, ...], int, float, str]], figures: Path) -> str:
    """The markdown report for these pytest runs and the figures they recorded."""
    lines = [
        "# Reliability and security figures",
        "",
        f"Produced by `{COMMAND}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}. Every figure below was measured by a test "
        "that also asserts the property it measures (no hang, nothing lost, no secret "
        "found, ...); the test files are named in each run.",
        "",
        "| Run | Outcome | Seconds |",
        "|---|---|---|",
    ]
    for files, code, seconds, summary in runs:
        outcome = summary if code == 0 else f"FAILED (exit {code}): {summary}"
        names = ", ".join(f"`{f}`" for f in files)
        lines.append(f"| {names} | {_cell(outcome)} | {seconds:.0f} |")
    suites = _rows(figures)
    for suite in [*TITLES, *sorted(set(suites) - set(TITLES))]:
        if suite not in suites:
            continue
        lines += ["", f"## {TITLES.get(suite, suite)}", "", "| Figure | Value | Note |"]
        lines.append("|---|---|---|")
        for row in suites[suite]:
            lines.append(f"| {_cell(row['name'])} | {_cell(_value(row))} | {_cell(row['note'])} |")
    lines += [
        "",
        "The chaos smoke test, router fuzzing, the security tests and the sandbox escape "
        "suite also run in CI (the README's test command), as do API-key auth and tenant "
        "isolation of jobs over HTTP (`tests/integration/test_http_api.py`) and schemathesis "
        "over the HTTP API (`tests/integration/test_http_schema.py`), and `ray up` on two "
        "SSH nodes (`tests/cluster/test_ray_up.py`); the other suites are slower and run "
        "here.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    """Run the pytest runs, write the report; non-zero if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "RELIABILITY.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="troupe-figures-") as folder:
        figures = Path(folder)
        runs = []
        for files in (SHARED_RAY, OWN_CLUSTER, MATRIX, OWN_HEAD, HEAD_LOSS, RAY_UP):
            code, seconds, summary = _pytest(files, figures)
            print(f"{'ok' if code == 0 else 'FAILED'} {seconds:6.0f} s  {summary}")
            runs.append((files, code, seconds, summary))
        args.out.write_text(render(runs, figures), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0 if all(code == 0 for _, code, _, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
