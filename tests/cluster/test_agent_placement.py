"""A new agent that Ray put elsewhere than the node chosen for it is made again there.

Ray's soft node affinity falls back to the local node while the raylet does not know the
chosen node (for a while after the node joined: seen on `ray up`, a whole team on the head).
The provisioner checks where each new agent landed and makes it again, a few times, while
the chosen node is alive; then leaves it where Ray put it. The child process runs a Ray of
its own (tests/support/placement_child.py), since this one's session Ray has one node.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from raytroupe.actors.team_provisioner import PLACE_TRIES

ROOT = Path(__file__).resolve().parents[2]


def test_an_agent_put_elsewhere_is_made_again_then_left_where_ray_put_it() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.placement_child"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])

    # asked for the CPU-less head: every try landed on the worker, the node stayed alive
    assert result["asked_head_attempts"] == list(range(1, PLACE_TRIES + 1))
    assert all(result["asked_head_alive"])
    assert result["asked_head_landed"] == result["worker"]
    assert result["alive_with_the_name"] == 1  # the ones made before it were stopped
    # asked for the worker: there at once
    assert result["asked_worker_landed"] == result["worker"]
    assert result["asked_worker_retries"] == 0
    # CPU-less agents asked for the worker: all there, none made twice
    assert result["cpuless_landed"] == [result["worker"]] * 8
    assert result["cpuless_retries"] == 0
