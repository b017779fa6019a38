"""Child process of tests/integration/test_otel_collector.py: a traced Ray of its own.

An OTLP receiver on 127.0.0.1 stands for the collector. A local Ray (two CPUs) is started
first, without any OpenTelemetry variable; then the variables are set in this process only,
so the actors (raytroupe.runtime.connect) and the HTTP replica (deployments.deploy) have them
only as raytroupe hands them on. Two jobs run:

- over HTTP, with a ``traceparent`` header: its agent's scripted model asks for the
  calculator, whose calls need a human's approval; the approval is given only once the
  model call's span has reached the receiver, so that span demonstrably arrived while the
  job was still running;
- from the driver, inside a span of the driver's own OpenTelemetry set-up.

Prints one JSON line: every span received, the job ids, the ids sent, what happened when.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import ray
from opentelemetry.sdk.trace import TracerProvider

from raytroupe import deployments, runtime
from raytroupe.actors.spawn import NAMESPACE
from raytroupe.deployments import APIConfig, APIKey, hash_key
from raytroupe.protocols import ScriptedModel, ScriptedTurn, ToolCall
from raytroupe.runtime.joining import stay_on_loopback
from tests.support.http_api import free_port
from tests.support.inline import agent_name
from tests.support.otlp_receiver import OtlpReceiver

ADMIN_KEY = "rt-otel-admin-key"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TOOL_CALL_ID = "call-calc-1"
EXPECTED = (
    "job traced",
    "plan",
    "aggregate",
    "invoke_agent counter",
    "execute_tool calculator",
    "chat traced-worker",
    f"job {agent_name('driven')}",  # the driver's inline team: its actors' names, scoped
    f"invoke_agent {agent_name('writer')}",
)
"""Spans the test looks at: the child waits for each before it reports."""
WAIT_S = 120.0
"""Bounds each wait, so that a broken build fails instead of hanging (nothing is timed)."""


def _worker() -> ScriptedModel:
    return ScriptedModel(
        turns=(
            ScriptedTurn(
                tool_calls=(
                    ToolCall(
                        call_id=TOOL_CALL_ID, tool="calculator", arguments={"expression": "6 * 7"}
                    ),
                ),
                prompt_tokens=31,
                completion_tokens=7,
            ),
            ScriptedTurn(text="It is 42.", prompt_tokens=45, completion_tokens=4),
        )
    )


def _teams() -> tuple[runtime.Team, runtime.Team]:
    held = runtime.Team(
        name="traced",
        agents=[runtime.AgentSpec(name="counter", role="worker", model="traced-worker",
                                  tools=["calculator"])],
    )  # fmt: skip
    plain = runtime.Team(name="driven", agents=[runtime.AgentSpec(name="writer", role="worker")])
    return held, plain


def _ready(url: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the HTTP application at {url} never became ready")


def _held_approval(client: httpx.Client, job_id: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = client.get(f"/v1/jobs/{job_id}/approvals").json()
        if pending:
            return str(pending[0]["approval_id"])
        time.sleep(0.1)
    raise RuntimeError("the calculator call was never held for approval")


def _finished(client: httpx.Client, job_id: str) -> dict[str, object]:
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
        for _ in stream.iter_lines():  # ends after the job's last event
            pass
    view: dict[str, object] = client.get(f"/v1/jobs/{job_id}").json()
    return view


def _http_job(url: str, receiver: OtlpReceiver) -> dict[str, object]:
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60.0) as client:
        accepted = client.post(
            "/v1/jobs",
            json={"task": "What is six times seven?", "team": "traced"},
            headers={"traceparent": traceparent},
        )
        accepted.raise_for_status()
        job_id = accepted.json()["id"]
        approval = _held_approval(client, job_id)
        first_chat = receiver.wait_for(lambda s: s.name == "chat traced-worker", WAIT_S)
        approved_at = time.time()
        client.post(
            f"/v1/jobs/{job_id}/approvals/{approval}", json={"approved": True}
        ).raise_for_status()
        view = _finished(client, job_id)
        result_at = time.time()
    return {
        "job_id": job_id,
        "status": view["status"],
        "first_chat_received_at": None if first_chat is None else first_chat.received_at,
        "approved_at": approved_at,
        "result_at": result_at,
    }


def _driver_job(rt: runtime.Runtime, team: runtime.Team) -> dict[str, object]:
    provider = TracerProvider()  # the driver's own set-up: a span to continue, no export
    with provider.get_tracer("driver").start_as_current_span("driver work") as driving:
        job = rt.submit("Say hello.", team=team)
    result = job.result(timeout=WAIT_S)
    context = driving.get_span_context()
    return {
        "job_id": result.job_id,
        "status": result.status,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
    }


def main() -> None:
    stay_on_loopback()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")  # a loaded machine starts slowly
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    root = Path(tempfile.mkdtemp(prefix="otel-child-"))
    with OtlpReceiver() as receiver:
        ray.init(address="local", num_cpus=2, include_dashboard=False, namespace=NAMESPACE,
                 log_to_driver=False)  # fmt: skip
        try:
            os.environ |= {  # from here on: this process's, handed to what it starts
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_SERVICE_NAME": "raytroupe-test",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
            }
            held, plain = _teams()
            rt = runtime.connect(
                llm={"default": runtime.OfflineModel(), "traced-worker": _worker()},
                tools_config=runtime.ToolsConfig(
                    state_dir=root / "tools",
                    scratch_root=root / "scratch",
                    approval_required=("calculator",),
                ),
                memory_config=runtime.MemoryConfig(path=root / "memory"),
                journal=root / "journal.sqlite",
                log_level="warning",
            )
            rt.put_team(held.spec())
            key = APIKey(name="otel-admin", hash=hash_key(ADMIN_KEY), tenant="acme", admin=True)
            url = deployments.deploy(
                port=free_port(), config=APIConfig(api_keys=(key,), api_keys_env=None)
            )
            _ready(url)
            http = _http_job(url, receiver)
            driven = _driver_job(rt, plain)
            for name in EXPECTED:  # each process sends its own, each in its own time
                receiver.wait_for(lambda s, n=name: s.name == n, WAIT_S)
            print(  # noqa: T201 - the result, for the parent test
                json.dumps(
                    {
                        "http": http,
                        "driver": driven,
                        "caller": {"trace_id": CALLER_TRACE, "span_id": CALLER_SPAN},
                        "tool_call_id": TOOL_CALL_ID,
                        "secrets": [ADMIN_KEY],
                        "refused": receiver.refused,
                        "spans": [s.as_dict() for s in receiver.spans()],
                    }
                ),
                flush=True,
            )
        finally:
            ray.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
