"""`ray job submit` runs the example driver on a head started as `troupe up` starts one.

The head is the product's own ``ray start --head`` (``runtime.cli._local.start_head``: every
port free, the job agent's too, so it runs beside any other Ray of the machine). The job's
driver joins it through RAY_ADDRESS, which Ray sets for job drivers: `runtime.connect()`
without an address starts the system actors there. The head's processes, the job's driver
among them, have a home of their own (the example keeps its journal in ``~/.raytroupe``);
the head is stopped by its session, as `troupe down` does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from raytroupe.runtime.cli import _local

# system tier: a Ray of its own
pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/research_team.py"
# What is not uploaded with the working directory (Ray also skips .git and .venv by default).
EXCLUDES = [".venv", ".git", ".mypy_cache", ".ruff_cache", ".pytest_cache", "**/__pycache__"]
SUBMIT_TIMEOUT_S = 240.0
READY_S = 120.0

# The example's real answer (offline model: deterministic): its four questions sized by their
# text, the answers assembled in the order asked, with no planner or aggregation call.
EXPECTED = [
    "status: succeeded",
    "tokens in 5 model calls",
    "1. Actors in Ray are stateful workers, each living in its own process.",
    "2. Ray Serve exposes Python code over HTTP with autoscaling replicas.",
    "3. Chroma is an embedding database that stores vectors for retrieval.",
    "4. 17 * 23 + 4 = 395",
]


@pytest.fixture
def head(tmp_path, monkeypatch) -> Iterator[str]:
    """A head as `troupe up` starts it, its processes' home in ``tmp_path``; its dashboard.

    This process may have read another auth mode already (Ray reads it once): its own calls
    name the token themselves (:func:`_client`).
    """
    # a token of its own, made by start_head: nothing of the account's ~/.ray is read or made
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "auth_token"))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    home = tmp_path / "home"
    home.mkdir()
    with monkeypatch.context() as inside:
        inside.setenv("HOME", str(home))  # what the head's processes inherit
        state = tmp_path / "state"
        temp = _local.default_temp_dir(state)
        started = _local.start_head(
            state_dir=state, temp_dir=temp, ray_port=_local.free_port(),
            dashboard_port=_local.free_port(), num_cpus=2, owns_temp_dir=True,
        )  # fmt: skip
    try:
        _local.wait_ready(started, READY_S)
        yield started.state.dashboard_url
    finally:
        report = _local.stop_head(started.state)
        shutil.rmtree(temp, ignore_errors=True)
        assert not report.left, f"processes of the head survived SIGKILL: {report.left}"


def _client(dashboard: str) -> JobSubmissionClient:
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
    return JobSubmissionClient(f"http://{dashboard}", headers={"authorization": f"Bearer {token}"})


def test_ray_job_submit_runs_the_example_driver(head):
    dashboard = head.removeprefix("http://")
    assert dashboard.startswith("127.0.0.1:"), dashboard
    # The CLI authenticates with the head's token (RAY_AUTH_MODE, RAY_AUTH_TOKEN_PATH)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    submission_id = f"test-job-submit-{uuid.uuid4().hex[:8]}"
    command = [
        str(Path(sys.executable).with_name("ray")),
        "job",
        "submit",
        "--address",
        f"http://{dashboard}",
        "--submission-id",
        submission_id,
        "--working-dir",
        str(ROOT),
        "--runtime-env-json",
        json.dumps({"excludes": EXCLUDES}),
        "--",
        # The entrypoint runs in a shell with the PATH Ray was started with, where `python` is
        # not this virtual environment's: name its interpreter. `--latency 0`: the offline
        # model answers at once.
        sys.executable,
        EXAMPLE,
        "--latency",
        "0",
    ]
    client = _client(dashboard)
    started = time.monotonic()
    try:
        submit = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=SUBMIT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        client.stop_job(submission_id)
        pytest.fail(f"`ray job submit` did not finish within {SUBMIT_TIMEOUT_S} s")
    elapsed = time.monotonic() - started

    assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-3000:]
    assert client.get_job_status(submission_id) == JobStatus.SUCCEEDED
    info = client.get_job_info(submission_id)
    ran = (info.end_time - info.start_time) / 1000 if info.end_time and info.start_time else -1.0
    print(  # noqa: T201
        f"\nray job submit of {EXAMPLE}: {elapsed:.1f} s from the CLI's start to the job's end "
        f"(the job itself, from submission to exit: {ran:.1f} s)"
    )
    assert info.entrypoint.endswith(f"{EXAMPLE} --latency 0")
    logs = client.get_job_logs(submission_id)
    for line in EXPECTED:
        assert line in logs, f"{line!r} not in the job's logs:\n{logs[-3000:]}"
    # What the CLI tailed is the same driver output.
    assert EXPECTED[-1] in submit.stdout
    assert elapsed < SUBMIT_TIMEOUT_S
