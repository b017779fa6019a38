"""Job shards and the front desk on a real Ray: the session's deployment has two shards.

Every integration test runs on them (tests/conftest.py sets ``scale.orchestrator_shards=2``):
the front desk (actor ``desk``) admits each job and hands it to the shards in turn. These
check what the split adds: jobs partitioned by id, each answered for by its owner alone,
envelopes about a job (streamed tokens, approvals) reaching its shard, a shard's restart
resuming its own jobs only, teams and policies kept by the desk alone, and a desk restart
leaving running jobs alone.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import JobNotFound, job_shard
from tests.support.restarts import kill_and_wait_for_restart
from tests.support.wire_server import Default, Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

SHARDS = 2


def _handles(rt: Any) -> tuple[Any, ...]:
    handles: tuple[Any, ...] = rt.client.handles.orchestrators.handles
    return handles


def _slow_team(name: str) -> runtime.Team:
    return runtime.Team(
        name=name,
        max_parallel=1,
        models={f"{name}-slow": runtime.OfflineModel(latency_s=0.4)},
        agents=[
            runtime.AgentSpec(name=f"{name}-0", role="worker", model=f"{name}-slow",
                              memory=runtime.MemoryPolicy(recall=False))
        ],
    )  # fmt: skip


def test_jobs_take_turns_over_the_shards_and_the_driver_sees_them_all(rt):
    team = runtime.Team(name="turns", agents=[runtime.AgentSpec(name="turns-0", role="w")])
    jobs = [rt.submit(f"- step {n}.", team=team) for n in range(4)]
    results = [job.result(timeout=60) for job in jobs]

    assert all(r.status == "succeeded" for r in results), [r.error for r in results]
    owners = [job_shard(job.job_id, SHARDS) for job in jobs]
    assert sorted(owners) == [0, 0, 1, 1]  # in turn: two each
    assert {job.job_id.endswith("-1") for job in jobs} == {True, False}
    for shard, handle in enumerate(_handles(rt)):  # each shard knows its own partition only
        known = {job_id for _, job_id, _ in ray.get(handle.listed.remote())}
        assert {j.job_id for j, o in zip(jobs, owners, strict=True) if o == shard} <= known
        assert not {j.job_id for j, o in zip(jobs, owners, strict=True) if o != shard} & known
    listed = list(rt.jobs())  # the driver's list: both shards', oldest first
    assert [j.job_id for j in jobs] == [i for i in listed if i in {j.job_id for j in jobs}]


def test_the_owner_answers_for_its_job_another_shard_names_it_and_a_made_up_id_is_not_found(rt):
    team = runtime.Team(name="anyshard", agents=[runtime.AgentSpec(name="anyshard-0", role="w")])
    jobs = [rt.submit(f"- item {n}.", team=team) for n in range(2)]
    for job in jobs:
        job.result(timeout=60)
    assert {job_shard(j.job_id, SHARDS) for j in jobs} == {0, 1}
    for job in jobs:
        owner = job_shard(job.job_id, SHARDS)
        for shard, handle in enumerate(_handles(rt)):
            if shard != owner:  # nothing is passed on between shards: it says where to ask
                with pytest.raises(JobNotFound, match=f"its owner is orchestrator/{owner}"):
                    ray.get(handle.status.remote(job.job_id))
                with pytest.raises(JobNotFound):
                    ray.get(handle.events.remote(job.job_id, 0, 0.0))
                continue
            assert ray.get(handle.status.remote(job.job_id)) == "succeeded"
            events = ray.get(handle.events.remote(job.job_id, 0, 0.0))
            assert events[-1].type == "job_succeeded"
            with pytest.raises(JobNotFound):  # another tenant's job is not there either
                ray.get(handle.status.remote(job.job_id, tenant="somebody-else"))
        assert rt.job(job.job_id).status() == "succeeded"  # the driver asks the owner
    for made_up in ("job-0123456789abcdef-1", "job-0123456789abcdef-7", "job-x-99999"):
        for handle in _handles(rt):
            with pytest.raises(JobNotFound):
                ray.get(handle.status.remote(made_up))
        with pytest.raises(JobNotFound):
            rt.job(made_up).status()


def test_approvals_and_streamed_tokens_reach_the_shard_of_their_job(rt):
    owners = set()
    with WireServer() as wire:
        for n in range(SHARDS):  # two jobs in a row: one on each shard
            wire.reset()
            wire.script(Reply.tool("echo", {"text": f"ship {n}"}), Default())
            model = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="w")
            team = runtime.Team(
                name=f"shardapprove{n}",
                planner_model="offline",
                models={f"shardapprove{n}-m": model},
                agents=[runtime.AgentSpec(name=f"shardapprove{n}-a", role="worker",
                                          model=f"shardapprove{n}-m", tools=["echo"],
                                          stream=True)],
            )  # fmt: skip
            job = rt.submit("Echo the release call.", team=team)
            owners.add(job_shard(job.job_id, SHARDS))
            for event in job.events(timeout=60):
                if event.type == "approval_requested":
                    break
            (pending,) = job.approvals()
            assert pending.arguments == {"text": f"ship {n}"}
            assert job.approve(pending.approval_id) is True
            result = job.result(timeout=60)
            assert result.status == "succeeded", result.error
            events = list(job.events(timeout=5))
            assert any(e.type == "llm_delta" for e in events)  # streamed to its shard
    assert owners == {0, 1}


def test_a_restarted_shard_resumes_its_own_jobs_and_the_other_runs_on(rt):
    jobs = [
        rt.submit("Tasks:\n- a.\n- b.\n- c.\n- d.", team=_slow_team(f"shardres{n}"))
        for n in range(2)
    ]
    by_shard = {job_shard(j.job_id, SHARDS): j for j in jobs}
    assert set(by_shard) == {0, 1}
    for job in jobs:
        for event in job.events(timeout=60):
            if event.type == "subtask_finished":
                break
    killed_at = time.time()
    ray.kill(_handles(rt)[1], no_restart=False)

    results = {shard: job.result(timeout=120) for shard, job in by_shard.items()}
    assert all(r.status == "succeeded" for r in results.values()), results
    untouched = results[0]  # shard 0's job ran through: no subtask was dispatched again
    assert all(s.attempt == 1 for s in untouched.subtasks)
    resumed = results[1]  # shard 1's came back from its journal partition
    before = [s for s in resumed.subtasks if s.finished_at < killed_at]
    assert before  # at least one subtask finished before the kill and was not run again
    assert all(s.attempt == 1 for s in before)
    assert len(resumed.subtasks) == 4


def test_teams_and_policies_are_kept_by_the_desk_alone(rt):
    desk = rt.client.handles.desk
    assert isinstance(ray.get(desk.teams.remote()), dict)
    for handle in _handles(rt):  # a shard has no such methods: nothing to keep in step
        for method in ("teams", "put_policy", "submit", "put_skill", "create_session"):
            with pytest.raises(AttributeError):
                getattr(handle, method)


def test_a_desk_restart_leaves_running_jobs_alone_and_keeps_the_catalog(rt):
    rt.put_team(_slow_team("deskkept"))
    jobs = [rt.submit("Tasks:\n- a.\n- b.\n- c.", team="deskkept") for _ in range(2)]
    for job in jobs:
        for event in job.events(timeout=60):
            if event.type == "subtask_started":
                break
    kill_and_wait_for_restart(rt.client.handles.desk)
    results = [job.result(timeout=120) for job in jobs]
    assert all(r.status == "succeeded" for r in results), [r.error for r in results]
    assert all(s.attempt == 1 for r in results for s in r.subtasks)  # nothing ran again
    assert "deskkept" in rt.teams()  # the restarted desk read its catalog back
    after = rt.submit("- one more.", team="deskkept").result(timeout=60)
    assert after.status == "succeeded", after.error
