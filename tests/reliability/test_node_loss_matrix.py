"""Node loss, all of it: the node of the orchestrator, of the LLM pool, of the tool sandboxes
and of the memory actor is removed mid-job, one at a time, and then all four at once.

Run alone, in a pytest process of its own (it starts its own Ray cluster, so it cannot share
the integration suite's session Ray)::

    .venv/bin/pytest tests/reliability/test_node_loss_matrix.py

The cluster (``ray.cluster_utils``, every node on 127.0.0.1, health checks tuned so a dead node
is noticed in ~1.5 s): a head with no CPUs, where the driver and the router run; one node for
the agents (they ask for a CPU; the others have none); one node per kind of system actor, which
advertises a resource that only that kind asks for (``placement.actors`` of troupe.yaml). The
state is in a real PostgreSQL and memories in a real Chroma server, both on 127.0.0.1, so no
system actor is pinned and any may move. Before each scenario a standby node advertising the
kinds about to be lost joins; Ray restarts the lost actors there.

Each scenario runs the same jobs as an undisturbed run at the start: three of three subtasks
(a 1 s model, a token budget of twice what the undisturbed run used plus what the pool
reserves for three calls in flight) and one whose agent calls a
side-effecting tool (``journal_append``: each real run appends a line to a ledger file). The
node goes once every job has started. Then: every job completed or failed with a typed code;
the completed ones answered exactly as undisturbed; none ran out of budget (a call the lost
pool was making is made again in its hold's place, not beside it); no finished subtask started
again; the side effect ran once; no job used more tokens than its budget; the lost actors
serve again on the standby node; the memories written before the loss are all still there.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray
from ray._private.node import Node
from ray.cluster_utils import Cluster

from raytroupe import runtime
from raytroupe.actors.system_config import PlacementConfig, StateConfig, SystemConfig
from raytroupe.actors.tools.config import FunctionTool
from raytroupe.protocols import Budget, ErrorCode, JobFailed, JobResult, ToolCall
from raytroupe.runtime.joining import stay_on_loopback
from tests.support.chroma import chroma_server
from tests.support.figures import record
from tests.support.ledger import TOOL_NAME, TOOL_TARGET, runs_by_token
from tests.support.postgres import Server, postgres_server
from tests.support.restarts import node_of, wait_started

SUITE = "node_loss_matrix"
LATENCY_S = 1.0
JOB_S = 240.0
HEALTH = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}
RESERVED = 1024
"""Tokens the pool reserves for a budgeted call's answer (its default max_tokens)."""
NODE = {"node_ip_address": "127.0.0.1", "include_dashboard": False}
KINDS = ("orchestrator", "llm", "tools", "memory")
ACTORS = {"orchestrator": ("desk", "orchestrator/0"), "llm": ("llm/0",),
          "tools": ("tools/0", "tools/1"), "memory": ("memory",)}  # fmt: skip
TASKS = tuple(f"Tasks:\n- note {n} one.\n- note {n} two.\n- note {n} three." for n in range(3))
NOTE = (
    "head + agents node + a node per system actor kind, 127.0.0.1, health check 500 ms x 3; "
    "state in PostgreSQL, memory in a Chroma server; 3 jobs x 3 subtasks (1 s model) + 1 "
    "side-effect job per scenario"
)


def _resource(kind: str) -> str:
    return f"troupe_{kind}"


