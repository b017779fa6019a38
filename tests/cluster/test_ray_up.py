"""`ray up` as docs/cluster.md documents it, end to end, on real SSH "machines" on this host.

Two nodes (tests/support/ssh_nodes.py): a head on 127.0.0.2 and a worker on 127.0.0.3, each a
real sshd and a non-root account of its own, both logged in as the config's `ssh_user`. The
config is deployments/cluster.local.yaml with what a user edits (addresses, key, the head's
--node-ip-address) changed; every command is the documentation's, run with this project's `ray`:

1. `ray up -y` installs uv from PyPI, a venv and raytroupe on both nodes, starts Ray, deploys
   the HTTP application; `/readyz` answers 200. On each node the venv's Python, started in the
   home folder (where Ray's workers start, with it on sys.path), imports `raytroupe.runtime`
   from the mounted copy (~/troupe-src) and none of the checkout's top-level folders under a
   name of its own (`protocols`, `runtime`, ...).
2. The secrets file (an API key, a model provider key, the LLM config's path, a Redis for the
   GCS) and the LLM config go to every node with `ray rsync-up -A ... '~/.troupe/env'`;
   `ray up -y` again restarts Ray, which reads them: the GCS now keeps its tables in Redis.
3. A job over HTTP with the shipped key runs on the shipped LLM config: its model calls reach a
   local OpenAI-wire server with the shipped provider key; agents run on the worker (they are
   spread over the nodes); the system actors are there by name; the head advertises head_ip.
4. Nothing a job needs is on a node's disk: the head's PostgreSQL holds the job, its
   subtasks, the pool's usage and the agents' grants; the memory actor uses the head's Chroma
   server; the system actors are not pinned to the head.
5. `ray job submit` of the example driver succeeds.
6. `ray down -y` stops everything: no process is left under either account (the worker's Ray
   stops itself once its raylet has lost the head's GCS, within Ray's 60 s timeout; the
   head's services are stopped by their watcher once the head's Ray is gone).

Figures (time to ready, to restart, to down) are printed and recorded for RELIABILITY.md.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.figures import record
from tests.support.redis import Redis, redis_server
from tests.support.ssh_nodes import Node, Nodes, ssh_nodes
from tests.support.wire_model import Default, Reply
from tests.support.wire_server import WireServer, running_wire_server

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "deployments" / "cluster.local.yaml"
RAY = Path(sys.executable).with_name("ray")
PLACEHOLDER_HEAD = "10.0.0.10"
API_KEY = "rt-cluster-test-key"
PROVIDER_KEY = "sk-wire-cluster-secret"
PROVIDER_KEY_ENV = "TROUPE_WIRE_KEY"
UP_TIMEOUT_S = 900
READY_S = 180.0
JOIN_S = 480.0
"""A worker joins once the head's autoscaler has set it up over SSH (uv, a venv, the package
and its dependencies from PyPI): 180 s was not enough on a 2-core host busy with other work."""
JOB_S = 180.0
# `ray down` stops the head's Ray; a worker's stops itself once its raylet has lost the GCS
# (within Ray's 60 s timeout)
DOWN_S = 150.0
SUITE = "ray_up"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    with ssh_nodes(tmp_path_factory.mktemp("nodes"), ssh_user="ubuntu", count=2) as made:
        yield made


@pytest.fixture(scope="module")
def gcs_redis() -> Iterator[Redis]:
    # outside pytest's basetemp, and removed: the GCS stores what `ray job submit` uploads
    # (this repository, its tests' planted secrets included) and the security suite scans
    # the basetemp for those
    with (
        tempfile.TemporaryDirectory(prefix="raytroupe-gcs-redis-") as folder,
        redis_server(Path(folder)) as server,
    ):
        yield server


@pytest.fixture(scope="module")
def wire() -> Iterator[WireServer]:
    with running_wire_server(api_key=PROVIDER_KEY) as server:  # a wrong key: 401
        yield server


def _config(nodes: Nodes, folder: Path) -> Path:
    """cluster.local.yaml with the user's edits: addresses, key, the head's node address."""
    cfg = yaml.safe_load(LOCAL.read_text())
    cfg["cluster_name"] = f"troupe-test-{os.getpid()}"
    cfg["provider"]["head_ip"] = nodes.head.address
    cfg["provider"]["worker_ips"] = [node.address for node in nodes.workers]
    cfg["min_workers"] = cfg["max_workers"] = len(nodes.workers)
    cfg["auth"]["ssh_private_key"] = str(nodes.key)
    pinned = f"--node-ip-address={PLACEHOLDER_HEAD}"
    starts = cfg["head_start_ray_commands"]
    assert sum(pinned in command for command in starts) == 1, starts
    cfg["head_start_ray_commands"] = [
        c.replace(pinned, f"--node-ip-address={nodes.head.address}") for c in starts
    ]
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _secrets(folder: Path, wire: WireServer, redis: Redis) -> tuple[Path, Path]:
    """troupe.env (mode 600) and llm.yaml, as a user writes them before shipping them."""
    env = folder / "troupe.env"
    env.write_text(
        f"TROUPE_API_KEYS=cluster:{API_KEY}:admin\n"
        f"{PROVIDER_KEY_ENV}={PROVIDER_KEY}\n"
        "TROUPE_LLM_CONFIG=~/.troupe/llm.yaml\n"
        f"TROUPE_GCS_REDIS={redis.address}\n"
        f"TROUPE_GCS_REDIS_PASSWORD={redis.password}\n"
    )
    env.chmod(0o600)
    llm = folder / "llm.yaml"
    llm.write_text(
        yaml.safe_dump(
            {
                "models": {
                    "wire": {
                        "provider": "openai_compatible",
                        "base_url": wire.base_url_openai,
                        "model": "wire-model",
                        "api_key_env": PROVIDER_KEY_ENV,
                    }
                },
                # the provider lives on loopback, and only it may receive this key
                "network": {"allow": ["127.0.0.1"]},
                "keys": {PROVIDER_KEY_ENV: ["127.0.0.1"]},
            }
        )
    )
    return env, llm


def _assert_shipped(node: Node, local: Path) -> None:
    shipped = node.home / ".troupe" / "env"
    assert shipped.read_text() == local.read_text()
    assert shipped.stat().st_mode & 0o777 == 0o600
    assert shipped.stat().st_uid == node.uid


def _wait_shipped(node: Node, local: Path) -> None:
    """Until the head's autoscaler has copied ~/.troupe to ``node`` (it re-sets workers up)."""
    deadline = time.monotonic() + READY_S
    while not (node.home / ".troupe" / "env").exists():
        assert time.monotonic() < deadline, f"~/.troupe/env never reached {node.address}"
        time.sleep(1.0)
    _assert_shipped(node, local)


