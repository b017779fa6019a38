"""Node loss: a worker node holding the agents is removed mid-job; the jobs still complete.

Run alone, in a pytest process of its own (it starts its own 3-node Ray, so it cannot share
the integration suite's session Ray)::

    .venv/bin/pytest tests/reliability/test_node_loss.py

A head node (0 CPUs: the system actors, which ask for none, live there) and two worker
nodes, all on 127.0.0.1, with health checks tuned so a dead node is noticed in ~1.5 s
instead of ~17 s. Agents ask for one CPU, so they can only run on a worker; they are spawned
while only worker A exists, then worker B joins. Worker A is removed while jobs run: Ray
restarts the agents on B, the orchestrator dispatches the lost subtasks again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster

from raytroupe import runtime
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.runtime.joining import stay_on_loopback
from tests.support.figures import record
from tests.support.inline import agent_actor
from tests.support.restarts import node_of, wait_started

LATENCY_S = 1.0
HEALTH = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}
NODE = {"node_ip_address": "127.0.0.1", "include_dashboard": False}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    if ray.is_initialized():
        pytest.fail(
            "Ray is already initialised in this process: run this module alone, "
            "`.venv/bin/pytest tests/reliability/test_node_loss.py`"
        )
    stay_on_loopback()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "num_cpus": 0, "_system_config": HEALTH},
    )
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def _team() -> runtime.Team:
    return runtime.Team(
        name="nodeloss",
        planner_model="default",
        max_parallel=4,
        models={"nodeloss-slow": runtime.OfflineModel(latency_s=LATENCY_S)},
        agents=[
            runtime.AgentSpec(name=f"nodeloss-{i}", role="worker", model="nodeloss-slow",
                              num_cpus=1, memory=runtime.MemoryPolicy(recall=False))
            for i in range(2)
        ],
    )  # fmt: skip


def test_jobs_complete_when_the_node_of_their_agents_is_removed(cluster, tmp_path):
    """The agents' node dies mid-job: agents come back on the other worker, jobs succeed."""
    root = tmp_path
    rt = runtime.connect(
        address=cluster.address,
        journal=root / "journal.sqlite",
        tools_config=runtime.ToolsConfig(state_dir=root / "state", scratch_root=root / "scratch"),
        memory_config=runtime.MemoryConfig(path=root / "memory", embedding="hashing"),
        log_level="warning",
    )
    head = cluster.head_node.node_id
    worker_a = cluster.add_node(**NODE, num_cpus=2)
    team = _team()
    warm = rt.submit("- warm up one.\n- warm up two.", team=team).result(timeout=120)
    assert warm.status == "succeeded", warm.error
    agents = [agent_actor(a.name) for a in team.agents]
    assert {node_of(a) for a in agents} == {worker_a.node_id}
    assert node_of("router/0") == node_of("orchestrator/0") == head

    worker_b = cluster.add_node(**NODE, num_cpus=2)
    cluster.wait_for_nodes()
    tasks = [
        f"Tasks:\n- note {n} one.\n- note {n} two.\n- note {n} three.\n- note {n} four."
        for n in range(3)
    ]
    jobs = [rt.submit(task, team=team) for task in tasks]
    for job in jobs:
        wait_started(job)

    removed_at = time.monotonic()
    cluster.remove_node(worker_a)
    results = [job.result(timeout=180) for job in jobs]
    jobs_done_s = time.monotonic() - removed_at

    deadline = time.monotonic() + 60
    while {node_of(a) for a in agents} != {worker_b.node_id}:
        assert time.monotonic() < deadline, {a: node_of(a) for a in agents}
        time.sleep(0.1)  # polling the actor table until both agents are alive on B
    for name in agents:
        ray.get(ray.get_actor(name, namespace=NAMESPACE).registration.remote(), timeout=30)
    agents_back_s = time.monotonic() - removed_at
    after = rt.submit("- after the loss.\n- still here.", team=team).result(timeout=60)

    assert all(r.status == "succeeded" for r in results), [r.error for r in results]
    assert all(len(r.subtasks) == 4 for r in results)
    retried = sum(1 for r in results for s in r.subtasks if s.attempt > 1)
    assert retried >= 1  # some subtask was running on the lost node and was dispatched again
    assert after.status == "succeeded"
    note = "head + 2 workers on 127.0.0.1, health check 500 ms x 3; 3 jobs x 4 subtasks, 1 s model"
    record("node_loss", "jobs during node loss", len(results), "jobs", note)
    record(
        "node_loss", "jobs completed", sum(r.status == "succeeded" for r in results), "jobs", note
    )
    record("node_loss", "subtasks dispatched again", retried, "subtasks", note)
    record("node_loss", "node removed -> jobs complete", round(jobs_done_s, 2), "s", note)
    record(
        "node_loss",
        "node removed -> agents usable on the other node",
        round(agents_back_s, 2),
        "s",
        note,
    )
    record("node_loss", "job latency after recovery", round(after.timings.total_s, 2), "s", note)