@dataclass
class Matrix:
    """The cluster, the connection, where each kind of actor lives, the undisturbed run."""

    cluster: Cluster
    rt: runtime.Runtime
    homes: dict[str, Node]
    ledger: Path
    baseline: dict[str, str]
    """Each task's answer, undisturbed."""
    budget: Budget


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def matrix(postgres: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    if ray.is_initialized():
        pytest.fail("Ray is already initialised in this process: run this module alone")
    root = tmp_path_factory.mktemp("matrix")
    stay_on_loopback()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "num_cpus": 0, "_system_config": HEALTH,
                        "resources": {"troupe_router": 1}},
    )  # fmt: skip
    try:
        with chroma_server(root / "chroma") as chroma:
            cluster.add_node(**NODE, num_cpus=8)  # the agents'
            homes = {k: cluster.add_node(**NODE, num_cpus=0, resources={_resource(k): 1})
                     for k in KINDS}  # fmt: skip
            cluster.wait_for_nodes()
            config = SystemConfig(
                tools=runtime.ToolsConfig(
                    state_dir=root / "tools", scratch_root=root / "scratch",
                    functions={TOOL_NAME: FunctionTool(target=TOOL_TARGET, side_effects=True)},
                ),
                memory=runtime.MemoryConfig(server=chroma, embedding="hashing"),
                state=StateConfig(url=postgres.database()),
                placement=PlacementConfig(
                    # the desk (the control plane's front) lives with the orchestrator
                    actors={"router": {"troupe_router": 0.001},
                            "desk": {_resource("orchestrator"): 0.001},
                            **{k: {_resource(k): 0.001} for k in KINDS}}  # type: ignore[dict-item]
                ),
            )  # fmt: skip
            rt = runtime.connect(address=cluster.address, config=config, log_level="warning")
            try:
                for kind in KINDS:
                    for name in ACTORS[kind]:
                        assert node_of(name) == homes[kind].node_id, (name, kind)
                undisturbed = [rt.submit(t, team=_team()).result(timeout=JOB_S) for t in TASKS]
                assert all(r.status == "succeeded" for r in undisturbed), undisturbed
                used = max(r.usage.total_tokens for r in undisturbed)
                yield Matrix(
                    cluster=cluster, rt=rt, homes=homes, ledger=root / "ledger.txt",
                    baseline={t: r.answer for t, r in zip(TASKS, undisturbed, strict=True)},
                    budget=Budget(tokens=2 * used + RESERVED * len(TASKS)),
                )  # fmt: skip
            finally:
                rt.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def _team() -> runtime.Team:
    """One agent (so that every subtask's prompt, and answer, is the same in every run)."""
    return runtime.Team(
        name="matrix",
        planner_model="default",
        max_parallel=4,
        models={"matrix-slow": runtime.OfflineModel(latency_s=LATENCY_S)},
        agents=[
            runtime.AgentSpec(name="matrix-0", role="worker", model="matrix-slow", num_cpus=1,
                              memory=runtime.MemoryPolicy(recall=False, write_results=True))
        ],
    )  # fmt: skip


def _scribe(scenario: str, ledger: Path) -> runtime.Team:
    """A team whose agent appends ``scenario`` to the ledger once, then answers."""
    name = f"matrix-fx-{scenario}"
    call = ToolCall(call_id=f"append-{scenario}", tool=TOOL_NAME,
                    arguments={"ledger": str(ledger), "token": scenario})  # fmt: skip
    turns = (runtime.ScriptedTurn(tool_calls=(call,)), runtime.ScriptedTurn(text="recorded"))
    return runtime.Team(
        name=name,
        planner_model="default",
        models={name: runtime.ScriptedModel(turns=turns * 4)},
        agents=[
            runtime.AgentSpec(name=name, role="scribe", model=name, tools=[TOOL_NAME], num_cpus=1,
                              max_repeated_tool_calls=8, stagnation_turns=None,
                              memory=runtime.MemoryPolicy(recall=False, write_results=False))
        ],
    )  # fmt: skip


def _outcome(job: runtime.JobHandle) -> JobResult:
    """The job's result, failed or not (a timeout fails the test: the job hung)."""
    try:
        return job.result(timeout=JOB_S)
    except JobFailed as failed:
        result: JobResult = failed.detail["result"]
        return result


def _restarted_finished_subtasks(job: runtime.JobHandle) -> list[str]:
    """Subtasks that started again after they had finished successfully."""
    done: set[str] = set()
    again = []
    for event in job.events(timeout=60):
        if event.type == "subtask_finished" and event.data.get("status") == "succeeded":
            done.add(str(event.subtask_id))
        elif event.type == "subtask_started" and event.subtask_id in done:
            again.append(str(event.subtask_id))
    return again


def _tokens(rt: runtime.Runtime, job_id: str) -> int:
    """What the pool's usage table (in PostgreSQL) charged the job."""
    return sum(row.prompt_tokens + row.completion_tokens for row in rt.usage(job_id))


def _memories(rt: runtime.Runtime) -> int:
    return int(ray.get(rt.actor("memory").count.remote("default"), timeout=60))


def _wait_moved(kinds: tuple[str, ...], standby: Node, deadline: float) -> None:
    names = [name for kind in kinds for name in ACTORS[kind]]
    while {n: node_of(n) for n in names} != dict.fromkeys(names, standby.node_id):
        assert time.monotonic() < deadline, {n: node_of(n) for n in names}
        time.sleep(0.2)  # polling the actor table until each is alive on the standby node