# Run by each node's venv Python from its home folder: what it imports, by name
IMPORTS = """
import importlib, json, os
found = {"home": os.path.expanduser("~")}
for name in ("raytroupe.runtime", "protocols", "runtime", "deployments", "actors", "examples"):
    try:
        found[name] = importlib.import_module(name).__file__
    except ModuleNotFoundError as exc:
        found[name] = f"ModuleNotFoundError: {exc.name}"
print(json.dumps(found))
"""
NOT_IMPORTABLE = ("protocols", "runtime", "deployments", "actors", "examples")


def _assert_set_up(nodes: Nodes) -> None:
    """What setup left on every node: the secrets folder, private to the account; the package
    importable as raytroupe.* alone: the checkout's folder is on no sys.path (editable_mode=compat
    would put it there) and no folder in ~ is named `raytroupe`."""
    for node in nodes.nodes:
        assert (node.home / ".troupe").stat().st_mode & 0o777 == 0o700
        # `python -` from ~: sys.path[0] is the home folder, as for Ray's workers
        ran = nodes.ssh(node, "cd && exec ~/troupe-venv/bin/python -", stdin=IMPORTS)
        assert ran.returncode == 0, f"{node.address}: {ran.stderr[-3000:]}"
        found = json.loads(ran.stdout.strip().splitlines()[-1])
        package = f"{found['home']}/troupe-src/raytroupe/runtime/__init__.py"
        assert found["raytroupe.runtime"] == package, (node.address, found)
        for name in NOT_IMPORTABLE:
            assert found[name] == f"ModuleNotFoundError: {name}", (node.address, name, found)


def _launcher_env(folder: Path) -> dict[str, str]:
    """This machine as the user's laptop: the venv's ray on PATH, its own Ray temp dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = f"{RAY.parent}{os.pathsep}{env.get('PATH', '')}"
    env["RAY_TMPDIR"] = str(folder / "launcher")
    return env


def _ray(args: list[str], env: dict[str, str], log: Path, *, cwd: Path = ROOT) -> float:
    """Run ``ray ARGS`` (output to ``log``); its duration. Fails the test with the log's tail."""
    started = time.monotonic()
    with log.open("ab") as out:
        out.write(f"\n$ ray {' '.join(args)}\n".encode())
        out.flush()
        done = subprocess.run([str(RAY), *args], cwd=cwd, env=env, stdout=out,
                              stderr=subprocess.STDOUT, timeout=UP_TIMEOUT_S,
                              check=False)  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, f"ray {args[0]} failed:\n{log.read_text()[-6000:]}"
    return elapsed


