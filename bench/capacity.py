"""Capacity model: CPU per subtask in each kind of process, and what K shards of each buy.

1. Measure. On a ``ray.cluster_utils`` cluster of several nodes on this machine (a head
   without CPUs and ``WORKERS`` workers), with K router shards, K orchestrator shards and K
   pool replicas (K = 1, 2, 3, each on a fresh cluster), ``JOBS`` jobs of ``N`` subtasks run
   at once with the model answering at once (``L = 0``: every second is CPU). Each actor's
   process CPU (user + system, from ``/proc``) before and after gives, per kind of process
   (router, orchestrator, llm, agents, memory, tools), CPU milliseconds per subtask, and the
   busiest single process's share of all of it. The baseline: a raw Ray actor call's CPU,
   caller and callee together, measured in the same run.
2. Model. With ``c_k`` the CPU seconds one subtask costs the processes of kind ``k`` (at
   K = 1), K shards of that kind, each with a core of its own, carry at most ``K / c_k``
   subtasks per second, and the whole system at most ``cores / sum(c)``. By Little's law,
   ``X`` subtasks in flight with a model latency ``L`` need ``X / L`` subtasks per second, so
   ``ceil(X / L * c_k)`` shards of kind ``k``.
3. Check. The model predicts the busiest process's share at K = 2 and 3 from the K = 1
   figures (each sharded kind's work split K ways); the run measures it.

Usage: python bench/capacity.py [--quick] [--json PATH]
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import ray
from _common import Figure, Section, machine, main
from fanout import _cpu_s, _task
from ray.cluster_utils import Cluster

from raytroupe import runtime
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.runtime.joining import stay_on_loopback

KS = (1, 2, 3)
WORKERS = 2
JOBS = 4
AGENTS = 4
PER_AGENT = 64
SHARDED = ("router", "orchestrator", "llm")
IN_FLIGHT = (1_000, 10_000)
LATENCY_S = 0.5
NODE = {"node_ip_address": "127.0.0.1", "include_dashboard": False}


def _kind(name: str) -> str:
    return "agents" if name.startswith("agent/") else name.split("/", 1)[0]


def _pids() -> dict[str, int]:
    """``{actor name: pid}`` of every live actor of the troupe."""
    named = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == NAMESPACE
    ]
    handles = {name: ray.get_actor(name, namespace=NAMESPACE) for name in named}
    pids = ray.get([h.__ray_call__.remote(lambda _self: os.getpid()) for h in handles.values()])
    return dict(zip(handles, pids, strict=True))


@ray.remote(num_cpus=0)
class _Echo:
    async def ping(self) -> None:
        return None

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class _Caller:
    async def calls(self, other: Any, n: int) -> None:
        for _ in range(n):
            await other.ping.remote()

    def pid(self) -> int:
        return os.getpid()


def _raw_call_cpu_ms(calls: int) -> float:
    """CPU ms of one raw Ray actor call, caller and callee together."""
    echo, caller = _Echo.remote(), _Caller.remote()
    pids = ray.get([echo.pid.remote(), caller.pid.remote()])
    ray.get(caller.calls.remote(echo, 100))  # warm
    before = sum(_cpu_s(p) for p in pids)
    ray.get(caller.calls.remote(echo, calls))
    used = sum(_cpu_s(p) for p in pids) - before
    ray.kill(echo)
    ray.kill(caller)
    return used / calls * 1e3


def _team() -> runtime.Team:
    return runtime.Team(
        name="capacity",
        planner_model="instant",
        planning="model",  # the planner makes one subtask per list item (auto sends a list
        # of statements to one agent)
        max_parallel=1024,
        max_subtasks=1024,
        agents=[
            runtime.AgentSpec(
                name=f"capacity-{i}",
                role="worker",
                model="instant",
                max_concurrency=PER_AGENT,
                memory=runtime.MemoryPolicy(recall=False, write_results=False),
            )
            for i in range(AGENTS)
        ],
    )


def _measure(k: int, n: int, rounds: int, calls: int) -> tuple[dict[str, float], float, float]:
    """CPU ms per subtask by process, the raw call's CPU ms, and the jobs' wall seconds."""
    stay_on_loopback()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": 0})
    try:
        for _ in range(WORKERS):
            cluster.add_node(**NODE, num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
        with tempfile.TemporaryDirectory(prefix="capacity-") as tmp:
            root = Path(tmp)
            rt = runtime.connect(
                log_level="warning",
                llm={"instant": runtime.OfflineModel(latency_s=0.0)},
                llm_config=runtime.LLMConfig(replicas=k),
                config=runtime.SystemConfig(
                    scale=runtime.ScaleConfig(router_shards=k, orchestrator_shards=k)
                ),
                journal=root / "journal.sqlite",
                memory_config=runtime.MemoryConfig(path=root / "memory", embedding="hashing"),
                tools_config=runtime.ToolsConfig(
                    sandboxes=1, state_dir=root / "state", scratch_root=root / "scratch"
                ),
            )
            try:
                team = _team()
                for _ in range(2 * k):  # spawn the agents; warm every shard's path
                    rt.submit(_task(8), team=team).result(timeout=300)
                raw_ms = _raw_call_cpu_ms(calls)
                pids = _pids()
                before = {name: _cpu_s(pid) for name, pid in pids.items()}
                started = time.perf_counter()
                for _ in range(rounds):
                    jobs = [rt.submit(_task(n), team=team) for _ in range(JOBS)]
                    results = [job.result(timeout=600) for job in jobs]
                    if any(len(r.subtasks) != n or r.status != "succeeded" for r in results):
                        raise RuntimeError(f"a job did not run its {n} subtasks: {results}")
                wall = time.perf_counter() - started
                subtasks = rounds * JOBS * n
                used = {name: (_cpu_s(pid) - before[name]) / subtasks * 1e3
                        for name, pid in pids.items()}  # fmt: skip
                return used, raw_ms, wall
            finally:
                rt.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def _by_kind(used: dict[str, float]) -> dict[str, float]:
    kinds: dict[str, float] = defaultdict(float)
    for name, ms in used.items():
        kinds[_kind(name)] += ms
    return dict(kinds)


def _busiest(used: dict[str, float]) -> tuple[str, float]:
    name = max(used, key=lambda n: used[n])
    return name, used[name] / sum(used.values())


def _predicted_share(kinds: dict[str, float], k: int) -> float:
    """The busiest process's share with each sharded kind's work split ``k`` ways.

    Agents and the other unsharded kinds count as one process each (the agents' work is
    split over ``AGENTS`` of them).
    """
    parts = [ms / k for kind, ms in kinds.items() if kind in SHARDED]
    parts += [kinds.get("agents", 0.0) / AGENTS]
    parts += [ms for kind, ms in kinds.items() if kind not in (*SHARDED, "agents")]
    return max(parts) / sum(kinds.values())


def _model_notes(kinds: dict[str, float]) -> list[str]:
    seconds = {kind: ms / 1e3 for kind, ms in kinds.items() if ms > 0}
    total = sum(seconds.values())
    notes = [
        "capacity of one shard of each kind (1 / CPU s per subtask): "
        + ", ".join(f"{kind} {1 / s:,.0f} subtasks/s" for kind, s in sorted(seconds.items()))
        + f"; all of it together {1 / total:,.0f} subtasks/s per core"
    ]
    for in_flight in IN_FLIGHT:
        rate = in_flight / LATENCY_S
        needed = {kind: math.ceil(rate * s) for kind, s in sorted(seconds.items())}
        notes.append(
            f"{in_flight:,} subtasks in flight at L = {LATENCY_S:g} s ({rate:,.0f} subtasks/s): "
            + ", ".join(f"{kind} {count}" for kind, count in needed.items())
            + f" shards (cores); {math.ceil(rate * total)} cores in all"
        )
    for nodes, cores in ((1, 4), (4, 4), (16, 4)):
        shards = nodes  # one shard of each kind per node, as troupe.cluster.yaml runs them
        ceilings = {kind: shards / seconds[kind] for kind in SHARDED if kind in seconds}
        ceilings["cores"] = nodes * cores / total
        bound = min(ceilings, key=lambda kind: ceilings[kind])
        notes.append(
            f"{nodes} node(s) x {cores} cores, {shards} shard(s) of each: at most "
            f"{ceilings[bound]:,.0f} subtasks/s, bound by {bound} "
            f"({ceilings[bound] * LATENCY_S:,.0f} in flight at L = {LATENCY_S:g} s)"
        )
    return notes


def run(quick: bool) -> Section:
    """K = 1, 2, 3 on fresh clusters; the model from K = 1."""
    n, rounds, calls = (64, 1, 500) if quick else (128, 2, 2000)
    load_before = machine()["load"]
    section = Section(title="Capacity: CPU per subtask by process, and shards per kind")
    measured = {k: _measure(k, n, rounds, calls) for k in KS}
    used_1, raw_ms, _ = measured[1]
    kinds_1 = _by_kind(used_1)
    for kind in ("router", "orchestrator", "llm", "agents", "memory", "tools"):
        if kind in kinds_1:
            section.figures.append(
                Figure(f"capacity: {kind} CPU per subtask (K=1)", kinds_1[kind], raw_ms, "ms",
                       "raw Ray actor call (caller + callee CPU)")
            )  # fmt: skip
    _, share_1 = _busiest(used_1)
    for k in KS[1:]:
        used, _, _ = measured[k]
        name, share = _busiest(used)
        section.figures += [
            Figure(f"capacity: busiest process's share of CPU, K={k} ({name})", share, share_1,
                   "", "the same at K=1", 1.0, "at_most"),
            Figure(f"capacity: busiest share at K={k}, measured", share,
                   _predicted_share(kinds_1, k), "", "model's prediction from K=1"),
        ]  # fmt: skip
    section.notes += _model_notes(kinds_1)
    for k, (used, _, wall) in measured.items():
        name, share = _busiest(used)
        section.notes.append(
            f"K={k}: CPU ms per subtask by kind "
            + ", ".join(f"{kind} {ms:.2f}" for kind, ms in sorted(_by_kind(used).items()))
            + f"; busiest {name} {share:.0%} of {sum(used.values()):.2f} ms; "
            f"{rounds * JOBS * n} subtasks in {wall:.1f} s"
        )
    section.notes.append(
        f"a head without CPUs and {WORKERS} workers of 1 CPU, all on this {os.cpu_count()}-core "
        f"machine; {JOBS} jobs of {n} subtasks at once, {rounds} round(s), L = 0; "
        f"{AGENTS} agents; the pool's replicas and both kinds of shards K each; Ray's own "
        f"processes (GCS, raylets) not counted; load average before the run {load_before}"
    )
    return section


if __name__ == "__main__":
    main(run)
