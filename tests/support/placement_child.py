"""Child process of tests/cluster/test_agent_placement.py: a two-node Ray of its own.

A head with no CPUs and a worker with two, on 127.0.0.1. An agent that asks for a CPU is
made on the head, where Ray cannot put it: Ray's soft node affinity falls back to the worker,
as it does on a node its raylet does not know yet. Then eight agents that ask for no CPU are
made on the worker. Prints one JSON line with what happened.
"""

from __future__ import annotations

import asyncio
import json
import os

import ray
from ray.cluster_utils import Cluster
from structlog.testing import capture_logs

from raytroupe.actors.ray_handles import NAMESPACE, ray_mailbox
from raytroupe.actors.ray_placement import _remote
from raytroupe.actors.router import MessageRouter
from raytroupe.actors.router_handles import RouterShards
from raytroupe.actors.team_provisioner import RayTeamProvisioner, agent_actor_name
from raytroupe.protocols import AgentSpec, TeamSpec
from raytroupe.runtime.joining import stay_on_loopback

NODE = {"node_ip_address": "127.0.0.1", "include_dashboard": False}


async def _place(provisioner: RayTeamProvisioner, team: TeamSpec, node: str, agent: int = 0) -> str:
    handle = await provisioner._spawn_on(team, team.agents[agent], (), node)
    landed: str = await handle.started.remote()
    return landed


def main() -> None:
    stay_on_loopback()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": 0})
    try:
        worker = cluster.add_node(**NODE, num_cpus=2)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
        team = TeamSpec(
            name="placed",
            agents=(AgentSpec(name="placed-0", role="worker", num_cpus=1),),
        )
        # a router for the agents to reach as they start (no agent is registered with it)
        router = _remote(MessageRouter).options(num_cpus=0).remote(mailbox_factory=ray_mailbox)
        provisioner = RayTeamProvisioner(routers=RouterShards([router]), llm=None, sandboxes=[])
        with capture_logs() as logs:
            on_head = asyncio.run(_place(provisioner, team, cluster.head_node.node_id))
        asked_head = [e for e in logs if e["event"] == "agent.placed_elsewhere"]
        alive = [  # the GCS actor table, dead actors included
            a
            for a in ray._private.state.state.actor_table(None).values()
            if a["Name"] == agent_actor_name("placed-0") and a["State"] == "ALIVE"
        ]
        ray.kill(ray.get_actor(agent_actor_name("placed-0"), namespace=NAMESPACE))
        with capture_logs() as logs:
            on_worker = asyncio.run(_place(provisioner, team, worker.node_id))
        asked_worker = [e for e in logs if e["event"] == "agent.placed_elsewhere"]
        cpuless = TeamSpec(  # an empty resource request: soft affinity misplaced a third of them
            name="cpuless",
            agents=tuple(AgentSpec(name=f"cpuless-{i}", role="worker") for i in range(8)),
        )
        with capture_logs() as logs:
            cpuless_landed = [
                asyncio.run(_place(provisioner, cpuless, worker.node_id, i)) for i in range(8)
            ]
        cpuless_retries = [e for e in logs if e["event"] == "agent.placed_elsewhere"]
        print(  # noqa: T201 - the result, for the parent test
            json.dumps(
                {
                    "head": cluster.head_node.node_id,
                    "worker": worker.node_id,
                    "asked_head_landed": on_head,
                    "asked_head_attempts": [e["attempt"] for e in asked_head],
                    "asked_head_alive": [e["asked_alive"] for e in asked_head],
                    "alive_with_the_name": len(alive),
                    "asked_worker_landed": on_worker,
                    "asked_worker_retries": len(asked_worker),
                    "cpuless_landed": cpuless_landed,
                    "cpuless_retries": len(cpuless_retries),
                }
            ),
            flush=True,
        )
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