def _wait_ready(url: str) -> float:
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < READY_S:
        try:
            response = httpx.get(f"{url}/readyz", timeout=5.0)
            if response.status_code == 200:
                return time.monotonic() - started
            last = f"{response.status_code} {response.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1.0)
    pytest.fail(f"/readyz did not answer 200 within {READY_S} s; last: {last}")


def _wait_nodes(dashboard: str, count: int, *, replaced: frozenset[str] = frozenset()) -> float:
    """Until ``count`` Ray nodes are alive (workers join after `ray up` returns), none of them
    one of the ``replaced`` node ids.

    After `ray up` restarts the head, the old worker's raylet can be alive in the new GCS for
    a while before the head's autoscaler sets the worker up again and restarts its Ray: an
    actor placed on it then dies with it (seen in CI: a whole team moved to the head).
    """
    from ray.util.state import list_nodes  # noqa: PLC0415 - client side only

    started = time.monotonic()
    alive: list[Any] = []
    while time.monotonic() - started < JOIN_S:
        alive = [n for n in list_nodes(address=dashboard) if n.state == "ALIVE"]
        if len(alive) == count and not {n.node_id for n in alive} & replaced:
            return time.monotonic() - started
        time.sleep(2.0)
    pytest.fail(f"{count} new nodes not alive within {JOIN_S} s: {alive}")


def _restart(config: Path, env: dict[str, str], log: Path, nodes: Nodes, env_file: Path) -> float:
    """`ray up` again, until the restarted head serves and every worker was set up again."""
    from ray.util.state import list_nodes  # noqa: PLC0415 - client side only

    dashboard = f"http://{nodes.head.address}:8265"
    before = frozenset(n.node_id for n in list_nodes(address=dashboard))
    restart_s = _ray(["up", "-y", str(config)], env, log)
    _wait_ready(f"http://{nodes.head.address}:8000")
    for worker in nodes.workers:  # the head passes ~/.troupe on as it sets the worker up again
        _wait_shipped(worker, env_file)
    _wait_nodes(dashboard, len(nodes.nodes), replaced=before)
    return restart_s


def _placed_elsewhere(nodes: Nodes) -> list[str]:
    """The provisioner's ``agent.placed_elsewhere`` lines in the nodes' Ray logs."""
    found = []
    for node in nodes.nodes:
        for path in (node.ray_tmpdir / "ray" / "session_latest" / "logs").glob("worker-*"):
            with contextlib.suppress(OSError):
                found += [line for line in path.read_text(errors="replace").splitlines()
                          if "agent.placed_elsewhere" in line]  # fmt: skip
    return found


def _services(node: Node) -> dict[str, str]:
    """What deployments/head_services.sh wrote on the head (``~/.troupe/services.env``)."""
    path = node.home / ".troupe" / "services.env"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.stat().st_uid == node.uid
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _state_rows(services: dict[str, str], job_id: str) -> dict[str, int]:
    """Rows of the job in the head's PostgreSQL, as the actors' state store wrote them."""
    import psycopg  # noqa: PLC0415

    url = services["TROUPE_STATE_URL"]
    with psycopg.connect(url, password=services["PGPASSWORD"], connect_timeout=10) as conn:
        count = lambda sql: conn.execute(sql, (job_id,)).fetchone()[0]  # noqa: E731
        return {
            "finished job": count("SELECT count(*) FROM jobs WHERE id = %s AND result IS NOT NULL"),
            "subtasks": count("SELECT count(*) FROM subtasks WHERE job_id = %s"),
            "usage rows": count("SELECT count(*) FROM usage_rows WHERE job_id = %s"),
            "grants": conn.execute("SELECT count(*) FROM grants").fetchone()[0],
        }


