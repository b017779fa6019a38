"""Child process of tests/reliability/test_head_loss.py: a driver of the drill's cluster.

The drill kills every process of the head node, so no driver may be attached there when it
does (Ray kills a driver whose raylet dies, and ``cluster_utils`` refuses to remove the node
of the process's own driver). The drill's own process starts and stops the nodes; drivers
are children, each joining the cluster by its GCS address as ``ray job submit`` drivers do.

``python -m tests.support.head_loss_child start CONFIG``: start the troupe (the first driver
does) and print where its system actors are.

``python -m tests.support.head_loss_child submit CONFIG``: run a warm-up job, submit the
drill's jobs, wait until each has a subtask running, and print one JSON line: the job ids and
where the system actors and agents are.

``python -m tests.support.head_loss_child finish CONFIG JOB...``: join again, wait for each job
to end, run one more job, and print one JSON line with what each ended as.

CONFIG is a JSON object: ``address``, ``state_url``, ``root`` (a folder for the tools' state
and the memory store), ``latency_s``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from raytroupe import runtime
from tests.support.inline import agent_actor
from tests.support.restarts import node_of, wait_started

SYSTEM = ("router/0", "orchestrator/0", "llm/0", "memory")
"""Named system actors whose node the drill checks."""
TASKS = [f"Tasks:\n- note {n} one.\n- note {n} two.\n- note {n} three." for n in range(3)]


def team(latency_s: float) -> runtime.Team:
    """Two agents that ask for a CPU each: the head has none, so they run on the worker."""
    return runtime.Team(
        name="headloss",
        planner_model="default",
        max_parallel=4,
        models={"headloss-slow": runtime.OfflineModel(latency_s=latency_s)},
        agents=[
            runtime.AgentSpec(name=f"headloss-{i}", role="worker", model="headloss-slow",
                              num_cpus=1, memory=runtime.MemoryPolicy(recall=False))
            for i in range(2)
        ],
    )  # fmt: skip


def _connect(config: dict[str, Any]) -> runtime.Runtime:
    root = Path(config["root"])
    return runtime.connect(
        address=config["address"],
        state_url=config["state_url"],
        tools_config=runtime.ToolsConfig(state_dir=root / "state", scratch_root=root / "scratch"),
        memory_config=runtime.MemoryConfig(path=root / "memory", embedding="hashing"),
        log_level="warning",
    )


def start(config: dict[str, Any]) -> dict[str, Any]:
    rt = _connect(config)
    try:
        return {"nodes": {name: node_of(name) for name in SYSTEM}}
    finally:
        rt.shutdown()  # leaves the cluster's actors running


def submit(config: dict[str, Any]) -> dict[str, Any]:
    rt = _connect(config)
    try:
        chosen = team(config["latency_s"])
        warm = rt.submit("- warm up one.\n- warm up two.", team=chosen).result(timeout=120)
        jobs = [rt.submit(task, team=chosen) for task in TASKS]
        for job in jobs:
            wait_started(job)
        agents = [agent_actor(a.name) for a in chosen.agents]
        names = [*SYSTEM, *agents]
        return {
            "warm": warm.status,
            "jobs": [job.job_id for job in jobs],
            "nodes": {name: node_of(name) for name in names},
        }
    finally:
        rt.shutdown()  # leaves the cluster's actors and the jobs running


def finish(config: dict[str, Any], job_ids: list[str]) -> dict[str, Any]:
    rt = _connect(config)
    try:
        ended = {}
        for job_id in job_ids:
            result = rt.job(job_id).result(timeout=300)
            ended[job_id] = {
                "status": result.status,
                "error": None if result.error is None else str(result.error),
                "subtasks": len(result.subtasks),
                "attempts": [s.attempt for s in result.subtasks],
            }
        after = rt.submit("- after the head came back.", team=team(config["latency_s"]))
        return {"jobs": ended, "after": after.result(timeout=120).status}
    finally:
        rt.shutdown()


def main() -> None:
    mode, config = sys.argv[1], json.loads(sys.argv[2])
    if mode == "start":
        out = start(config)
    elif mode == "submit":
        out = submit(config)
    else:
        out = finish(config, sys.argv[3:])
    print(json.dumps(out), flush=True)  # noqa: T201 - the result, for the parent test


if __name__ == "__main__":
    main()
