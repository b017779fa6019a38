"""A graph job end to end, offline: map, join, a pause for a person, checkpoints and a fork.

    .venv/bin/python examples/graph_team.py

The team (``examples/teams/research_graph.yaml``) researches each topic of the job's input
at once, writes a report once every branch is in, and pauses before the report for a
person's word. This script plays the person: it shows the paused state, resumes the job
with a verdict, lists its checkpoints, then forks the job from its first checkpoint with
other topics ("what if we had asked about Serve instead?").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from raytroupe import runtime

TEAM = Path(__file__).parent / "teams" / "research_graph.yaml"
SOURCES = {
    "actors": "Ray actors are stateful workers: each one keeps its state between calls.",
    "tasks": "Ray tasks are stateless functions scheduled on any node of the cluster.",
    "serve": "Ray Serve exposes Python deployments over HTTP with autoscaling replicas.",
}


def _until(job: runtime.JobHandle, status: str, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while job.status() != status:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job.job_id} never reached {status}")
        time.sleep(0.2)


def demo(rt: runtime.Runtime, say: Callable[[str], object] = print) -> None:
    """Run the graph on ``rt``, resume it, fork it; ``say`` each line of what happened."""
    team = runtime.Team.from_yaml(TEAM)
    given = {"topics": ["actors", "tasks"], "sources": SOURCES}
    job = rt.submit("How does Ray run work?", team=team, input=given)
    _until(job, "awaiting_input")
    paused = job.checkpoints()[-1]
    say(f"paused at {paused.interrupt.id if paused.interrupt else '?'}; findings so far:")
    for finding in paused.state["findings"]:
        say(f"  - {finding}")
    job.resume("Approved: keep it short.")
    result = job.result(timeout=120)
    say(f"status: {result.status}")
    say(f"report: {result.answer}")
    say("checkpoints:")
    for point in job.checkpoints():
        due = ", ".join(t.node for t in point.next) or "(end)"
        say(f"  step {point.step}: next {due}")

    fork = job.fork(0, state={"topics": ["serve"]})
    _until(fork, "awaiting_input")
    fork.resume("Approved.")
    forked = fork.result(timeout=120)
    say(f"fork of {job.job_id} from step 0, topics ['serve']: {forked.status}")
    say(f"findings: {json.dumps((forked.state or {}).get('findings'))}")


def main() -> None:
    """Start an embedded Ray, run the demo, stop."""
    rt = runtime.connect(address="local", num_cpus=2, log_level="warning")
    try:
        demo(rt)
    finally:
        rt.shutdown()


if __name__ == "__main__":
    main()
