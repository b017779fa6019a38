"""Footprint: what an agent process and a cold start cost, against bare Ray in the same run.

1. Memory: the USS of agent actors (``agent/<name>``, each after it has served a subtask of a
   small job) against bare Ray actors (an empty class with one method, spawned by a second
   driver that imports nothing of raytroupe) on the same Ray. Goal <= 1.2x.
2. Cold start: ``runtime.connect()`` in a fresh process until it returns and every system
   actor answers, against ``ray.init`` plus as many empty actors (router, llm, memory,
   tools-0, tools-1, desk, orchestrator) in a fresh process. Goal <= 1.3x.

The notes list the heavy libraries found in the agent process (``sys.modules`` read from
inside the actor).

Usage: python bench/footprint.py [--quick] [--json PATH]
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from _common import Figure, Section, main, median

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ("fp-ada", "fp-grace", "fp-alan")
SYSTEM_ACTORS = ("router/0", "llm/0", "memory", "tools/0", "tools/1", "desk", "orchestrator/0")
HEAVY = (
    "anthropic",
    "chromadb",
    "fastapi",
    "httpx",
    "httpx2",
    "mcp",
    "numpy",
    "onnxruntime",
    "openai",
    "opentelemetry",
    "sqlite3",
    "starlette",
    "tokenizers",
    "uvicorn",
)
"""Top-level packages an agent process should not need."""
AGENT_NEEDS = (
    "raytroupe.actors.telemetry.logs",
    "raytroupe.actors.endpoint",
    "raytroupe.actors.telemetry.metrics",
    "raytroupe.actors.ray_handles",
    "raytroupe.actors.router_handles",
    "raytroupe.actors.agent",
    "raytroupe.actors.agent.stop",
    "raytroupe.actors.router",
    "protocols",
)
"""raytroupe modules an agent process uses (its logging, its class, its router client, the
data), besides the package ``actors`` itself."""
RECORD = (
    "recorded 2026-11-29 (load 10-25): before, the agent used 78 MB = 1.62x a bare actor (48 MB) "
    "with 1,394 modules (chromadb, numpy, tokenizers, opentelemetry, sqlite3, tenacity, "
    "aiolimiter) by two paths: actors/__init__ imported the orchestrator (-> intent -> "
    "memory.embeddings -> chromadb) and the LLM pool; Ray's worker setup hook "
    "runtime.logging imports runtime/__init__ (-> runtime.driver -> actors.spawn -> the same). "
    "Lazy actors/ and actors.llm inits alone: 78 MB (the hook path remains). With a lazy "
    "runtime/__init__ as well (a copy of the tree): 57 MB = 1.18x, 931 modules, no heavy package"
)

_OURS = ("actors", "deployments", "protocols", "runtime")

_ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYTHONPATH": str(ROOT)}

# A second driver on the same Ray: its actors import nothing of raytroupe.
_BARE_ACTORS = textwrap.dedent(
    """
    import json, sys
    import ray, psutil

    @ray.remote(num_cpus=0)
    class Empty:
        def ping(self):
            import os
            return os.getpid()

    ray.init(address=sys.argv[1], namespace="footprint-bare", log_to_driver=False)
    actors = [Empty.remote() for _ in range(int(sys.argv[2]))]
    pids = ray.get([a.ping.remote() for a in actors])
    ray.get([a.ping.remote() for a in actors])
    uss = [psutil.Process(p).memory_full_info().uss for p in pids]
    mods = ray.get(actors[0].__ray_call__.remote(lambda self: sorted(sys.modules)))
    print(json.dumps({"uss": uss, "modules": mods}))
    """
)

_CONNECT = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    import ray
    from raytroupe import runtime
    from pathlib import Path
    t1 = time.perf_counter()
    root = Path(sys.argv[1])
    rt = runtime.connect(
        address="local", num_cpus=2, include_dashboard=False, log_level="warning",
        journal=root / "journal.sqlite",
        tools_config=runtime.ToolsConfig(state_dir=root / "state", scratch_root=root / "scratch"),
        memory_config=runtime.MemoryConfig(path=root / "memory"),
    )
    handles = [ray.get_actor(n, namespace="troupe") for n in sys.argv[2].split(",")]
    ray.get([h.__ray_ready__.remote() for h in handles])
    t2 = time.perf_counter()
    rt.shutdown()
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "start_s": t2 - t1, "shutdown_s": t3 - t2}))
    """
)

