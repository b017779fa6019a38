"""Real providers through the official SDKs, against a local server speaking both protocols.

The server runs in this process on 127.0.0.1; the pool runs in its Ray actor and reaches it
like any remote provider. Keys come from an environment variable set before Ray started.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import ErrorCode
from tests.support.keys import TEST_KEY, TEST_KEY_ENV
from tests.support.wire_server import HttpError, Reply, WireServer, overloaded, rate_limited

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture
def server(wire):
    wire.reset()
    return wire


def _oai(server, **fields):
    return runtime.OpenAICompatibleModel(
        base_url=server.base_url_openai, model="wire-test-model", **fields
    )


def _claude(server, **fields):
    return runtime.AnthropicModel(
        base_url=server.base_url_anthropic,
        model="claude-wire",
        api_key_env=TEST_KEY_ENV,
        **fields,
    )


def _solo(name, models, agent_model, **agent):
    return runtime.Team(
        name=name,
        planner_model="offline",
        models=models,
        agents=[runtime.AgentSpec(name=f"{name}-agent", role="solver", model=agent_model, **agent)],
    )


def test_a_tool_calling_agent_completes_through_the_openai_compatible_provider(rt, server):
    server.script(
        Reply.tool("calculator", {"expression": "6 * 7"}),
        Reply(text="Six times seven is 42."),
    )
    team = _solo("wire-oai", {"wire-oai": _oai(server)}, "wire-oai", tools=["calculator"])
    result = rt.submit("What is six times seven?", team=team).result(timeout=60)

    (sub,) = result.subtasks
    assert sub.output == "Six times seven is 42."
    assert (sub.turns, sub.tool_calls) == (2, 1)
    assert sub.providers == ("openai_compatible",)
    first, second = (r.body for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "calculator"
    tool_turn = second["messages"][-1]
    assert tool_turn["role"] == "tool"
    assert tool_turn["content"] == "42"
    rows = rt.usage(result.job_id)
    assert any(r.deployment == "wire-oai" and r.calls == 2 for r in rows)


@pytest.mark.parametrize("stream", [False, True])
def test_a_thinking_claude_agent_sends_its_thoughts_back_and_pays_cache_prices(rt, server, stream):
    """Extended thinking through a whole job: the tool-use turn goes back with its signed
    thinking (the server refuses it otherwise), and the next call reads its prompt from the
    cache, booked and priced at the deployment's cache prices."""
    server.script(
        Reply.tool("calculator", {"expression": "17 * 23 + 4"}), Reply(text="It comes to 395.")
    )
    prices = {
        "input_usd_per_mtok": 3.0,
        "output_usd_per_mtok": 15.0,
        "cached_input_usd_per_mtok": 0.3,
        "cache_write_usd_per_mtok": 3.75,
    }
    name = f"wire-think-{int(stream)}"
    team = _solo(
        name,
        {name: _claude(server, **prices)},
        name,
        tools=["calculator"],
        reasoning=runtime.Reasoning(effort="low"),
        stream=stream,
    )
    result = rt.submit("What is 17 times 23, plus four?", team=team).result(timeout=60)

    (sub,) = result.subtasks
    assert sub.output == "It comes to 395."
    assert (sub.turns, sub.tool_calls) == (2, 1)
    first, second = (r.body for r in server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1]["content"][0]["type"] == "thinking"
    (row,) = [r for r in rt.usage(result.job_id) if r.deployment == name]
    assert row.calls == 2
    assert row.cached_tokens > 0
    assert row.cache_write_tokens > 0
    plain = row.prompt_tokens - row.cached_tokens - row.cache_write_tokens
    expected = (
        plain * 3.0 + row.cached_tokens * 0.3 + row.cache_write_tokens * 3.75
    ) / 1e6 + row.completion_tokens * 15.0 / 1e6
    assert row.cost_usd == pytest.approx(expected)
    assert result.usage.cached_tokens == row.cached_tokens


def test_an_agent_that_runs_calls_in_order_asks_for_one_per_turn(rt, server):
    server.script(Reply(text="Nothing to compute."))
    name = "wire-serial"
    team = _solo(
        name,
        {name: _oai(server)},
        name,
        tools=["calculator"],
        parallel_tool_calls=False,
        reasoning=runtime.Reasoning(effort="minimal"),
    )
    rt.submit("Say hello.", team=team).result(timeout=60)
    (body,) = (r.body for r in server.requests)
    assert body["parallel_tool_calls"] is False
    assert body["reasoning_effort"] == "minimal"


def test_a_server_without_native_tools_gets_them_in_text(rt, server):
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'
    server.script(Reply(text=f"Let me compute.\n{call}"), Reply(text="It is 42."))
    team = _solo(
        "wire-text",
        {"wire-text": _oai(server, native_tools=False)},
        "wire-text",
        tools=["calculator"],
    )
    result = rt.submit("What is six times seven?", team=team).result(timeout=60)

    (sub,) = result.subtasks
    assert (sub.output, sub.tool_calls) == ("It is 42.", 1)
    first, second = (r.body for r in server.requests)
    assert "tools" not in first
    assert "calculator" in first["messages"][0]["content"]
    assert "Tool result for" in second["messages"][-1]["content"]
    assert "42" in second["messages"][-1]["content"]