def _assert_state_off_the_nodes(nodes: Nodes, actors: list[Any], job_id: str) -> None:
    """The job's state is in the head's PostgreSQL, memories in its Chroma server, and so no
    system actor is pinned to the head (each could move with its node gone)."""
    services = _services(nodes.head)
    assert services["TROUPE_STATE_URL"] == f"postgresql://troupe@{nodes.head.address}:5432/troupe"
    assert services["TROUPE_MEMORY_SERVER"] == f"{nodes.head.address}:8001"
    rows = _state_rows(services, job_id)
    assert rows["finished job"] == 1, rows
    assert rows["subtasks"] >= 3, rows
    assert rows["usage rows"] >= 1, rows
    assert rows["grants"] >= 3, rows
    chroma = services["TROUPE_MEMORY_SERVER"]
    heartbeat = httpx.get(f"http://{chroma}/api/v2/heartbeat", timeout=10)
    assert heartbeat.status_code == 200, heartbeat.text
    system = [a for a in actors if a.name in {"orchestrator/0", "llm/0", "memory", "tools/0"}]
    assert len(system) == 4, [a.name for a in system]
    pinned = [a.name for a in system if "node:__internal_head__" in (a.required_resources or {})]
    assert not pinned, pinned
    for worker in nodes.workers:  # the head passed the state's address and password on
        assert _services(worker) == services