_BARE_START = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    import ray
    t1 = time.perf_counter()

    @ray.remote(num_cpus=0)
    class Empty:
        def ping(self):
            return None

    ray.init(num_cpus=2, include_dashboard=False, namespace="footprint", log_to_driver=False)
    names = sys.argv[1].split(",")
    handles = [Empty.options(name=n, lifetime="detached").remote() for n in names]
    ray.get([h.ping.remote() for h in handles])
    t2 = time.perf_counter()
    ray.shutdown()
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "start_s": t2 - t1, "shutdown_s": t3 - t2}))
    """
)


def _python(
    script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter; its last stdout line is JSON."""
    done = subprocess.run(  # noqa: S603 - this interpreter, with this module's own scripts
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env={**_ENV, **(env or {})},
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"subprocess failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _modules(_self: Any) -> list[str]:
    """Run inside an actor: the modules its process has imported."""
    return sorted(sys.modules)


def _pid(_self: Any) -> int:
    """Run inside an actor: its process id."""
    return os.getpid()


def _memory(root: Path) -> tuple[list[int], list[int], list[str], list[str]]:
    """USS of agent actors after a job and of bare actors on the same Ray; agent modules."""
    import ray  # noqa: PLC0415
    from ray import cloudpickle  # noqa: PLC0415
    from ray._private.authentication.authentication_utils import (  # noqa: PLC0415
        is_token_auth_enabled,
    )

    from raytroupe import runtime  # noqa: PLC0415

    psutil = importlib.import_module("psutil")  # Ray's vendored copy: importable after ray
    # the probes travel by value, also when a suite imports this module by name
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rt = runtime.connect(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_level="warning",
        journal=root / "journal.sqlite",
        tools_config=runtime.ToolsConfig(state_dir=root / "state", scratch_root=root / "scratch"),
        memory_config=runtime.MemoryConfig(path=root / "memory"),
    )
    try:
        team = runtime.Team(
            name="footprint",
            models={"fast": runtime.OfflineModel(latency_s=0.0)},
            planner_model="fast",
            agents=[runtime.AgentSpec(name=n, role="worker", model="fast") for n in AGENTS],
        )
        task = "\n".join(f"- Item {i}: note number {i}." for i in range(3 * len(AGENTS)))
        result = rt.submit(task, team=team).result(timeout=180)
        if result.status != "succeeded":
            raise RuntimeError(f"the job did not succeed: {result.status}")
        served = sorted({s.agent for s in result.subtasks if s.agent})
        handles = [ray.get_actor(f"agent/{n}", namespace="troupe") for n in served]
        pids = ray.get([h.__ray_call__.remote(_pid) for h in handles])
        agent_uss = [psutil.Process(p).memory_full_info().uss for p in pids]
        modules: list[str] = ray.get(handles[0].__ray_call__.remote(_modules))
        address = ray.get_runtime_context().gcs_address
        # the second driver presents the token this Ray's start turned on, if it did
        auth = {"RAY_AUTH_MODE": "token" if is_token_auth_enabled() else "disabled"}
        bare = _python(_BARE_ACTORS, address, str(len(AGENTS)), env=auth)
        return agent_uss, bare["uss"], modules, bare["modules"]
    finally:
        rt.shutdown()


def run(quick: bool) -> Section:
    """Measure both figures."""
    section = Section("Footprint: agent process and cold start against bare Ray")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        agent_uss, bare_uss, modules, bare_modules = _memory(Path(tmp))
    mb = 1024 * 1024
    section.figures.append(
        Figure(
            name="agent actor USS (median)",
            value=median([u / mb for u in agent_uss]),
            baseline=median([u / mb for u in bare_uss]),
            unit="MB",
            baseline_name="bare Ray actor",
            goal=1.2,
            direction="at_most",
            note=f"{len(agent_uss)} agents after a job, {len(bare_uss)} bare actors",
        )
    )
    heavy = sorted(
        ({m.split(".")[0] for m in modules} - {m.split(".")[0] for m in bare_modules}) & set(HEAVY)
    )
    section.notes.append(
        f"agent process: {len(modules)} modules (bare actor: {len(bare_modules)}); "
        f"heavy packages it loads and the bare actor does not: {', '.join(heavy) or 'none'}"
    )
    extra = sorted(
        {
            ".".join(m.split(".")[:2])
            for m in modules
            if m.split(".")[0] in _OURS
            and not any(m == n or m.startswith(f"{n}.") for n in AGENT_NEEDS)
            and m not in {"actors", "runtime"}
        }
    )
    section.notes.append(f"raytroupe modules the agent loads but does not use: {extra or 'none'}")
    section.notes.append(RECORD)
    section.notes.append(
        "USS MB, agents: "
        + ", ".join(f"{u / mb:.0f}" for u in agent_uss)
        + "; bare: "
        + ", ".join(f"{u / mb:.0f}" for u in bare_uss)
    )

    repeats = 1 if quick else 3
    connects: list[dict[str, Any]] = []
    bares: list[dict[str, Any]] = []
    for _ in range(repeats):  # interleaved, so that load drifts hit both sides alike
        with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
            connects.append(_python(_CONNECT, tmp, ",".join(SYSTEM_ACTORS)))
        bares.append(_python(_BARE_START, ",".join(SYSTEM_ACTORS)))
    section.figures.append(
        Figure(
            name="cold start: connect() until system actors up",
            value=median([c["start_s"] for c in connects]),
            baseline=median([b["start_s"] for b in bares]),
            unit="s",
            baseline_name="ray.init + 6 empty actors",
            goal=1.3,
            direction="at_most",
            note=f"median of {repeats}, fresh processes",
        )
    )
    section.notes.append(
        "cold start, s (import / start / shutdown): connect "
        + "; ".join(
            f"{c['import_s']:.2f}/{c['start_s']:.2f}/{c['shutdown_s']:.2f}" for c in connects
        )
        + "; bare "
        + "; ".join(f"{b['import_s']:.2f}/{b['start_s']:.2f}/{b['shutdown_s']:.2f}" for b in bares)
    )
    section.notes.append(
        f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    return section


if __name__ == "__main__":
    main(run)
