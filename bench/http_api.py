"""HTTP: job submissions through the Serve application, against a bare Serve echo in the same run.

1. Throughput: concurrent clients (httpx, keep-alive) POST ``/v1/jobs`` for a registered team
   (offline model, no latency) and count the 202s per second, at several concurrencies; the
   baseline is a trivial FastAPI POST answering 202 with a small JSON, deployed on the same
   Serve behind the same proxy and sent the same body. Goal: peak >= 0.8x the echo's peak.
   The submitted jobs run meanwhile (that is the product's load); each phase waits until
   they have all finished before the next one starts.
2. Latency: from the POST of a job to the first ``event:`` line of its event stream
   (``GET /v1/jobs/{id}/events``), one job at a time, median and p95, against the echo's
   round trip taken between the jobs once each has finished. Goal <= 3x (median).

A third series, ``GET /v1/teams/{name}`` (the guard, FastAPI and one orchestrator call, no job
started), separates the cost of the API path from the cost of running the jobs; the notes give
the CPU each process spent per accepted request (jobs: until they had all finished).

The memory store uses the hashing embedding (agents recall before each model call: MiniLM
would add its inference to every job). Access logs are off (the app's deployment, the
echo's, and Serve's own logging config).

Usage: python bench/http_api.py [--quick] [--json PATH]
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import Curve, Figure, Section, main, median

TEAM = "bench-http"
KEY = "rt-bench-http-user"
ADMIN_KEY = "rt-bench-http-admin"
TASK = "Summarize: Ray actors are stateful workers, each in its own process."
BODY = {"task": TASK, "team": TEAM}
ECHO = "Serve echo POST"
JOBS = "POST /v1/jobs"
TEAM_GET = "GET /v1/teams/{name}"
REQUESTS: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    ECHO: ("POST", "/echo/", BODY),
    JOBS: ("POST", "/v1/jobs", BODY),
    TEAM_GET: ("GET", f"/v1/teams/{TEAM}", None),
}
"""The series of the throughput curve: the baseline, the measure, and the API without a job."""


CPU_SHOWN_MS = 0.05
"""Processes using less CPU per request are left out of the notes."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _deploy_echo() -> None:
    """The bare baseline: a FastAPI POST answering 202 with a small JSON, on the same Serve."""
    from fastapi import FastAPI  # noqa: PLC0415 - Serve's own dependency, imported with it
    from fastapi.responses import JSONResponse  # noqa: PLC0415
    from ray import serve  # noqa: PLC0415

    echo_app = FastAPI()

    @echo_app.post("/", status_code=202)
    async def echo(body: dict[str, Any]) -> JSONResponse:
        return JSONResponse({"id": "echo", "status": "pending", "keys": len(body)}, 202)

    @serve.deployment(
        name="Echo",
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=1000,
        logging_config={"enable_access_log": False},
    )
    @serve.ingress(echo_app)
    class Echo:
        pass

    serve.run(Echo.bind(), name="echo", route_prefix="/echo", blocking=False)  # type: ignore[attr-defined]


def _wait_ready(url: str, method: str, path: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            r = httpx.request(method, f"{url}{path}", json={}, timeout=5)
            if r.status_code in (200, 202):
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}{path} never became ready")
        time.sleep(0.2)


async def _load(
    url: str, request: tuple[str, str, dict[str, Any] | None], concurrency: int, duration_s: float
) -> tuple[int, float, int]:
    """``concurrency`` clients sending ``request`` for ``duration_s``: 2xx, seconds, others."""
    method, path, body = request
    others = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=60.0
    ) as client:
        for _ in range(2):  # open the connections before the clock starts
            await asyncio.gather(
                *(client.request(method, path, json=body) for _ in range(concurrency))
            )
        start = time.perf_counter()
        stop = start + duration_s
        accepted = 0

        async def one_client() -> None:
            nonlocal accepted, others
            while time.perf_counter() < stop:
                r = await client.request(method, path, json=body)
                if r.is_success:
                    accepted += 1
                else:
                    others += 1

        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return accepted, elapsed, others


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this process and the Ray processes it started, by title."""
    psutil = importlib.import_module("psutil")  # Ray's vendored copy: importable after ray
    me = psutil.Process()
    used: dict[str, float] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            title = "client (this process)" if proc.pid == me.pid else proc.cmdline()[0]
            if not title.startswith(("ray::", "client")):
                title = proc.name()
            times = proc.cpu_times()
        except (psutil.Error, IndexError):
            continue
        # ray::ProxyActor.receive_asgi_messages -> ray::ProxyActor: the method changes
        title = title.split(".")[0]
        used[title] = used.get(title, 0.0) + times.user + times.system
    return used


def _cpu_note(name: str, before: dict[str, float], after: dict[str, float], count: int) -> str:
    per = {t: (after[t] - before.get(t, 0.0)) / max(count, 1) * 1e3 for t in after}
    top = [kv for kv in sorted(per.items(), key=lambda kv: -kv[1])[:8] if kv[1] >= CPU_SHOWN_MS]
    return f"CPU ms per 2xx, {name}: total {sum(per.values()):.1f} = " + ", ".join(
        f"{t.removeprefix('ray::')} {ms:.1f}" for t, ms in top
    )


def _drain(url: str, timeout_s: float = 300.0) -> float:
    """Wait until every job of the benchmark's tenant has finished; how long that took."""
    start = time.monotonic()
    terminal = {"succeeded", "failed", "cancelled"}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as client:
        while time.monotonic() - start < timeout_s:
            jobs = client.get("/v1/jobs", timeout=60).json()
            if all(status in terminal for status in jobs.values()):
                return time.monotonic() - start
            time.sleep(0.5)
    raise RuntimeError(f"jobs still running after {timeout_s:.0f} s")


