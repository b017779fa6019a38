"""Graph benchmarks: what a superstep costs against a plan's step, and a map's fan-out.

Each figure is a ratio against a baseline measured in the same run.

1. Cost of a superstep. A chain of N nodes (``L = 0``: the offline model answers at once),
   each appending its answer to the state, against a fixed plan of the same N subtasks, each
   depending on the one before, on the same agents: ``timings.dispatch_s / N`` of each.
   The graph's step adds rendering the state into the prompt, checking the update against
   the schema, applying it by its reducer and writing a checkpoint (the run's journal is a
   SQLite file). Goal: at most 1.5x the plan's step.
2. Map fan-out. A node writes nothing and a ``map`` edge runs a node once per item of a
   list of N in the state, every model call ``L`` s, on a team that holds them all at once:
   ``dispatch_s`` against the ideal ``2 L`` (two supersteps). Goal: at most 1.15x at N = 32.
3. A checkpoint write: :meth:`CheckpointStore.put` of a checkpoint holding a state of
   ~10 kB (serialized there), against ``sqlite3`` inserting the already serialized text into
   a table of the same shape, both in WAL mode with ``synchronous=NORMAL`` as the journal's
   SQLite file is. Goal: at most 2x.

Usage: python bench/graphs.py [--quick] [--json PATH]
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from _common import Figure, Section, machine, main, median
from fanout import connect

from raytroupe import runtime
from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore
from raytroupe.actors.state import open_database
from raytroupe.protocols import AgentSpec, PlannedSubtask, TeamSpec
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphTask

CHAIN = 16
MAP_N = 32
LATENCY_S = 0.5
STEP_GOAL = 1.5
MAP_GOAL = 1.15
WRITE_GOAL = 2.0


def _agents(name: str, alias: str, n: int = 2) -> tuple[AgentSpec, ...]:
    return tuple(
        AgentSpec(name=f"{name}-{i}", role="w", model=alias, max_concurrency=64,
                  memory=runtime.MemoryPolicy(recall=False))
        for i in range(n)
    )  # fmt: skip


def _chain_graph(n: int) -> TeamSpec:
    graph = GraphSpec.model_validate({
        "start": "n0",
        "max_steps": n + 1,
        "state": {"json_schema": {"type": "object", "properties": {
            "log": {"type": "array", "items": {"type": "string"}}}},
            "reducers": {"log": "append"}, "initial": {"log": []}},
        # each node is given the log's length, not the log (the offline model echoes its input)
        "nodes": [{"id": f"n{i}", "role": "w", "writes": ["log"], "instructions": f"step {i}",
                   "inputs": {"lines": "len(log)"}} for i in range(n)],
        "edges": [{"source": f"n{i}", "target": f"n{i + 1}"} for i in range(n - 1)],
    })  # fmt: skip
    return TeamSpec(name="bench-graph", agents=_agents("bg", "instant"), graph=graph,
                    planner_model="offline")  # fmt: skip


def _chain_plan(n: int) -> TeamSpec:
    plan = tuple(
        PlannedSubtask(id=f"n{i}", role="w", instructions=f"step {i}",
                       depends_on=(f"n{i - 1}",) if i else ())
        for i in range(n)
    )  # fmt: skip
    return TeamSpec(name="bench-plan", agents=_agents("bp", "instant"), plan=plan,
                    planner_model="offline", max_subtasks=n)  # fmt: skip


def _map_graph(n: int) -> TeamSpec:
    graph = GraphSpec.model_validate({
        "start": "plan",
        "state": {"json_schema": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "string"}},
            "found": {"type": "array", "items": {"type": "string"}}}},
            "reducers": {"found": "append"}},
        "nodes": [{"id": "plan", "role": "w", "writes": [], "instructions": "plan"},
                  {"id": "each", "role": "w", "writes": ["found"], "instructions": "{item}"}],
        "edges": [{"source": "plan", "target": "each", "map": "items"}],
    })  # fmt: skip
    return TeamSpec(name="bench-map", agents=_agents("bm", "slow", 1), graph=graph,
                    planner_model="offline", max_parallel=256, max_subtasks=n)  # fmt: skip


def _dispatch_s(rt: runtime.Runtime, team: TeamSpec, **submit: object) -> float:
    result = rt.submit("bench", team=team, **submit).result(timeout=300)  # type: ignore[arg-type]
    if result.status != "succeeded":
        raise SystemExit(f"a bench job did not succeed: {result.error}")
    return result.timings.dispatch_s


def _checkpoint_writes(root: Path, repeats: int) -> tuple[float, float]:
    """Seconds per checkpoint put, and per raw sqlite3 insert of the same text."""
    store = CheckpointStore(open_database(root / "bench-graphs.sqlite", "graphs", ()))
    state = {"log": [f"line {i}: " + "x" * 90 for i in range(100)]}
    point = GraphCheckpoint(job_id="job-bench", step=0, at=0.0, state=state,
                            next=(GraphTask(node="n"),))  # fmt: skip
    text = point.model_dump_json()
    raw = sqlite3.connect(root / "bench-raw.sqlite", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")  # as the journal keeps its file
    raw.execute("PRAGMA synchronous=NORMAL")
    raw.execute("CREATE TABLE IF NOT EXISTS raw (a TEXT, b TEXT, c INTEGER, d TEXT, "
                "PRIMARY KEY (a, b, c))")  # fmt: skip
    ours, theirs = [], []
    for step in range(repeats):
        started = time.perf_counter()
        store.put(point.model_copy(update={"step": step}))
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        raw.execute("INSERT INTO raw VALUES (?, ?, ?, ?)", ("job-bench", "", step, text))
        theirs.append(time.perf_counter() - started)
    raw.close()
    return median(ours), median(theirs)


def run(quick: bool) -> Section:
    """The three measures on a local Ray of 2 CPUs; fewer repeats with ``quick``."""
    repeats = 3 if quick else 7
    load_before = machine()["load"]
    section = Section(title="Graphs: a superstep's cost, a map's fan-out, a checkpoint write")
    with tempfile.TemporaryDirectory(prefix="graphs-") as tmp:
        root = Path(tmp)
        ours, raw = _checkpoint_writes(root, 200 if quick else 1000)
        section.figures.append(Figure(
            "checkpoint write (state ~10 kB)", ours * 1e3, raw * 1e3, "ms",
            "sqlite3 INSERT of the same text", WRITE_GOAL, "at_most",
        ))  # fmt: skip
        rt = connect(root, {"instant": runtime.OfflineModel(latency_s=0.0),
                            "slow": runtime.OfflineModel(latency_s=LATENCY_S)})  # fmt: skip
        try:
            graph, plan, mapped = _chain_graph(CHAIN), _chain_plan(CHAIN), _map_graph(MAP_N)
            items = {"items": [f"item {i}" for i in range(MAP_N)]}
            _dispatch_s(rt, graph), _dispatch_s(rt, plan), _dispatch_s(rt, mapped, input=items)
            graph_s, plan_s, map_s = [], [], []
            for _ in range(repeats):  # interleaved: the machine's load falls on both alike
                graph_s.append(_dispatch_s(rt, graph) / CHAIN)
                plan_s.append(_dispatch_s(rt, plan) / CHAIN)
                map_s.append(_dispatch_s(rt, mapped, input=items))
        finally:
            rt.shutdown()
    section.figures.append(Figure(
        f"graph superstep, chain of {CHAIN}", median(graph_s) * 1e3, median(plan_s) * 1e3,
        "ms", "fixed plan step, same chain", STEP_GOAL, "at_most",
    ))  # fmt: skip
    section.figures.append(Figure(
        f"map over {MAP_N} items, L = {LATENCY_S} s", median(map_s), 2 * LATENCY_S, "s",
        "ideal: two supersteps of L", MAP_GOAL, "at_most",
    ))  # fmt: skip
    section.notes.append(
        f"{repeats} repeats, medians; graph steps {[round(s * 1e3, 1) for s in graph_s]} ms, "
        f"plan steps {[round(s * 1e3, 1) for s in plan_s]} ms; load average before "
        f"{load_before}, after {machine()['load']}"
    )
    return section


if __name__ == "__main__":
    main(run)