def _check(m: Matrix, scenario: str, jobs: list[runtime.JobHandle], results: list[JobResult]):
    problems: list[str] = []
    for job, result in zip(jobs, results, strict=True):
        if result.status != "succeeded":
            if result.error is None or not isinstance(result.error.code, ErrorCode):
                problems.append(f"{job.job_id} {result.status} without a typed error")
            elif result.error.code is ErrorCode.BUDGET_EXCEEDED:  # the budget is 2 x its use
                problems.append(f"{job.job_id} ran out of budget because its actors moved")
            continue
        if result.task in m.baseline and result.answer != m.baseline[result.task]:
            problems.append(f"{job.job_id} answered differently from the undisturbed run")
        if again := _restarted_finished_subtasks(job):
            problems.append(f"{job.job_id}: finished subtasks started again: {again}")
    for job, result in zip(jobs[: len(TASKS)], results, strict=False):
        budget = m.budget.tokens or 0
        if result.usage.total_tokens > budget or _tokens(m.rt, job.job_id) > budget:
            problems.append(f"{job.job_id} spent past its budget of {budget} tokens")
    runs = runs_by_token(m.ledger).get(scenario, 0)
    if runs > 1 or (results[-1].status == "succeeded" and runs != 1):
        problems.append(f"the side effect of {scenario} ran {runs} times")
    return problems


SCENARIOS = [(kind,) for kind in KINDS] + [KINDS]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kinds", SCENARIOS, ids=["+".join(s) for s in SCENARIOS])
def test_jobs_survive_the_loss_of_thenode_of(matrix: Matrix, kinds: tuple[str, ...]) -> None:
    m = matrix
    scenario = "+".join(kinds) if len(kinds) < len(KINDS) else "all"
    standby = m.cluster.add_node(**NODE, num_cpus=0, resources={_resource(k): 1 for k in kinds})
    m.cluster.wait_for_nodes()
    marker = m.rt.remember(f"written before the loss of {scenario}")
    memories = _memories(m.rt)

    jobs = [m.rt.submit(task, team=_team(), budget=m.budget) for task in TASKS]
    jobs.append(m.rt.submit("- record the scenario.", team=_scribe(scenario, m.ledger)))
    for job in jobs[: len(TASKS)]:
        wait_started(job)
    lost = {m.homes[k].node_id: m.homes[k] for k in kinds}
    removed_at = time.monotonic()
    for node in lost.values():
        m.cluster.remove_node(node)
    results = [_outcome(job) for job in jobs]
    done_s = time.monotonic() - removed_at
    _wait_moved(kinds, standby, time.monotonic() + 120)
    moved_s = time.monotonic() - removed_at
    m.homes.update(dict.fromkeys(kinds, standby))

    problems = _check(m, scenario, jobs, results)
    assert _memories(m.rt) >= memories, "memories were lost with the node"
    hits = m.rt.recall(f"written before the loss of {scenario}")
    assert marker in {h.id for h in hits}, hits
    after = m.rt.submit(TASKS[0], team=_team()).result(timeout=JOB_S)
    assert after.status == "succeeded", after.error
    assert after.answer == m.baseline[TASKS[0]]
    assert not problems, problems

    completed = sum(r.status == "succeeded" for r in results)
    codes = Counter(r.error.code.value for r in results if r.error is not None)
    failed_with = ", ".join(f"{code} x{n}" for code, n in sorted(codes.items())) or "none"
    again = sum(1 for r in results for s in r.subtasks if s.attempt > 1)
    name = f"{scenario} node removed"
    record(SUITE, f"{name}: jobs completed", f"{completed}/{len(results)}", "", NOTE)
    record(SUITE, f"{name}: failed with", failed_with, "", NOTE)
    record(SUITE, f"{name}: subtasks dispatched again", again, "subtasks", NOTE)
    record(SUITE, f"{name}: side effect runs", runs_by_token(m.ledger).get(scenario, 0), "", NOTE)
    record(SUITE, f"{name} -> jobs done", round(done_s, 2), "s", NOTE)
    record(SUITE, f"{name} -> actors alive on the standby node", round(moved_s, 2), "s", NOTE)