def test_a_call_written_as_json_in_the_content_is_run_whatever_the_mode(rt, server):
    """What Qwen2.5-Coder under llama.cpp does with native tools on: the call comes back as
    fenced JSON in ``content``, not as ``tool_calls``; it is run, not taken as the answer."""
    written = '```json\n{"name": "calculator", "arguments": {"expression": "6 * 7"}}\n```'
    server.script(Reply(text=written), Reply(text="It is 42."))
    team = _solo("wire-json", {"wire-json": _oai(server)}, "wire-json", tools=["calculator"])
    result = rt.submit("What is six times seven?", team=team).result(timeout=60)

    (sub,) = result.subtasks
    assert (sub.output, sub.tool_calls, sub.turns) == ("It is 42.", 1, 2)
    second = server.requests[-1].body["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert (second[-1]["role"], second[-1]["content"]) == ("tool", "42")


def test_a_malformed_text_mode_call_goes_back_to_the_model(rt, server):
    broken = '<tool_call>{"name": "calculator", "arguments": 6 * 7}</tool_call>'
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'
    server.script(Reply(text=broken), Reply(text=call), Reply(text="It is 42."))
    team = _solo("wire-text-bad", {"wire-text-bad": _oai(server, native_tools=False)},
                 "wire-text-bad", tools=["calculator"])  # fmt: skip
    result = rt.submit("What is six times seven?", team=team).result(timeout=60)

    (sub,) = result.subtasks
    assert (sub.output, sub.tool_calls, sub.turns) == ("It is 42.", 1, 3)
    told = server.requests[1].body["messages"][-1]
    assert told["role"] == "user"
    assert told["content"].startswith("Your tool call could not be read:")
    assert "malformed tool call" in told["content"]


def test_anthropic_streams_tokens_and_tool_calls_into_a_job(rt, server):
    server.script(
        Reply.tool("calculator", {"expression": "2 + 3"}),
        Reply(text="Two plus three makes five."),
    )
    team = _solo(
        "wire-claude",
        {"wire-claude": _claude(server)},
        "wire-claude",
        tools=["calculator"],
        stream=True,
    )
    job = rt.submit("Add two and three.", team=team)
    events = list(job.events(timeout=60))
    result = job.result(timeout=10)

    (sub,) = result.subtasks
    assert sub.output == "Two plus three makes five."
    assert sub.providers == ("anthropic",)
    deltas = [d for e in events if e.type == "llm_delta" for d in e.data["deltas"]]
    assert "".join(d["text"] for d in deltas) == "Two plus three makes five."
    fragments = [d["arguments"] for d in deltas if d["tool_call_index"] is not None]
    assert "".join(fragments).replace(" ", "") == '{"expression":"2+3"}'
    assert all(r.body.get("stream") is True for r in server.requests)


def test_a_429_is_retried_after_the_servers_retry_after(rt, server):
    server.script(rate_limited(retry_after=0.4), Reply(text="fine now"))
    team = _solo("wire-429", {"wire-429": _oai(server)}, "wire-429")
    result = rt.submit("Say something.", team=team).result(timeout=60)

    assert result.subtasks[0].output == "fine now"
    first, second = server.requests
    assert second.time - first.time >= 0.4


def test_an_overloaded_deployment_falls_back_along_the_route(rt, server):
    server.script(overloaded(), Reply(text="from the fallback"))
    models = {
        "flaky-claude": _claude(server),
        "steady-oai": _oai(server),
        "wire-route": runtime.RouteSpec(deployments=("flaky-claude",), fallbacks=("steady-oai",)),
    }
    team = _solo("wire-fallback", models, "wire-route")
    result = rt.submit("Say something.", team=team).result(timeout=60)

    assert result.subtasks[0].output == "from the fallback"
    assert [r.protocol for r in server.requests] == ["anthropic", "openai"]
    rows = rt.usage(result.job_id)
    assert {r.deployment for r in rows if r.agent == "wire-fallback-agent"} == {"steady-oai"}


def test_context_overflow_moves_to_a_larger_window(rt, server):
    server.script(HttpError(400, kind="context_length"), Reply(text="it fits here"))
    models = {
        "small-window": _oai(server, context_window=4_000),
        "large-window": _oai(server, context_window=128_000),
        "wire-ctx": runtime.RouteSpec(deployments=("small-window",), fallbacks=("large-window",)),
    }
    result = rt.submit("Say something.", team=_solo("wire-ctx", models, "wire-ctx")).result(
        timeout=60
    )
    assert result.subtasks[0].output == "it fits here"
    assert len(server.requests) == 2


def test_a_refused_key_is_a_typed_error_and_the_key_is_never_logged(rt, tmp_path):
    with WireServer(api_key="the-right-key") as locked:
        team = _solo("wire-auth", {"wire-auth": _claude(locked)}, "wire-auth")
        job = rt.submit("Say something.", team=team)
        with pytest.raises(runtime.JobFailed) as info:
            job.result(timeout=60)
        assert len(locked.requests) == 1  # AuthFailed is not retried on the same deployment

    sub = info.value.detail["result"].subtasks[0]
    assert sub.error.code is ErrorCode.AUTH
    assert TEST_KEY not in repr(info.value.detail["result"])
    logs = Path(_session_dir()) / "logs"
    leaked = [p.name for p in logs.rglob("*") if p.is_file() and TEST_KEY in _read(p)]
    assert not leaked, f"the key appears in {leaked}"


def _session_dir() -> str:
    return ray._private.worker._global_node.get_session_dir_path()


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
