"""The system tier's reliability drills: one node lost, the GCS killed and started again, and
the head node lost and started again.

Each drill starts a Ray cluster of its own (``ray.cluster_utils.Cluster``; a head whose GCS
keeps its tables in Redis), which cannot share a process with the session's Ray that the
rest of the tier uses: each runs here in a pytest process of its own, its output shown if it
fails. The full chaos run, the node-loss matrix, model faults and load stay in
``python -m tests.reliability.report`` (RELIABILITY.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.reliability.report import HEAD_LOSS, OWN_CLUSTER, OWN_HEAD, pytest_command

ROOT = Path(__file__).resolve().parents[2]
DRILLS = (*OWN_CLUSTER, *OWN_HEAD, *HEAD_LOSS)
DRILL_TIMEOUT_S = 900

pytestmark = pytest.mark.timeout(DRILL_TIMEOUT_S + 60)


@pytest.mark.parametrize("drill", DRILLS)
def test_the_drill_passes_in_a_process_of_its_own(drill: str) -> None:
    run = subprocess.run(
        pytest_command((drill,)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DRILL_TIMEOUT_S,
        check=False,
    )
    summary = (run.stdout.strip().splitlines() or ["(no output)"])[-1]
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert " passed" in summary
    assert "skipped" not in summary
    assert "deselected" not in summary
