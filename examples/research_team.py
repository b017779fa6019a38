"""Run a small research job on an embedded local Ray and print what each agent did.

Usage: python examples/research_team.py [--latency SECONDS] [--gguf MODEL.gguf [--threads N]]

With ``--gguf`` every agent and the planner use that model, served by llama.cpp's
``llama-server`` under raytroupe's supervisor (``troupe models install-server`` first).

On a cluster (``ray job submit ... -- python examples/research_team.py``) it joins the
cluster's Ray and uses the models it serves.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from raytroupe import runtime

TASK = """\
Ray is a framework for scaling Python programs from a laptop to a cluster.
Actors in Ray are stateful workers, each living in its own process.
Ray Serve exposes Python code over HTTP with autoscaling replicas.
Chroma is an embedding database that stores vectors for retrieval.
Questions:
1. What are Ray actors?
2. What does Ray Serve do?
3. Where are embeddings stored?
4. How many requests are 17 * 23 + 4 requests?
"""

TEAM = Path(__file__).parent / "teams" / "research.yaml"


def main() -> None:
    """Submit the job, stream its events, print the result."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--latency", type=float, default=0.2, help="offline model latency (s), own Ray only"
    )
    parser.add_argument("--gguf", type=Path, help="a GGUF model to serve locally and use")
    parser.add_argument("--threads", type=int, default=None, help="llama-server's CPU threads")
    args = parser.parse_args()

    # On a running cluster (`ray job submit` sets RAY_ADDRESS) the job uses the models the
    # cluster serves; only a Ray of its own gets the offline model with this latency.
    joining = bool(os.environ.get("RAY_ADDRESS"))
    llm: runtime.ModelSpec | None = None
    if args.gguf is not None:
        llm = runtime.LocalModel(gguf=str(args.gguf.resolve()), threads=args.threads,
                                 context_size=8192, timeout_s=600.0)  # fmt: skip
    elif not joining:
        llm = runtime.OfflineModel(latency_s=args.latency)
    wait_s = 120.0 if args.gguf is None else 3600.0  # a real model on a CPU takes minutes
    rt = runtime.connect(llm=llm, log_level="warning")
    try:
        team = runtime.Team.from_yaml(TEAM)
        job = rt.submit(TASK, team=team)
        print(f"submitted {job.job_id} to team {team.name!r}")
        for event in job.events(timeout=wait_s):
            where = f" {event.subtask_id}" if event.subtask_id else ""
            who = f" by {event.data['agent']}" if event.data.get("agent") else ""
            print(f"  [{event.seq:>2}] {event.type}{where}{who}")
        result = job.result(timeout=wait_s)
        t = result.timings
        print(
            f"\nstatus: {result.status} in {t.total_s:.2f} s (agents ready {t.provision_s:.2f} s, "
            f"plan {t.plan_s:.2f} s, subtasks {t.dispatch_s:.2f} s, "
            f"aggregate {t.aggregate_s:.2f} s)"
        )
        print("\nsubtasks:")
        for sub in result.subtasks:
            print(
                f"  {sub.id} [{sub.role} -> {sub.agent}, {sub.turns} turn(s), "
                f"{sub.tool_calls} tool call(s), via {', '.join(sub.providers)}]"
            )
            print(f"     {sub.instructions}")
            print(f"     => {sub.output}")
        print(f"\nanswer:\n{result.answer}")
        print(f"\nusage: {result.usage.total_tokens} tokens in {result.usage.calls} model calls")
    finally:
        rt.shutdown()


if __name__ == "__main__":
    main()
