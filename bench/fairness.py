"""Fair shares: one tenant's worst requests against another tenant's latency, in the same run.

A local Ray with raytroupe and its Serve application on 127.0.0.1, two tenants' keys (the
attacker's with the default rate limit, 600 requests a minute). For each kind of worst
request of issue 41:

- ``state patterns``: an inline graph whose state schema has 8 backtracking ``pattern``s
  its ``initial`` values trip (checked at the door);
- ``20,000 agents``: an inline team of 20,000 agents (633 KiB, under the 8 MiB body limit);
- ``self $ref``: an inline team whose ``output_schema`` is ``{"$ref": "#"}``;
- ``graph edges``: a graph job whose node's answer meets 100 backtracking ``when`` edges
  (checked by the orchestrator while the job runs);
- ``eval regexes``: an eval run whose case has 32 backtracking regex expectations on the
  team's answer (scored by the orchestrator's eval desk);

1. Server time. The refusals: the request sent alone, ``ALONE`` times, its round trip. The
   runtime kinds (a job that runs, then fails on the patterns): the job's or run's time
   less the same request's with a benign pattern, alternated. Goal: at most 1 s.
2. Fairness: tenant B sends ``GET /v1/me`` one after another while tenant A sends that
   kind of request back to back from 2 clients in another process (A using its share).
   Goal: B's p99 at most 3x its idle p99, measured just before.
3. Flood: the same from 16 clients (past A's share: some are refused 429 ``busy``), against
   B's p99 under A's flood of its cheapest request, ``GET /v1/me``, from as many clients:
   on 2 cores any flood costs Serve's proxy and replica, and this separates what the worst
   requests add from what every request costs. Reported without a goal.

Usage: python bench/fairness.py [--quick] [--json PATH]
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import tempfile
import time
from collections import Counter
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
from _common import Figure, Section, main

ATTACKER = "rt-bench-fair-attacker"
BYSTANDER = "rt-bench-fair-bystander"
ADMIN = "rt-bench-fair-admin"
EVIL = r"^(a|aa)+$"
EVIL_TEXT = "a" * 64 + "!"
ANSWER_EVIL = r"^(.|..)+a$"
"""Backtracks exponentially on any longer text with an 'a' that does not end with one."""
TEAM = "bench-fair"
"""A registered one-agent team (offline model) the eval runs use."""


def _state_patterns(n: int) -> dict[str, Any]:
    props = {f"k{i}": {"type": "string", "pattern": EVIL} for i in range(8)}
    graph = {
        "nodes": [{"id": "n", "role": "r", "instructions": "x"}],
        "start": "n",
        "state": {
            "json_schema": {"type": "object", "properties": props},
            "initial": {f"k{i}": EVIL_TEXT for i in range(8)},
        },
    }
    team = {"name": f"evil{n}", "agents": [{"name": "a", "role": "r"}], "graph": graph}
    return {"task": "t", "team": team}


def _agents(n: int) -> dict[str, Any]:
    agents = [{"name": f"a{i}", "role": "r"} for i in range(20_000)]
    return {"task": "t", "team": {"name": f"crowd{n}", "agents": agents}}


def _self_ref(n: int) -> dict[str, Any]:
    team = {"name": f"loop{n}", "agents": [{"name": "a", "role": "r"}],
            "output_schema": {"$ref": "#"}}  # fmt: skip
    return {"task": "t", "team": team}


def _graph_edges(n: int, when: str = ANSWER_EVIL) -> dict[str, Any]:
    edges = [{"source": "n", "target": "end", "when": when} for _ in range(100)]
    graph = {
        "nodes": [{"id": "n", "role": "r", "instructions": "Explain Ray actors in a sentence."}],
        "start": "n",
        "edges": [*edges, {"source": "n", "target": "end"}],
    }
    team = {"name": "edgy", "agents": [{"name": "a", "role": "r"}], "graph": graph}
    return {"task": f"Explain Ray actors in a sentence ({n}).", "team": team}


def _eval_regexes(n: int, pattern: str = ANSWER_EVIL, cases: int = 1) -> dict[str, Any]:
    expect = [{"kind": "regex", "pattern": pattern}] * 32
    listed = [{"id": f"c{i}", "task": f"Explain Ray actors in a sentence ({n}).",
               "expect": expect} for i in range(cases)]  # fmt: skip
    return {"suite": {"name": f"evil{n}", "cases": listed}, "team": TEAM, "concurrency": 4}


BENIGN = "zzz-not-there"
"""A pattern that fails at once (its literal is not in the text): the same request's cost
without the tenant's backtracking, the baseline of the runtime kinds."""
KINDS: dict[str, tuple[str, Any]] = {
    "state patterns": ("/v1/jobs", _state_patterns),
    "20,000 agents": ("/v1/jobs", _agents),
    "self $ref": ("/v1/jobs", _self_ref),
    "graph edges": ("/v1/jobs", _graph_edges),
    "eval regexes": ("/v1/evals", _eval_regexes),
}
STEADY = 2
"""A's clients sending its worst requests one after another: a tenant using its share."""
FLOOD = 16
"""A's clients in a flood: more than its share, so that some are refused 429 busy."""
RUNTIME: dict[str, Any] = {
    "graph edges": lambda n: _graph_edges(n, BENIGN),
    "eval regexes": lambda n: _eval_regexes(n, BENIGN),
}
"""The kinds whose patterns run while a job runs, and the same request with a benign one."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(root: Path) -> tuple[Any, str]:
    from raytroupe import deployments, runtime  # noqa: PLC0415

    rt = runtime.connect(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_level="warning",
        journal=root / "journal.sqlite",
        tools_config=runtime.ToolsConfig(state_dir=root / "state", scratch_root=root / "scratch"),
        memory_config=runtime.MemoryConfig(path=root / "memory", embedding="hashing"),
    )
    key = deployments.APIKey
    config = deployments.APIConfig(
        api_keys=(
            key(name="attacker", hash=deployments.hash_key(ATTACKER), tenant="a"),
            key(name="bystander", hash=deployments.hash_key(BYSTANDER), tenant="b",
                rate_limit="10000000/minute"),
            key(name="admin", hash=deployments.hash_key(ADMIN), tenant="a", admin=True),
        ),
        api_keys_env=None,
    )  # fmt: skip
    url = deployments.deploy(port=_free_port(), config=config)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == HTTPStatus.OK:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    team = {"name": TEAM, "agents": [{"name": "fair-a", "role": "r"}]}
    admin = {"Authorization": f"Bearer {ADMIN}"}
    httpx.put(f"{url}/v1/teams/{TEAM}", json=team, headers=admin, timeout=60).raise_for_status()
    return rt, url


def _took(client: httpx.Client, path: str, response: httpx.Response) -> str:
    """Wait for an accepted job or run to end; its outcome (code or status)."""
    if response.status_code != HTTPStatus.ACCEPTED:
        return str(response.json().get("code", response.status_code))
    if path == "/v1/evals":
        run = client.get(response.json()["url"], params={"wait": 60}).json()
        errors = {c.get("error", "")[:60] for c in run.get("cases", []) if c["status"] == "error"}
        return f"run {run['status']}: {sorted(errors)}"
    job_id = response.json()["id"]
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
        for _ in stream.iter_lines():
            pass
    result = client.get(f"/v1/jobs/{job_id}").json().get("result") or {}
    error = result.get("error") or {}
    return f"job {result.get('status')}: {error.get('code', '')}"


def _alone(url: str, kind: str, times: int, body: Any = None) -> tuple[list[float], Counter[str]]:
    path, evil = KINDS[kind]
    body = body or evil
    took: list[float] = []
    outcomes: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {ATTACKER}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        for n in range(times):
            payload = json.dumps(body(n)).encode()
            started = time.perf_counter()
            response = client.post(path, content=payload,
                                   headers={"Content-Type": "application/json"})  # fmt: skip
            outcome = _took(client, path, response)
            took.append(time.perf_counter() - started)
            outcomes[outcome] += 1
    return took, outcomes


def _flood(url: str, kind: str, clients: int, seconds: float, done: Any) -> None:
    """Tenant A's flood (in a process of its own): ``clients`` loops for ``seconds``."""
    import asyncio  # noqa: PLC0415

    if kind.endswith(" (benign)"):
        path, body = (
            KINDS[kind.removesuffix(" (benign)")][0],
            RUNTIME[kind.removesuffix(" (benign)")],
        )
    else:
        path, body = KINDS.get(kind, ("/v1/me", None))
    payloads = [b"" if body is None else json.dumps(body(n)).encode() for n in range(clients)]
    counts: Counter[int] = Counter()
    as_json = {"Content-Type": "application/json"}

    async def one(n: int, client: httpx.AsyncClient, until: float) -> None:
        while time.monotonic() < until:
            if body is None:  # the cheapest request a key can send: the floor of a flood
                response = await client.get(path)
            else:
                response = await client.post(path, content=payloads[n], headers=as_json)
            counts[response.status_code] += 1
            if response.status_code == HTTPStatus.TOO_MANY_REQUESTS:
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))

    async def all_clients() -> None:
        headers = {"Authorization": f"Bearer {ATTACKER}"}
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120,
                                     limits=limits) as client:  # fmt: skip
            until = time.monotonic() + seconds
            await asyncio.gather(*(one(n, client, until) for n in range(clients)))

    asyncio.run(all_clients())
    done.put(dict(counts))


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _bystander(url: str, samples: int | None, until: float | None = None) -> list[float]:
    """Tenant B's ``GET /v1/me`` round trips, one after another (bounded either way)."""
    took: list[float] = []
    headers = {"Authorization": f"Bearer {BYSTANDER}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        client.get("/v1/me").raise_for_status()
        for _ in range(samples or 100_000):
            if until is not None and time.monotonic() >= until:
                break
            started = time.perf_counter()
            client.get("/v1/me").raise_for_status()
            took.append(time.perf_counter() - started)
    return took


def _beside(url: str, kind: str, clients: int, seconds: float) -> tuple[list[float], Any]:
    """B's round trips while A sends ``kind`` from ``clients`` clients (another process)."""
    context = multiprocessing.get_context("spawn")
    done = context.Queue()
    attacker = context.Process(target=_flood, args=(url, kind, clients, seconds, done))
    attacker.start()
    try:
        took = _bystander(url, None, until=time.monotonic() + seconds)
        counts = done.get(timeout=seconds + 180)
    finally:
        attacker.join(timeout=60)
    return took, counts


def run(quick: bool) -> Section:
    """Measure each kind: alone, then as a flood beside the other tenant."""
    from ray import serve  # noqa: PLC0415

    alone_n = 2 if quick else 5
    flood_s = 6.0 if quick else 15.0
    idle_n = 100 if quick else 300
    section = Section("Fair shares: tenant B's GET latency while tenant A floods its worst")
    with tempfile.TemporaryDirectory(prefix="bench-fair-") as tmp:
        rt, url = _start(Path(tmp))
        try:
            floor, floor_counts = _beside(url, "GET /v1/me", FLOOD, flood_s)
            floor_p99 = _p(floor, 0.99) * 1000
            section.notes.append(
                f"The flood floor: B's p99 {floor_p99:.1f} ms, p50 {_p(floor, 0.5) * 1000:.1f} "
                f"ms while A sends GET /v1/me from {FLOOD} clients (A's answers {floor_counts}):"
                " what any flood costs Serve's proxy and replica on these cores."
            )
            for kind in KINDS:
                if kind in RUNTIME:  # alternating, so that load falls on both
                    took, plain = [], []
                    outcomes: Counter[str] = Counter()
                    _alone(url, kind, 1, RUNTIME[kind])  # warm-up: the team's agents start
                    for _ in range(alone_n):
                        t, o = _alone(url, kind, 1)
                        took += t
                        outcomes += o
                        plain += _alone(url, kind, 1, RUNTIME[kind])[0]
                    extra = [a - b for a, b in zip(took, plain, strict=True)]
                    section.figures.append(Figure(
                        name=f"{kind}: the patterns' extra time, sent alone", value=max(extra),
                        baseline=1.0, unit="s", baseline_name="1 s", goal=1.0,
                        direction="at_most",
                        note=f"the run with them {_p(took, 0.5):.2f} s, with a benign pattern "
                             f"{_p(plain, 0.5):.2f} s (medians); "
                             + "; ".join(f"{k} x{v}" for k, v in outcomes.items()),
                    ))  # fmt: skip
                else:
                    took, outcomes = _alone(url, kind, alone_n)
                    section.figures.append(Figure(
                        name=f"{kind}: slowest refusal, sent alone", value=max(took),
                        baseline=1.0, unit="s", baseline_name="1 s", goal=1.0,
                        direction="at_most",
                        note=f"median {_p(took, 0.5):.3f} s; "
                             + "; ".join(f"{k} x{v}" for k, v in outcomes.items()),
                    ))  # fmt: skip
                idle = _bystander(url, idle_n)
                steady, steady_counts = _beside(url, kind, STEADY, flood_s)
                benign = ""
                if kind in RUNTIME:  # the same jobs with a benign pattern: the jobs' own load
                    plain, _ = _beside(url, f"{kind} (benign)", STEADY, flood_s)
                    benign = f"; with a benign pattern B's p99 is {_p(plain, 0.99) * 1000:.1f} ms"
                section.figures.append(Figure(
                    name=f"{kind}: B's p99 GET /v1/me while A sends it from {STEADY} clients",
                    value=_p(steady, 0.99) * 1000, baseline=_p(idle, 0.99) * 1000, unit="ms",
                    baseline_name="B's idle p99", goal=3.0, direction="at_most",
                    note=f"B p50 {_p(steady, 0.5) * 1000:.1f} ms (idle "
                         f"{_p(idle, 0.5) * 1000:.1f}); {len(steady)} GETs; A's answers "
                         f"{steady_counts}{benign}",
                ))  # fmt: skip
                flooded, counts = _beside(url, kind, FLOOD, flood_s)
                section.figures.append(Figure(
                    name=f"{kind}: B's p99 under A's flood of it ({FLOOD} clients)",
                    value=_p(flooded, 0.99) * 1000, baseline=floor_p99, unit="ms",
                    baseline_name=f"B's p99 under A's flood of GET /v1/me ({FLOOD} clients)",
                    note=f"B p50 {_p(flooded, 0.5) * 1000:.1f} ms; A's answers {counts}",
                ))  # fmt: skip
        finally:
            serve.shutdown()
            rt.shutdown()
    section.notes.append(
        f"{flood_s:g} s per series; A's key has the default rate limit (600/minute, a moving "
        "window), and its clients honour Retry-After; load average at the end "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    return section


if __name__ == "__main__":
    main(run)