def _cpu_per_job(rt: Any, url: str, jobs: int, wave: int) -> tuple[float, float, str, str]:
    """CPU ms per job (every process) for the same job submitted over HTTP and by the driver.

    Jobs go in waves of ``wave``: over HTTP, ``wave`` concurrent POSTs; by the driver,
    ``wave`` submits; either way the driver then waits for the wave's results, so both sides
    share the waiting and differ only in how the jobs came in.
    """

    async def posts(client: httpx.AsyncClient, n: int) -> list[str]:
        answers = await asyncio.gather(*(client.post("/v1/jobs", json=BODY) for _ in range(n)))
        return [r.raise_for_status().json()["id"] for r in answers]

    async def over_http() -> list[str]:
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60.0) as client:
            ids: list[str] = []
            for done in range(0, jobs, wave):
                wave_ids = await posts(client, min(wave, jobs - done))
                await asyncio.to_thread(lambda w=wave_ids: [rt.job(j).result(60) for j in w])
                ids.extend(wave_ids)
            return ids

    before = _cpu_seconds()
    asyncio.run(over_http())
    middle = _cpu_seconds()
    for done in range(0, jobs, wave):
        handles = [rt.submit(TASK, TEAM, tenant="bench") for _ in range(min(wave, jobs - done))]
        for handle in handles:
            handle.result(60)
    after = _cpu_seconds()

    def total(a: dict[str, float], b: dict[str, float]) -> float:
        return sum(b[t] - a.get(t, 0.0) for t in b) / jobs * 1e3

    return (
        total(before, middle),
        total(middle, after),
        _cpu_note("job over HTTP", before, middle, jobs),
        _cpu_note("job by the driver", middle, after, jobs),
    )


async def _first_event(
    url: str, body: dict[str, Any], samples: int
) -> tuple[list[float], list[float]]:
    """Seconds from a job's POST to the first ``event:`` line of its stream, and echo round trips.

    One job at a time, each sample taken on a quiet system: the job's stream is read to its
    last event (the job has finished) before the echo round trip, and the echo's answer
    before the next job. Both series therefore see the same machine; a job still running
    behind the next POST would measure the 2 cores' contention, not the path.
    """
    headers = {"Authorization": f"Bearer {KEY}"}
    firsts, echoes = [], []
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60.0) as client:
        for _ in range(samples + 2):  # the first two warm the path
            start = time.perf_counter()
            r = await client.post("/v1/jobs", json=body)
            r.raise_for_status()
            first = None
            async with client.stream("GET", r.json()["events_url"]) as stream:
                async for line in stream.aiter_lines():  # the stream ends after the last event
                    if first is None and line.startswith("event:"):
                        first = time.perf_counter() - start
            if first is None:
                raise RuntimeError("a job's event stream ended without an event")
            start = time.perf_counter()
            (await client.post("/echo/", json=body)).raise_for_status()
            echoes.append(time.perf_counter() - start)
            firsts.append(first)
    return firsts[2:], echoes[2:]


def _start(root: Path) -> tuple[Any, str]:
    """A local Ray with raytroupe, the application and the echo; the base URL."""
    from ray import serve  # noqa: PLC0415

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
    port = _free_port()
    serve.start(
        http_options={"host": "127.0.0.1", "port": port},
        logging_config={"enable_access_log": False},
    )
    config = deployments.APIConfig(
        api_keys=(
            deployments.APIKey(
                name="bench",
                hash=deployments.hash_key(KEY),
                tenant="bench",
                rate_limit="10000000/minute",
            ),
            deployments.APIKey(
                name="bench-admin", hash=deployments.hash_key(ADMIN_KEY), tenant="bench", admin=True
            ),
        ),
        api_keys_env=None,
        rate_limit="10000000/minute",
    )
    url = deployments.deploy(port=port, config=config)
    _deploy_echo()
    _wait_ready(url, "GET", "/readyz")
    _wait_ready(url, "POST", "/echo/")
    team = runtime.Team(
        name=TEAM,
        models={"fast": runtime.OfflineModel(latency_s=0.0)},
        planner_model="fast",
        agents=[runtime.AgentSpec(name="bench-http-worker", role="worker", model="fast")],
    )
    r = httpx.put(
        f"{url}/v1/teams/{TEAM}",
        json=team.spec().model_dump(mode="json"),
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=60,
    )
    r.raise_for_status()
    return rt, url


