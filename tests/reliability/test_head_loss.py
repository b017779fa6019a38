"""The head node is lost mid-job: every process of it killed, then the head started again.
With the GCS's tables in Redis and the troupe's state in PostgreSQL, the jobs complete.

Run alone, in a pytest process of its own (it starts its own 2-node Ray)::

    .venv/bin/pytest tests/reliability/test_head_loss.py

A head with no CPUs (the system actors, which ask for none, run there) and a worker with two
(the agents ask for one each), on 127.0.0.1, both started by ``ray.cluster_utils``; Ray's GCS
fault tolerance keeps the GCS's tables in a Redis outside the head, as cluster.yaml can
configure it (``TROUPE_GCS_REDIS``), and the troupe's journal is in a PostgreSQL outside it,
as ``TROUPE_STATE_URL`` names one. Jobs run; then every process of the head is killed at once
(its GCS, raylet, agents, and the worker processes of the actors on it: the machine lost),
and a head is started again at the same address on the same Redis, as a replaced head node
would be. The worker node's raylet and the agents on it wait for the GCS and rejoin; the
system actors that were on the head are made again by Ray; the orchestrator takes its jobs
up from the journal. The drivers are child processes (``tests/support/head_loss_child.py``):
Ray kills a driver whose raylet dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray
from ray.cluster_utils import Cluster

from raytroupe.runtime.cli._local import free_port
from raytroupe.runtime.joining import stay_on_loopback
from tests.reliability.test_node_loss import HEALTH, NODE  # a dead node seen in ~1.5 s
from tests.support.figures import record
from tests.support.inline import agent_actor
from tests.support.postgres import postgres_server
from tests.support.redis import Redis, redis_server

ROOT = Path(__file__).resolve().parents[2]
SUITE = "head_loss"
LATENCY_S = 1.0
CHILD_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


def _child(*args: str) -> dict[str, Any]:
    """Run a driver (``tests/support/head_loss_child.py``); the JSON line it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.head_loss_child", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _lose(cluster: Cluster) -> list[int]:
    """Kill every process of the head at once (SIGKILL): those its node started, and the
    worker processes of its raylet (the actors placed there); their PIDs."""
    head = cluster.head_node
    raylet = head.all_processes["raylet"][0].process.pid
    workers = [p.pid for p in psutil.Process(raylet).children(recursive=True)]
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):  # gone with its raylet already
            os.kill(pid, signal.SIGKILL)
    cluster.remove_node(head, allow_graceful=False)
    return workers


@pytest.mark.timeout(900)
def test_jobs_complete_when_every_process_of_the_head_is_killed_and_a_head_starts_again(
    redis: Redis, tmp_path: Path
) -> None:
    if ray.is_initialized():
        pytest.fail("Ray is already initialised in this process: run this module alone")
    stay_on_loopback()
    os.environ.update(
        {
            "RAY_AUTH_MODE": "disabled",
            # read by the head's GCS (its tables in Redis, under a name of this run's) ...
            "RAY_REDIS_ADDRESS": redis.address,
            "RAY_external_storage_namespace": f"troupe-head-loss-{os.getpid()}",
            # ... and by every raylet, worker and driver: how long to wait for a GCS that
            # went away (default 60 s)
            "RAY_gcs_rpc_server_reconnect_timeout_s": "300",
        }
    )
    head_args = {**NODE, "num_cpus": 0, "gcs_server_port": free_port(),
                 "redis_password": redis.password, "_system_config": HEALTH}  # fmt: skip
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    try:
        with postgres_server() as pg:
            config = json.dumps(
                {"address": cluster.address, "state_url": pg.database(),
                 "root": str(tmp_path), "latency_s": LATENCY_S}
            )  # fmt: skip
            # the troupe starts while the head is the only node: every system actor is there
            started = _child("start", config)
            old_head = cluster.head_node.node_id
            assert set(started["nodes"].values()) == {old_head}, started
            worker = cluster.add_node(**NODE, num_cpus=2)
            cluster.wait_for_nodes()
            submitted = _child("submit", config)
            nodes = submitted["nodes"]
            assert submitted["warm"] == "succeeded"
            agents = [agent_actor(f"headloss-{i}") for i in range(2)]
            assert {nodes[a] for a in agents} == {worker.node_id}
            on_head = sorted(n for n, node in nodes.items() if node == old_head)
            assert set(on_head) == set(started["nodes"])  # they die with the head

            lost_at = time.monotonic()
            workers = _lose(cluster)
            assert workers  # the head ran actors' worker processes, now killed
            cluster.add_node(**head_args)  # the same address, the same Redis
            back_s = time.monotonic() - lost_at
            finished = _child("finish", config, *submitted["jobs"])
            done_s = time.monotonic() - lost_at
    finally:
        cluster.shutdown()

    jobs = finished["jobs"]
    assert all(j["status"] == "succeeded" for j in jobs.values()), jobs
    assert all(j["subtasks"] == 3 for j in jobs.values()), jobs
    assert finished["after"] == "succeeded"
    note = (
        "head (0 CPUs) + worker (2) on 127.0.0.1, GCS tables in Redis, journal in PostgreSQL; "
        f"3 jobs x 3 subtasks, {LATENCY_S:g} s model; on the head: {', '.join(on_head)}"
    )
    record(SUITE, "jobs running when the head was lost", len(jobs), "jobs", note)
    record(SUITE, "of them completed", sum(j["status"] == "succeeded" for j in jobs.values()),
           "jobs", note)  # fmt: skip
    record(SUITE, "processes of the head killed (its actors' workers)", len(workers), "", note)
    record(SUITE, "head lost -> a head started again", round(back_s, 2), "s", note)
    record(SUITE, "head lost -> every job ended, and one more ran", round(done_s, 2), "s", note)
