"""Orchestrator shards in one process: a front desk, jobs by id, one journal in partitions."""

from typing import Any

import pytest
from wiring import GatedPool, InProcessProvisioner, in_process_sandbox, run, started

from raytroupe.actors import LLMAdapterPool, LocalRouterClient, MessageRouter, Orchestrator
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Admitted
from raytroupe.protocols import AgentSpec, InvalidInput, JobNotFound, TeamSpec, job_shard

TEAM = TeamSpec(name="sh", agents=(AgentSpec(name="sh-solo", role="w"),), max_parallel=1)
TASK = "- first thing.\n- second thing."


class Peers:
    """The other shards, in this process (under Ray: ``RayOrchestratorPeers``)."""

    def __init__(self) -> None:
        self.shards: dict[int, Orchestrator] = {}
        self.asked: list[tuple[int, str]] = []

    async def adopt(self, shard: int, job: Admitted) -> None:
        self.asked.append((shard, "adopt"))
        await self.shards[shard].adopt(job)

    async def ask(self, shard: int, method: str, *args: Any, **kwargs: Any) -> Any:
        self.asked.append((shard, method))
        return await getattr(self.shards[shard], method)(*args, **kwargs)


async def shards(path, allowed=99, count=2):
    router = MessageRouter()
    client = LocalRouterClient(router)
    pool = GatedPool(LLMAdapterPool(), allowed)
    await router.register("llm-0", pool, ["llm"])
    provisioner = InProcessProvisioner(
        router, pool.pool, client, sandbox=await in_process_sandbox()
    )
    await router.register("tools-0", provisioner.sandbox, ["tools"])
    peers = Peers()
    for k in range(count):
        shard = Orchestrator(
            client, provisioner, journal=Journal(path), shard=k, shards=count, peers=peers
        )
        peers.shards[k] = await started(shard)
        await router.register("orchestrator" if k == 0 else f"orchestrator-{k}", shard, [])
    return peers, pool


def test_the_front_desk_hands_jobs_out_in_turn_and_only_the_owner_answers(tmp_path):
    async def scenario():
        peers, _ = await shards(tmp_path / "journal.sqlite")
        front, other = peers.shards[0], peers.shards[1]
        ids = [await front.submit(TASK, TEAM) for _ in range(4)]
        results = [await peers.shards[job_shard(i, 2)].wait(i, 10) for i in ids]
        statuses = [await peers.shards[job_shard(i, 2)].status(i) for i in ids]
        refused = []
        for i in ids:
            stranger = front if job_shard(i, 2) == 1 else other
            with pytest.raises(JobNotFound) as caught:
                await stranger.status(i)
            refused.append(caught.value.message)
        return ids, results, statuses, refused, peers.asked, await other.jobs()

    ids, results, statuses, refused, asked, others = run(scenario())
    assert [job_shard(i, 2) for i in ids] == [0, 1, 0, 1]
    assert all(r.status == "succeeded" for r in results)
    assert statuses == ["succeeded"] * 4
    assert asked.count((1, "adopt")) == 2  # shard 1 got its two jobs from the front desk
    assert [m.rsplit(" ", 1)[-1] for m in refused] == [
        f"orchestrator/{job_shard(i, 2)}" for i in ids
    ]  # the other shard names the owner
    assert not [call for call in asked if call[1] != "adopt"]  # nothing passed on
    assert set(others) == {ids[1], ids[3]}  # a shard lists its own jobs


def test_a_restarted_shard_resumes_its_partition_only(tmp_path):
    path = tmp_path / "journal.sqlite"

    async def first_life():
        peers, pool = await shards(path, allowed=1)
        ids = [await peers.shards[0].submit(TASK, TEAM) for _ in range(2)]
        await pool.held.wait()  # one model call done, the next held: both jobs unfinished
        running = Journal(path).running_teams()
        for shard in peers.shards.values():  # the processes die here
            for task in list(shard._tasks):
                task.cancel()
        return ids, running

    async def second_life():
        router = MessageRouter()
        client = LocalRouterClient(router)
        pool = GatedPool(LLMAdapterPool(), 99)
        await router.register("llm-0", pool, ["llm"])
        provisioner = InProcessProvisioner(
            router, pool.pool, client, sandbox=await in_process_sandbox()
        )
        await router.register("tools-0", provisioner.sandbox, ["tools"])
        peers = Peers()
        only = Orchestrator(
            client, provisioner, journal=Journal(path), shard=1, shards=2, peers=peers
        )
        peers.shards[1] = await started(only)  # shard 1 alone comes back
        return set(only._jobs)

    ids, running = run(first_life())
    assert running == {"sh"}  # the journal knows which teams unfinished jobs use, every shard's
    resumed = run(second_life())
    assert resumed == {i for i in ids if job_shard(i, 2) == 1}


def test_only_the_front_desk_admits_jobs_and_keeps_teams_and_policies(tmp_path):
    async def scenario():
        peers, _ = await shards(tmp_path / "journal.sqlite")
        other = peers.shards[1]
        errors = []
        for call in (other.submit(TASK, TEAM), other.teams(), other.put_policy("t", None)):
            with pytest.raises(InvalidInput) as info:
                await call
            errors.append(info.value.message)
        stray = Admitted(id="job-0123456789abcdef", task="x", team=TEAM, tenant="t",
                         submitted_at=0.0, budget=None, route=None, images=(),
                         request_id=None, registered=False)  # fmt: skip
        with pytest.raises(InvalidInput):
            await other.adopt(stray)  # shard 0's id: not shard 1's to run
        with pytest.raises(JobNotFound):
            await other.status("job-0123456789abcdef-7")  # no shard 7: shard 0's, unknown
        return errors

    errors = run(scenario())
    assert "submitted to orchestrator/0" in errors[0]
    assert all("kept by orchestrator/0" in e for e in errors[1:])