def run(quick: bool) -> Section:
    """Measure both figures."""
    from ray import serve  # noqa: PLC0415

    section = Section("HTTP: job submissions through Serve against a bare Serve echo")
    load_before = os.getloadavg()[0]
    concurrencies = [1, 8, 32] if quick else [1, 4, 16, 64]
    duration_s = 3.0 if quick else 6.0
    repeats = 1 if quick else 2
    samples = 15 if quick else 40
    body = BODY
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        rt, url = _start(Path(tmp))
        try:
            rates: dict[str, dict[int, list[float]]] = {
                name: {c: [] for c in concurrencies} for name in REQUESTS
            }
            drains: list[float] = []
            cpu: dict[str, str] = {}
            refused = 0
            for _ in range(repeats):
                for c in concurrencies:
                    for name, request in REQUESTS.items():
                        before = _cpu_seconds()
                        count, elapsed, others = asyncio.run(_load(url, request, c, duration_s))
                        rates[name][c].append(count / elapsed)
                        refused += others
                        if name == JOBS:  # the jobs it accepted finish: their CPU counts too
                            drains.append(_drain(url))
                        if c == concurrencies[-1]:
                            cpu[name] = _cpu_note(name, before, _cpu_seconds(), count)
            first, echo = asyncio.run(_first_event(url, body, samples))
            http_cpu, driver_cpu, http_note, driver_note = _cpu_per_job(
                rt, url, 24 if quick else 64, 8
            )
        finally:
            serve.shutdown()
            rt.shutdown()

    curves = {
        name: [(float(c), median(rates[name][c])) for c in concurrencies] for name in REQUESTS
    }
    jobs_peak = max(curves[JOBS], key=lambda p: p[1])
    echo_peak = max(curves[ECHO], key=lambda p: p[1])
    team_peak = max(curves[TEAM_GET], key=lambda p: p[1])
    section.figures.append(
        Figure(
            name="POST /v1/jobs, 202s per second (peak)",
            value=jobs_peak[1],
            baseline=echo_peak[1],
            unit="req/s",
            baseline_name="Serve echo POST",
            goal=0.8,
            direction="at_least",
            note=f"peaks at {jobs_peak[0]:g} and {echo_peak[0]:g} clients",
        )
    )
    section.figures.append(
        Figure(
            name="GET /v1/teams/{name} (API path, no job), peak",
            value=team_peak[1],
            baseline=echo_peak[1],
            unit="req/s",
            baseline_name="Serve echo POST",
            note="the guard, FastAPI and one orchestrator call, without a job to run",
        )
    )
    section.figures.append(
        Figure(
            name="CPU per job, submitted over HTTP (all processes)",
            value=http_cpu,
            baseline=driver_cpu,
            unit="ms",
            baseline_name="the same job by the driver",
            goal=1.25,
            direction="at_most",
            note="waves of 8; the driver waits for the results either way",
        )
    )
    section.figures.append(
        Figure(
            name="submit to first SSE event, median",
            value=median(first) * 1e3,
            baseline=median(echo) * 1e3,
            unit="ms",
            baseline_name="echo round trip",
            goal=3.0,
            direction="at_most",
        )
    )
    section.figures.append(
        Figure(
            name="submit to first SSE event, p95",
            value=_percentile(first, 0.95) * 1e3,
            baseline=_percentile(echo, 0.95) * 1e3,
            unit="ms",
            baseline_name="echo round trip p95",
            direction="at_most",
        )
    )
    section.curves.append(
        Curve(
            title="HTTP throughput against client concurrency",
            x_label="concurrent clients",
            y_label="2xx responses per second",
            series=curves,
            log_x=True,
        )
    )
    section.notes.append(
        "req/s by clients: "
        + "; ".join(
            f"{c}: " + " / ".join(f"{n} {median(rates[n][c]):.0f}" for n in REQUESTS)
            for c in concurrencies
        )
        + f"; {duration_s:g} s per point, median of {repeats}"
    )
    section.notes.append(
        f"non-2xx answers during the load: {refused}; jobs drained after each phase in "
        + ", ".join(f"{d:.1f}" for d in drains)
        + " s"
    )
    section.notes.extend(cpu[name] for name in REQUESTS)
    section.notes.extend([http_note, driver_note])
    section.notes.append(
        f"first event: {len(first)} jobs one at a time, each read to its last event before an "
        "echo round trip (both on a quiet machine)"
    )
    section.notes.append(
        f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    return section


if __name__ == "__main__":
    main(run)
