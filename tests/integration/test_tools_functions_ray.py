"""Function tools on a real Ray: imported by the sandbox processes, called through the router.

The functions under test live in this module; the sandboxes import it by its path from the
repository root (Ray puts the driver's working directory on its workers' path). They meet the
test at a gate actor, so that nothing here waits on a clock.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import ray

from raytroupe.actors.lifecycle import with_lifecycle
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.actors.tools.config import FunctionTool, ToolsConfig
from raytroupe.actors.tools.sandbox import ToolSandbox
from raytroupe.protocols import (
    AgentMessage,
    ConfigError,
    ErrorCode,
    ToolCall,
    ToolResult,
    decode,
    encode,
)

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

MODULE = "tests.integration.test_tools_functions_ray"


@ray.remote(num_cpus=0)
class Gate:
    """Where tool functions report that they started, then wait until the test opens it."""

    def __init__(self) -> None:
        self._opened = asyncio.Event()
        self._arrived = 0
        self._changed = asyncio.Condition()

    async def arrive(self) -> None:
        async with self._changed:
            self._arrived += 1
            self._changed.notify_all()

    async def arrivals(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self._arrived >= count)

    async def open(self) -> None:
        self._opened.set()

    async def passage(self) -> None:
        await self._opened.wait()


def gated_pid(gate: str) -> int:
    """Arrive at the gate actor ``gate``, wait until it opens, return this process's id."""
    handle = ray.get_actor(gate, namespace=NAMESPACE)
    ray.get(handle.arrive.remote(), timeout=60)
    ray.get(handle.passage.remote(), timeout=60)
    return os.getpid()


def square(x: int) -> int:
    """The square of an integer."""
    return x * x


@pytest.fixture
def gate(rt, request):
    name = f"gate-{request.node.name}"[:60]
    handle = Gate.options(name=name, namespace=NAMESPACE).remote()
    yield name, handle
    ray.get(handle.open.remote())  # frees any function still waiting
    ray.kill(handle)


@pytest.fixture
def sandboxes(rt, tmp_path):
    """Two sandbox actors (two processes) with the function tools, torn down after the test."""
    config = ToolsConfig(
        state_dir=tmp_path / "state",
        scratch_root=tmp_path / "scratch",
        functions={
            "gated_pid": f"{MODULE}:gated_pid",
            "square": f"{MODULE}:square",
            "impatient": FunctionTool(target=f"{MODULE}:gated_pid", timeout_s=0.5),
            "missing": "tests.integration.no_such_module:f",
        },
    )
    # as the Ray glue spawns sandboxes: on_start (function tools, state files) runs first
    remote = ray.remote(with_lifecycle(ToolSandbox)).options(num_cpus=0, max_concurrency=1000)
    boxes = [remote.remote(config, name=f"fn-tools-{i}") for i in range(2)]
    ray.get([box.grant.remote("fn-tester", ["gated_pid", "square", "impatient"]) for box in boxes])
    yield boxes
    ray.get([box.close.remote() for box in boxes])
    for box in boxes:
        ray.kill(box)


def _call(tool, **arguments) -> ToolCall:
    return ToolCall(call_id=f"c-{tool}", tool=tool, arguments=arguments, task_id="t1", step=1)


def test_calls_through_the_router_run_at_once_in_both_sandbox_processes(rt, sandboxes, gate):
    name, handle = gate
    router = rt.actor("router/0")
    names = [f"fn-tools-{i}" for i in range(2)]
    pairs = zip(names, sandboxes, strict=True)
    ray.get([router.register.remote(n, box, ["fn-tools"]) for n, box in pairs])
    try:
        requests = [
            AgentMessage(sender="fn-tester", recipient="role:fn-tools",
                         payload=_call("gated_pid", gate=name))
            for _ in range(2)
        ]  # fmt: skip
        replies = [router.request.remote(encode(m)) for m in requests]
        ray.get(handle.arrivals.remote(2), timeout=60)  # both running, neither finished
        ray.get(handle.open.remote())
        results = [decode(r).payload for r in ray.get(replies, timeout=60)]
    finally:
        ray.get([router.unregister.remote(n) for n in names])

    assert all(isinstance(r, ToolResult) and r.ok for r in results), results
    pids = {r.data for r in results}
    assert len(pids) == 2  # two sandboxes, two processes: two cores' worth
    assert os.getpid() not in pids


def test_a_sandbox_serves_other_calls_while_a_function_runs(sandboxes, gate):
    name, handle = gate
    box = sandboxes[0]
    slow = box.call.remote(_call("gated_pid", gate=name), agent="fn-tester", job_id="j")
    ray.get(handle.arrivals.remote(1), timeout=60)

    quick = ray.get(box.call.remote(_call("square", x="12"), agent="fn-tester", job_id="j"))
    ready, _ = ray.wait([slow], timeout=0)
    ray.get(handle.open.remote())

    assert (quick.ok, quick.data) == (True, 144)  # served, its argument coerced
    assert ready == []  # while the other call was still running
    assert ray.get(slow, timeout=60).ok


def test_a_function_past_its_timeout_fails_the_call_not_the_sandbox(sandboxes, gate):
    name, handle = gate
    box = sandboxes[0]
    late = ray.get(box.call.remote(_call("impatient", gate=name), agent="fn-tester", job_id="j"))
    ray.get(handle.open.remote())  # the worker thread finishes, unobserved

    assert not late.ok
    assert late.error.code is ErrorCode.TOOL
    assert late.error.message == "impatient timed out after 0.5 s"
    after = ray.get(box.call.remote(_call("square", x=3), agent="fn-tester", job_id="j"))
    assert after.data == 9


def test_granting_a_function_that_did_not_load_says_why_across_processes(sandboxes):
    with pytest.raises(ConfigError, match=r"cannot import 'tests\.integration\.no_such_module'"):
        ray.get(sandboxes[0].grant.remote("fn-tester", ["missing"]))
