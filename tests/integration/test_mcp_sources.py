"""MCP servers as tool sources, against real servers over stdio and streamable HTTP (no Ray)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import time
from datetime import datetime
from urllib.parse import urlsplit

import pytest

from raytroupe.actors.tools.mcp_source import MCPToolSource
from raytroupe.protocols import ErrorCode, MCPServerSpec, ToolError
from tests.support.mcp_servers import STDIO_COMMAND, running_http_server

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

TIME_SERVER_INSTALL = f"{sys.executable} -m pip install mcp-server-time"


def stdio_spec(**kwargs) -> MCPServerSpec:
    return MCPServerSpec(name="test", command=STDIO_COMMAND, **kwargs)


def http_spec(url: str) -> MCPServerSpec:
    return MCPServerSpec(name="web", transport="http", url=url, timeout_s=10)


def with_source(spec, body):
    """Run ``body(source)`` on a started source in a fresh event loop; always close it."""

    async def main():
        async with MCPToolSource(spec) as source:
            return await body(source)

    return asyncio.run(main())


async def wait_until(condition, timeout_s: float = 10.0) -> None:
    """Poll observable state, bounded by ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_stdio_tools_are_listed_with_their_schemas():
    defs = with_source(stdio_spec(timeout_s=12), lambda s: s.tools())
    by_name = {d.name: d for d in defs}
    assert set(by_name) == {"add", "echo", "fail", "slow", "info", "crash"}
    add = by_name["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert sorted(add.parameters["required"]) == ["a", "b"]
    assert add.output_schema == {"title": "Result", "type": "integer"}  # unwrapped
    assert by_name["info"].output_schema["type"] == "object"
    assert by_name["crash"].parameters["properties"] == {}
    assert {d.source for d in defs} == {"mcp:test"}
    assert {d.timeout_s for d in defs} == {12}
    assert all(d.side_effects for d in defs)


def test_stdio_calls_return_data_and_tool_errors():
    async def body(source):
        return (
            await source.call("add", {"a": 2, "b": 3}),
            await source.call("echo", {"text": "hi"}),
            await source.call("fail", {"message": "boom"}),
            await source.call("no_such_tool", {}),
            await source.call("add", {"a": "x", "b": 3}),
        )

    add, echo, fail, unknown, invalid = with_source(stdio_spec(), body)
    assert (add.ok, add.data, add.call_id, add.tool, add.error) == (True, 5, "", "add", None)
    assert add.metadata["server"] == "test"
    assert (echo.ok, echo.data) == (True, "hi")
    assert not fail.ok
    assert fail.error is not None
    assert fail.error.code == ErrorCode.TOOL
    assert "boom" in fail.error.message
    assert not unknown.ok
    assert "no_such_tool" in unknown.error.message
    assert not invalid.ok
    assert invalid.error.code == ErrorCode.TOOL


def test_structured_results_and_the_spec_environment_reach_the_server():
    spec = stdio_spec(env={"MCP_TEST_MARKER": "from-spec"})
    info = with_source(spec, lambda s: s.call("info", {}))
    assert info.ok
    assert info.data["marker"] == "from-spec"
    assert info.data["pid"] != os.getpid()


def test_a_crashed_stdio_server_is_restarted_by_the_next_call():
    async def body(source):
        crash = await source.call("crash", {})
        after_crash = source.restarts
        add = await source.call("add", {"a": 2, "b": 3})
        return crash, after_crash, add, source.restarts

    crash, after_crash, add, restarts = with_source(stdio_spec(), body)
    assert not crash.ok
    assert crash.error.retryable
    assert after_crash == 0  # side effects: the crashing call was not retried
    assert (add.ok, add.data) == (True, 5)
    assert restarts == 1


def test_without_side_effects_a_call_that_loses_its_server_is_retried_once():
    async def body(source):
        crash = await source.call("crash", {})
        after_crash = source.restarts
        echo = await source.call("echo", {"text": "back"})
        return crash, after_crash, echo, source.restarts

    crash, after_crash, echo, restarts = with_source(stdio_spec(side_effects=False), body)
    assert not crash.ok  # it crashed again on the fresh server
    assert after_crash == 1
    assert (echo.ok, echo.data) == (True, "back")
    assert restarts == 2


def test_a_server_that_died_between_calls_is_restarted_and_the_call_is_sent_once():
    async def body(source):
        first = await source.call("info", {})
        os.kill(first.data["pid"], signal.SIGKILL)
        await wait_until(lambda: not source.connected)
        second = await source.call("info", {})
        return first, second, source.restarts

    first, second, restarts = with_source(stdio_spec(), body)
    assert second.ok
    assert second.data["pid"] != first.data["pid"]
    assert restarts == 1


def test_a_slow_call_times_out_and_the_source_keeps_working():
    async def body(source):
        started = time.monotonic()
        slow = await source.call("slow", {"seconds": 30}, timeout_s=0.5)
        elapsed = time.monotonic() - started
        add = await source.call("add", {"a": 1, "b": 1})
        return slow, elapsed, add, source.restarts

    slow, elapsed, add, restarts = with_source(stdio_spec(), body)
    assert not slow.ok
    assert slow.error.code == ErrorCode.TOOL
    assert "timed out" in slow.error.message
    assert slow.error.retryable
    assert elapsed < 10
    assert (add.ok, add.data) == (True, 2)
    assert restarts == 0


def test_calls_run_concurrently_on_one_session():
    async def body(source):
        slow = asyncio.create_task(source.call("slow", {"seconds": 2}))
        add = await source.call("add", {"a": 20, "b": 22})
        overtaken = not slow.done()
        return add, overtaken, await slow

    add, overtaken, slow = with_source(stdio_spec(), body)
    assert (add.ok, add.data) == (True, 42)
    assert overtaken
    assert (slow.ok, slow.data) == (True, "slept 2.0")


def test_close_ends_calls_in_flight_and_stops_the_stdio_server():
    async def main():
        source = MCPToolSource(stdio_spec())
        await source.start()
        pid = (await source.call("info", {})).data["pid"]
        pending = asyncio.create_task(source.call("slow", {"seconds": 60}))
        assert (await source.call("add", {"a": 1, "b": 1})).ok  # queued after the slow call
        await source.close()
        result = await asyncio.wait_for(pending, 10)
        after = await source.call("add", {"a": 1, "b": 2})
        return pid, result, after, source.connected

    pid, result, after, connected = asyncio.run(main())
    assert not result.ok
    assert not after.ok
    assert "closed" in after.error.message
    assert not connected
    assert process_gone(pid)


def test_a_server_that_cannot_start_raises_tool_error():
    spec = MCPServerSpec(name="missing", command=("/nonexistent/mcp-server",))

    async def main():
        source = MCPToolSource(spec, connect_timeout_s=10)
        with pytest.raises(ToolError, match="cannot connect to MCP server 'missing'"):
            await source.start()
        result = await source.call("add", {"a": 1, "b": 2})
        await source.close()
        return result

    result = asyncio.run(main())
    assert not result.ok
    assert "cannot connect" in result.error.message


def test_streamable_http_lists_and_calls_like_stdio():
    async def body(source):
        return (
            await source.tools(),
            await source.call("add", {"a": 2, "b": 3}),
            await source.call("fail", {"message": "boom"}),
            await source.call("slow", {"seconds": 30}, timeout_s=0.5),
            await source.call("echo", {"text": "still here"}),
        )

    with running_http_server() as url:
        assert urlsplit(url).hostname == "127.0.0.1"
        defs, add, fail, slow, echo = with_source(http_spec(url), body)
    assert {d.name for d in defs} == {"add", "echo", "fail", "slow", "info"}
    assert {d.source for d in defs} == {"mcp:web"}
    assert (add.ok, add.data) == (True, 5)
    assert not fail.ok
    assert "boom" in fail.error.message
    assert not slow.ok
    assert "timed out" in slow.error.message
    assert (echo.ok, echo.data) == (True, "still here")


def test_streamable_http_reconnects_after_the_server_comes_back():
    async def main():
        with running_http_server() as url:
            source = MCPToolSource(http_spec(url), connect_timeout_s=10)
            await source.start()
            before = await source.call("add", {"a": 1, "b": 1})
        try:
            down = await source.call("add", {"a": 1, "b": 2})
            with running_http_server(port=urlsplit(url).port) as again:
                assert again == url
                back = await source.call("add", {"a": 1, "b": 3})
        finally:
            await source.close()
        return before, down, back, source.restarts

    before, down, back, restarts = asyncio.run(main())
    assert (before.ok, before.data) == (True, 2)
    assert not down.ok
    assert down.error.retryable
    assert (back.ok, back.data) == (True, 4)
    assert restarts >= 1


@pytest.fixture(scope="session")
def time_server_command():
    if importlib.util.find_spec("mcp_server_time") is None:
        pytest.fail(f"mcp-server-time is not installed in this environment: {TIME_SERVER_INSTALL}")
    return (sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")


def test_mcp_server_time_from_pypi(time_server_command):
    spec = MCPServerSpec(name="time", command=time_server_command, side_effects=False)

    async def body(source):
        return await source.tools(), await source.call("get_current_time", {"timezone": "UTC"})

    defs, now = with_source(spec, body)
    assert {"get_current_time", "convert_time"} <= {d.name for d in defs}
    assert not any(d.side_effects for d in defs)
    assert now.ok, now.error
    assert now.data["timezone"] == "UTC"
    parsed = datetime.fromisoformat(now.data["datetime"])
    assert parsed.utcoffset() is not None
    assert parsed.utcoffset().total_seconds() == 0
