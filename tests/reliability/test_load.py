"""A bounded load test on loopback: 200 concurrent jobs through the driver API, then 100
through the HTTP API, with simulated model latency (the offline model's ``latency_s``). The
HTTP clients send a submission again after the ``Retry-After`` of a 429 (the tenant's fair
share of the control plane full), as a client should.

No job may fail; the system actors' memory (USS) is sampled before a warm-up batch, after it,
and after the load batch: after warm-up, growth must stay bounded. p50/p99 job latency
(submission to finish, from each ``JobResult.timings``) is recorded. Everything is bounded by
deadlines: it stops by itself.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ray

from raytroupe import runtime
from tests.support.figures import record
from tests.support.http_api import ADMIN_KEY
from tests.support.inline import agent_actor

LATENCY_S = 0.2
LOAD_JOBS = 200
HTTP_JOBS = 100
WARMUP_JOBS = 40
DEADLINE_S = 300.0
GROWTH_LIMIT_MB = 80.0
"""Allowed USS growth of all system actors together, from after warm-up to after the load."""
SYSTEM = ("router/0", "desk", "orchestrator/0", "llm/0", "memory")


def _team(name):
    return runtime.Team(
        name=name,
        planner_model=f"{name}-m",
        models={f"{name}-m": runtime.OfflineModel(latency_s=LATENCY_S)},
        agents=[runtime.AgentSpec(name=f"{name}-a{n}", role="worker", model=f"{name}-m",
                                  max_concurrency=64) for n in range(4)],
    )  # fmt: skip


def _pids(rt, names):
    def pid(_self):
        return os.getpid()

    return {n: ray.get(rt.actor(n).__ray_call__.remote(pid), timeout=30) for n in names}


def _uss_mb(pids):
    """Unique set size (private pages) of each process, from /proc/<pid>/smaps_rollup."""
    sizes = {}
    for name, pid in pids.items():
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        fields = dict(line.split(":", 1) for line in rollup[1:])
        private = ("Private_Clean", "Private_Dirty", "Private_Hugetlb")
        sizes[name] = sum(int(fields.get(k, "0 kB").split()[0]) for k in private) / 1024
    return sizes


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _batch(rt, team, count, tag):
    """Submit ``count`` jobs at once; wait (bounded) for all; return their results."""
    handles = [rt.submit(f"What does load item {tag}-{i} say?", team=team) for i in range(count)]
    deadline = time.monotonic() + DEADLINE_S
    return [h.result(timeout=max(1.0, deadline - time.monotonic())) for h in handles]


def test_two_hundred_concurrent_jobs_through_the_driver_keep_memory_bounded(rt):
    name = f"load-{uuid.uuid4().hex[:6]}"
    team = _team(name)
    agents = tuple(agent_actor(a.name) for a in team.agents)
    rt.submit("Warm the team up.", team=team).result(timeout=120)  # spawns the agents
    pids = _pids(rt, SYSTEM + agents)

    before = _uss_mb(pids)
    _batch(rt, team, WARMUP_JOBS, "warmup")
    warm = _uss_mb(pids)
    started = time.monotonic()
    results = _batch(rt, team, LOAD_JOBS, "load")
    wall = time.monotonic() - started
    after = _uss_mb(pids)

    latencies = [r.timings.total_s for r in results]
    failed = [r.job_id for r in results if r.status != "succeeded"]
    growth = sum(after.values()) - sum(warm.values())
    record("load", "driver: concurrent jobs", LOAD_JOBS, "jobs", f"model latency {LATENCY_S} s")
    record("load", "driver: errors", len(failed), "jobs")
    record("load", "driver: p50 job latency", round(statistics.median(latencies), 3), "s")
    record("load", "driver: p99 job latency", round(_percentile(latencies, 0.99), 3), "s")
    record("load", "driver: throughput", round(LOAD_JOBS / wall, 1), "jobs/s")
    record("load", "system actors USS before warm-up", round(sum(before.values()), 1), "MB",
           ", ".join(f"{n}={v:.0f}" for n, v in before.items()))  # fmt: skip
    record("load", "system actors USS after warm-up", round(sum(warm.values()), 1), "MB")
    record("load", "system actors USS after load", round(sum(after.values()), 1), "MB",
           ", ".join(f"{n}={v:.0f}" for n, v in after.items()))  # fmt: skip
    record("load", "USS growth after warm-up", round(growth, 1), "MB",
           f"limit {GROWTH_LIMIT_MB} MB for {LOAD_JOBS} jobs")  # fmt: skip

    assert not failed, failed
    assert all(len(r.subtasks) >= 1 and r.answer for r in results)
    assert growth < GROWTH_LIMIT_MB, {n: after[n] - warm[n] for n in after}


def test_one_hundred_concurrent_jobs_through_the_http_api(rt, api):
    # the operator's key: the team brings its own model and concurrency, which tenants' inline
    # teams may not (SECURITY.md); this measures load, tests/integration the policy
    name = f"hload-{uuid.uuid4().hex[:6]}"
    team = _team(name).spec().model_dump(mode="json")

    busy = []  # a 429 busy each: the tenant's share of the control plane was full

    def one(i):
        with api.client(ADMIN_KEY) as client:
            sent = time.monotonic()
            while True:  # as a client should: again after the Retry-After the 429 gives
                answer = client.post("/v1/jobs", json={"task": f"What does item {i} say?",
                                                       "team": team})  # fmt: skip
                if answer.status_code != 429 or time.monotonic() - sent > DEADLINE_S:
                    break
                busy.append(i)
                time.sleep(float(answer.headers["Retry-After"]))
            assert answer.status_code == 202, answer.text
            job_id = answer.json()["id"]
            with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
                for _ in stream.iter_lines():  # until the job ends
                    if time.monotonic() - sent > DEADLINE_S:
                        raise TimeoutError(job_id)
            body = client.get(f"/v1/jobs/{job_id}").json()
            return body["status"], time.monotonic() - sent

    with api.client(ADMIN_KEY) as client:  # the team's agents exist before the clock starts
        first = client.post("/v1/jobs", json={"task": "Warm up.", "team": team})
        assert first.status_code == 202, first.text
        with client.stream("GET", f"/v1/jobs/{first.json()['id']}/events") as stream:
            "".join(stream.iter_text())
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=32) as pool:
        outcomes = list(pool.map(one, range(HTTP_JOBS), timeout=DEADLINE_S))
    wall = time.monotonic() - started

    latencies = [seconds for _, seconds in outcomes]
    errors = [status for status, _ in outcomes if status != "succeeded"]
    record("load", "http: jobs (32 clients at once)", HTTP_JOBS, "jobs")
    record("load", "http: errors", len(errors), "jobs")
    record("load", "http: p50 latency (POST to job end)", round(statistics.median(latencies), 3),
           "s")  # fmt: skip
    record("load", "http: p99 latency", round(_percentile(latencies, 0.99), 3), "s")
    record("load", "http: throughput", round(HTTP_JOBS / wall, 1), "jobs/s")
    record("load", "http: submissions refused busy (429), then sent again", len(busy), "",
           "the tenant's share: 2 at once and 16 waiting (APIConfig.shares)")  # fmt: skip
    assert not errors, errors