SOLVERS = {
    "name": "cluster-wire",
    "planner_model": "default",
    "agents": [
        {"name": f"cluster-solver-{i}", "role": "solver", "model": "wire"} for i in range(3)
    ],
}
CODER = {  # the python tool: untrusted code in the sandbox of a node where Ray is not root
    "name": "cluster-code",
    "planner_model": "default",
    "agents": [{"name": "cluster-coder", "role": "coder", "model": "wire", "tools": ["python"]}],
}
ROOT_LISTING = sorted(  # /bin, /lib, ... are links into /usr where the system merged them
    ["dev", "etc", "proc", "tmp", "usr", "var"]
    + [p for p in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") if os.path.lexists(f"/{p}")]
)
SANDBOXED = "import os\nprint(6 * 7, os.getuid(), sorted(os.listdir('/')))\nprint({})"


def _job(url: str, team: dict[str, object], task: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30.0) as client:
        accepted = client.post("/v1/jobs", json={"task": task, "team": team})
        assert accepted.status_code == 202, accepted.text
        job_url = accepted.json()["url"]
        deadline = time.monotonic() + JOB_S
        while True:
            job: dict[str, object] = client.get(job_url).json()
            if job["status"] in {"succeeded", "failed", "cancelled"}:
                return job
            assert time.monotonic() < deadline, f"the job did not finish in {JOB_S} s: {job}"
            time.sleep(0.5)


def _assert_sandboxed_without_root(url: str, wire: WireServer, nodes: Nodes) -> None:
    """Untrusted code where Ray is an ordinary user: the launcher builds a user namespace, the
    program keeps the node account's uid and sees only the system's files, not the homes."""
    # the accounts' secrets and Ray's files: where the host keeps them, where Ray sees them
    homes = [*(str(node.home) for node in nodes.nodes), str(nodes.login_home)]
    code = SANDBOXED.format(f"[os.path.exists(h) for h in {homes!r}], os.path.exists('/home')")
    wire.reset()
    wire.script(Reply.tool("python", {"code": code}), Default())
    coded = _job(url, CODER, "Check the sandbox.")
    assert coded["status"] == "succeeded", coded
    ran = json.loads(wire.requests[1].body["messages"][-1]["content"])
    assert ran["exit_code"] == 0, ran
    answer, seen = ran["stdout"].splitlines()
    product, uid, listing = answer.split(" ", 2)
    assert product == "42"
    assert int(uid) in {node.uid for node in nodes.nodes}, (uid, ran)  # not root, not 65534
    assert sorted(ast.literal_eval(listing)) == ROOT_LISTING, listing
    assert seen == f"{[False] * len(homes)} False", ran


@pytest.mark.timeout(1500)  # installs two nodes from PyPI; ~6 min here
def test_ray_up_as_documented_runs_jobs_on_two_nodes_and_ray_down_leaves_nothing(
    nodes: Nodes, wire: WireServer, gcs_redis: Redis, tmp_path: Path
) -> None:
    from ray.util.state import list_actors, list_nodes  # noqa: PLC0415 - client side only

    config = _config(nodes, tmp_path)
    env = _launcher_env(tmp_path)
    log = tmp_path / "launcher.log"
    url = f"http://{nodes.head.address}:8000"
    dashboard = f"http://{nodes.head.address}:8265"

    up_s = _ray(["up", "-y", str(config)], env, log)
    ready_s = _wait_ready(url)
    workers_s = _wait_nodes(dashboard, len(nodes.nodes))  # the head's autoscaler adds them
    _assert_set_up(nodes)

    # the documented way to ship secrets, then the restart that makes Ray read them
    assert gcs_redis.keys() == 0
    env_file, llm_file = _secrets(tmp_path, wire, gcs_redis)
    _ray(["rsync-up", "-A", str(config), f"./{env_file.name}", "~/.troupe/env"], env, log,
         cwd=tmp_path)  # fmt: skip
    _ray(["rsync-up", "-A", str(config), f"./{llm_file.name}", "~/.troupe/llm.yaml"], env, log,
         cwd=tmp_path)  # fmt: skip
    _assert_shipped(nodes.head, env_file)
    restart_s = _restart(config, env, log, nodes, env_file)
    assert gcs_redis.keys() > 0  # the restarted head's GCS keeps its tables in Redis

    # a job over HTTP with the shipped key, on the shipped LLM config and provider key
    wire.script(*(Reply(text=f"answer {i}") for i in range(3)))
    job = _job(
        url, SOLVERS, "Tasks:\n- Summarize Ray actors\n- Summarize Ray tasks\n- Summarize Ray Serve"
    )  # 3 subtasks
    assert job["status"] == "succeeded", job
    # the server answers 401 to any other key: these calls carried the shipped one
    assert len([r for r in wire.requests if r.path.endswith("/chat/completions")]) >= 3
    refused = httpx.get(f"{url}/v1/jobs", headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert refused.status_code == 401

    # where things run: the head advertises head_ip; the job's agents use both nodes
    ray_nodes = [n for n in list_nodes(address=dashboard) if n.state == "ALIVE"]
    assert len(ray_nodes) == len(nodes.nodes), ray_nodes
    [head] = [n for n in ray_nodes if n.is_head_node]
    assert head.node_ip == nodes.head.address
    actors = [a for a in list_actors(address=dashboard, detail=True, limit=1000)
              if a.state == "ALIVE" and a.ray_namespace == "troupe"]  # fmt: skip
    names = {a.name for a in actors}
    assert {"router/0", "orchestrator/0", "llm/0", "memory", "tools/0"} <= names, names
    # the inline team's agents, under the key's tenant's scope (agent/<scope>.cluster-solver-0)
    agents = [a for a in actors if a.name.startswith("agent/") and ".cluster-solver-" in a.name]
    assert len(agents) == 3, names
    on_workers = [a.name for a in agents if a.node_id != head.node_id]
    assert on_workers, (
        f"every agent is on the head {head.node_id}: "
        f"{[(a.name, a.node_id, a.num_restarts) for a in actors]}; nodes: "
        f"{[(n.node_id, n.node_ip, n.state) for n in list_nodes(address=dashboard, detail=True)]}"
        f"; placements redone: {_placed_elsewhere(nodes)}"
    )

    _assert_state_off_the_nodes(nodes, actors, str(job["id"]))

    _assert_sandboxed_without_root(url, wire, nodes)

    # the example driver through the job server, as docs/cluster.md says
    submit_s = _ray(["job", "submit", "--address", dashboard, "--working-dir", ".", "--",
                     "python", "examples/research_team.py"], env, log)  # fmt: skip
    assert "status: succeeded" in log.read_text()[-4000:]

    redone = len(_placed_elsewhere(nodes))  # read before `ray down` ends the session's logs
    down_started = time.monotonic()
    _ray(["down", "-y", str(config)], env, log)
    deadline = time.monotonic() + DOWN_S
    while left := {pid: cmd for node in nodes.nodes for pid, cmd in node.processes().items()}:
        assert time.monotonic() < deadline, f"left running after ray down: {left}"
        time.sleep(0.5)
    down_s = time.monotonic() - down_started

    pools = {a.name: a.node_id == head.node_id for a in actors if a.name.startswith("llm/")}
    note = (
        "2 nodes on one host over sshd (127.0.0.2, 127.0.0.3), fresh accounts, uv from PyPI; "
        f"{len(on_workers)} of the job's 3 agents ran on the worker; pool replicas on the "
        f"head: {sorted(n for n, on_head in pools.items() if on_head)}, on the worker: "
        f"{sorted(n for n, on_head in pools.items() if not on_head)}; agents made again on "
        f"their node: {redone}"
    )
    for name, value in (("ray up (install + start + deploy)", up_s),
                        ("ray up -> /readyz 200", ready_s),
                        ("ray up -> the worker node joined", workers_s),
                        ("ray up again (restart)", restart_s),
                        ("ray job submit of the example", submit_s),
                        ("ray down -> nothing left running", down_s)):  # fmt: skip
        record(SUITE, name, round(value, 1), "s", note)
        print(f"{name}: {value:.1f} s")  # noqa: T201 - the figures, in the test's output
