"""`ray job submit` runs the example driver on the session's local Ray, as on a cluster.

The job server is part of the dashboard the `rt` fixture starts. The job's driver joins that
Ray through RAY_ADDRESS, which Ray sets for job drivers, so `runtime.connect()` without an
address reuses the system actors the fixture started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import ray
from ray._private.authentication.authentication_utils import is_token_auth_enabled
from ray._private.ray_constants import KV_NAMESPACE_DASHBOARD
from ray.dashboard.consts import DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX
from ray.experimental.internal_kv import _internal_kv_get
from ray.job_submission import JobStatus, JobSubmissionClient

# system tier: Ray's job server, which needs the dashboard agent's fixed port (52365) that
# only one Ray on the machine can hold
pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/research_team.py"
# What is not uploaded with the working directory (Ray also skips .git and .venv by default).
EXCLUDES = [".venv", ".git", ".mypy_cache", ".ruff_cache", ".pytest_cache", "**/__pycache__"]
SUBMIT_TIMEOUT_S = 240.0
AGENT_WAIT_S = 30.0

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


def _dashboard_address() -> str:
    """``host:port`` of the dashboard (and job server) of the Ray this process started."""
    address: str = ray._private.worker.global_worker.node.address_info["webui_url"]
    assert address, "the session's Ray runs without a dashboard"
    return address


def _wait_for_head_job_agent() -> None:
    """The job server hands jobs to the head node's dashboard agent: wait until it can.

    ``ray.init`` gives the agent a fixed HTTP port (52365) and no way to choose another. When a
    different Ray on this machine holds that port, the agent stays up without HTTP (its port is
    recorded as -1) and every submission answers 500 "No available agent": fail with that reason
    instead of the job server's vaguer one.
    """
    node = ray._private.worker.global_worker.node
    port = node.address_info["dashboard_agent_listen_port"]
    log = Path(node.get_logs_dir_path()) / "dashboard_agent.log"
    assert port > 0, (
        f"the head node's dashboard agent has no HTTP server (port {port}), so the job server "
        f"cannot run jobs: another Ray on this machine holds port 52365 (see {log})"
    )
    key = f"{DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX}{ray.get_runtime_context().get_node_id()}"
    deadline = time.monotonic() + AGENT_WAIT_S
    while not _internal_kv_get(key, namespace=KV_NAMESPACE_DASHBOARD):
        assert time.monotonic() < deadline, f"the job agent did not register in {AGENT_WAIT_S} s"
        time.sleep(0.5)


def test_ray_job_submit_runs_the_example_driver(rt):
    dashboard = _dashboard_address()
    assert dashboard.startswith("127.0.0.1:"), dashboard
    _wait_for_head_job_agent()

    # The CLI authenticates with ~/.ray/auth_token only when told that the cluster uses token
    # auth: the same RAY_AUTH_MODE as the Ray this process started (ray.init turned it on here).
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "token" if is_token_auth_enabled() else "disabled"
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
        # not this virtual environment's: name its interpreter. `--latency 0` keeps the pool's
        # `default` alias as the fixture left it (OfflineModel() has no latency).
        sys.executable,
        EXAMPLE,
        "--latency",
        "0",
    ]
    client = JobSubmissionClient(f"http://{dashboard}")
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
