"""``--durations-file PATH``: where a run's time went, written as a snapshot to keep.

pytest's ``--durations`` prints the slowest phases; this writes every test's time (setup, call
and teardown together: a module's fixture counts against its first test) by file and by test,
with the tier's wall time, so that a change of tiers can be weighed against the last snapshot
(``tests/durations/``). With pytest-xdist the controller writes it, from its workers' reports.
"""

from __future__ import annotations

import os
import platform
import time
from collections import defaultdict
from pathlib import Path

import pytest

SLOWEST = 40
"""Tests listed one by one; the rest are in their file's figure."""


class Durations:
    """Collects each test's phases and writes the snapshot at the session's end."""

    def __init__(self, path: Path, command: str) -> None:
        self._path = path
        self._command = command
        self._started = time.monotonic()
        self._seconds: dict[str, float] = defaultdict(float)
        self._outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._seconds[report.nodeid] += report.duration
        if report.when == "call" or report.outcome != "passed":
            self._outcomes[report.nodeid] = report.outcome

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if getattr(session.config, "workerinput", None) is not None:
            return  # an xdist worker: the controller writes the file
        wall = time.monotonic() - self._started
        by_file: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self._seconds.items():
            by_file[nodeid.split("::", 1)[0]] += seconds
        counts: dict[str, int] = defaultdict(int)
        for outcome in self._outcomes.values():
            counts[outcome] += 1
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        lines = [
            f"# {self._command}",
            f"# {summary}; wall {wall:.0f} s; tests' own time {sum(self._seconds.values()):.0f} s",
            f"# {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}",
            "",
            "## by file (seconds)",
            *(f"{s:8.1f}  {name}" for name, s in sorted(by_file.items(), key=lambda x: -x[1])),
            "",
            f"## the {SLOWEST} slowest tests (seconds)",
            *(
                f"{s:8.1f}  {nodeid}"
                for nodeid, s in sorted(self._seconds.items(), key=lambda x: -x[1])[:SLOWEST]
            ),
        ]
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.write_text("\n".join(lines) + "\n")
