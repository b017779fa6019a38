"""Job shards in one process: a front desk, jobs by id, one journal in partitions."""

import inspect

import pytest
from wiring import (
    GatedPool,
    InProcessProvisioner,
    LocalShards,
    control_plane,
    in_process_sandbox,
    order,
    run,
)

from raytroupe.actors import (
    FrontDesk,
    LLMAdapterPool,
    LocalRouterClient,
    MessageRouter,
    Orchestrator,
)
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Admitted
from raytroupe.protocols import AgentSpec, InvalidInput, JobNotFound, TeamSpec, job_shard
from raytroupe.protocols.job_context import JobContext
from tests.support.inline import agent_name

TEAM = TeamSpec(name="sh", agents=(AgentSpec(name="sh-solo", role="w"),), max_parallel=1)
TASK = "- first thing.\n- second thing."


async def system(path, allowed=99, count=2, only=None):
    """Desk and ``count`` shards on the journal at ``path`` (``only``: that shard alone)."""
    router = MessageRouter()
    client = LocalRouterClient(router)
    pool = GatedPool(LLMAdapterPool(), allowed)
    await router.register("llm-0", pool, ["llm"])
    provisioner = InProcessProvisioner(
        router, pool.pool, client, sandbox=await in_process_sandbox()
    )
    await router.register("tools-0", provisioner.sandbox, ["tools"])
    local = LocalShards(count)
    if only is not None:  # one shard comes back; the others (and the desk) stay down
        shard = Orchestrator(client, provisioner, None, local, journal=Journal(path), shard=only)
        await shard.on_start()
        return None, {only: shard}, local, pool
    desk, shards = await control_plane(client, provisioner, shards=local, journal=path)
    for k, shard in enumerate(shards):
        await router.register("orchestrator" if k == 0 else f"orchestrator-{k}", shard, [])
    return desk, dict(enumerate(shards)), local, pool


def test_the_front_desk_hands_jobs_out_in_turn_and_only_the_owner_answers(tmp_path):
    async def scenario():
        desk, shards, local, _ = await system(tmp_path / "journal.sqlite")
        ids = [await desk.submit(*order(TASK, TEAM)) for _ in range(4)]
        results = [await shards[job_shard(i, 2)].wait(i, 10) for i in ids]
        statuses = [await shards[job_shard(i, 2)].status(i) for i in ids]
        refused = []
        for i in ids:
            stranger = shards[1 - job_shard(i, 2)]
            with pytest.raises(JobNotFound) as caught:
                await stranger.status(i)
            refused.append(caught.value.message)
        return ids, results, statuses, refused, local.calls, await shards[1].jobs()

    ids, results, statuses, refused, calls, others = run(scenario())
    assert [job_shard(i, 2) for i in ids] == [0, 1, 0, 1]
    assert all(r.status == "succeeded" for r in results)
    assert statuses == ["succeeded"] * 4
    # the desk handed each job to its shard, and nothing else went between actors
    assert calls == [("adopt", 0), ("adopt", 1), ("adopt", 0), ("adopt", 1)]
    assert [m.rsplit(" ", 1)[-1] for m in refused] == [
        f"orchestrator/{job_shard(i, 2)}" for i in ids
    ]  # the other shard names the owner
    assert set(others) == {ids[1], ids[3]}  # a shard lists its own jobs


def test_a_restarted_shard_resumes_its_partition_only(tmp_path):
    path = tmp_path / "journal.sqlite"

    async def first_life():
        desk, shards, _, pool = await system(path, allowed=1)
        ids = [await desk.submit(*order(TASK, TEAM)) for _ in range(2)]
        await pool.held.wait()  # one model call done, the next held: both jobs unfinished
        running = Journal(path).running_teams()
        for shard in shards.values():  # the processes die here
            for task in list(shard._tasks):
                task.cancel()
        return ids, running

    async def second_life():
        _, shards, _, _ = await system(path, only=1)  # shard 1 alone comes back
        return set(shards[1]._jobs)

    ids, running = run(first_life())
    # the journal knows which teams unfinished jobs use, every shard's
    assert running == {agent_name("sh")}
    resumed = run(second_life())
    assert resumed == {i for i in ids if job_shard(i, 2) == 1}


def test_a_shard_runs_only_its_own_partition(tmp_path):
    async def scenario():
        _, shards, _, _ = await system(tmp_path / "journal.sqlite")
        stray = Admitted(
            id="job-0123456789abcdef",
            context=JobContext(request="x"),
            team=TEAM,
            tenant="t",
            submitted_at=0.0,
            budget=None,
            route=None,
            images=(),
            request_id=None,
            registered=False,
        )
        with pytest.raises(InvalidInput):
            await shards[1].adopt(stray)  # shard 0's id: not shard 1's to run
        with pytest.raises(JobNotFound):
            await shards[1].status("job-0123456789abcdef-7")  # no shard 7: shard 0's, unknown
        return await shards[0].jobs(), await shards[1].jobs()

    assert run(scenario()) == ({}, {})


def test_each_remote_method_has_one_home():
    """The desk admits and keeps the catalogs; a shard runs jobs: no method is on both."""

    def remote(cls: type) -> set[str]:
        return {
            name
            for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction)
            if not name.startswith("_") and name not in {"on_start", "on_stop"}
        }

    desk, shard = remote(FrontDesk), remote(Orchestrator)
    assert desk & shard == {"summaries"}  # the journal's list (desk), or one shard's memory
    assert {"submit", "put_team", "put_policy", "put_skill", "create_session"} <= desk
    assert shard == {  # a shard answers about its jobs, and nothing else
        "adopt", "approvals", "cancel", "checkpoints", "decide", "events", "feedback",
        "feedbacks", "fork", "jobs", "listed", "receive", "resume", "running_teams", "shard",
        "status", "summaries", "summary", "trace", "wait", "waiting",
    }  # fmt: skip
