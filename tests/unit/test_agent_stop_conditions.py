"""The agent's stop conditions: budget, deadline, repeated tool calls and stagnation.

Each test runs an ``AgentActor`` in process (router, LLM pool with a scripted model, tool
sandbox) with a ``probe`` tool that records every time it really runs, and a fake clock.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError
from wiring import Tap, envelope, in_process_sandbox, run

from raytroupe.actors import AgentActor, LLMAdapterPool, LocalRouterClient, MessageRouter
from raytroupe.actors.agent.turns import NOT_RUN, WRAP_UP
from raytroupe.protocols import (
    AgentSpec,
    ErrorCode,
    LLMRequest,
    ScriptedModel,
    ScriptedTurn,
    TaskRequest,
    TaskResult,
    ToolCall,
    ToolDef,
)
from raytroupe.protocols.job_context import JobContext

PROBE = ToolDef(
    name="probe",
    description="Looks something up (records each real run).",
    parameters={
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["q"],
    },
)  # no side effects: each call runs (a side-effecting call made again gets its record)


@dataclass
class Probe:
    """The ``probe`` tool: answers ``answer(arguments)`` and moves the clock on ``advance_s``."""

    answer: Callable[[dict[str, Any]], str] = lambda args: f"found {args['q']}"
    advance_s: float = 0.0
    runs: list[dict[str, Any]] = field(default_factory=list)
    now: float = field(default_factory=time.time)

    def clock(self) -> float:
        return self.now

    async def __call__(self, arguments: dict[str, Any], _ctx: object) -> str:
        self.runs.append(arguments)
        self.now += self.advance_s
        return self.answer(arguments)


@dataclass
class Rig:
    client: LocalRouterClient
    llm: Tap
    probe: Probe

    async def ask(self, request: TaskRequest, **fields: object) -> TaskResult:
        reply = await self.client.request(
            envelope(request, "role:worker", sender="orchestrator", job_id="job-1", **fields)
        )
        assert isinstance(reply.payload, TaskResult)
        return reply.payload

    def model_calls(self) -> int:
        return len(self.llm.payloads(LLMRequest))


async def rig(model: ScriptedModel, probe: Probe | None = None, **limits: object) -> Rig:
    spec = AgentSpec.model_validate(
        {"name": "ada", "role": "worker", "tools": ("probe",), "model": "m", **limits}
    )
    probe = probe or Probe()
    router = MessageRouter()
    client = LocalRouterClient(router)
    llm = Tap(LLMAdapterPool({"m": model}))
    await router.register("llm-0", llm, ["llm"])
    sandbox = await in_process_sandbox()
    sandbox.register(PROBE, probe)
    await router.register("tools-0", sandbox, ["tools"])
    agent = AgentActor(spec, client, await sandbox.grant("ada", ("probe",)), clock=probe.clock)
    await router.register("ada", agent, ["worker"])
    return Rig(client, llm, probe)


def look(*queries: str | dict[str, Any], text: str = "", **usage: int) -> ScriptedTurn:
    """A turn calling ``probe`` once per query (a string ``q``, or whole arguments)."""
    calls = tuple(
        ToolCall(call_id=f"c{i}", tool="probe", arguments={"q": q} if isinstance(q, str) else q)
        for i, q in enumerate(queries)
    )
    return ScriptedTurn(text=text, tool_calls=calls, **usage)


def scripted(*turns: ScriptedTurn, **prices: float) -> ScriptedModel:
    return ScriptedModel(turns=turns, **prices)


def task(**fields: object) -> TaskRequest:
    return TaskRequest.model_validate({"task_id": "s1", "instructions": "Find it", **fields})


def assert_stopped(result: TaskResult, reason: str, code: ErrorCode, turns: int, tools: int):
    assert (result.status, result.stop_reason) == ("failed", reason)
    assert result.error is not None
    assert result.error.code is code
    assert (result.turns, result.tool_calls) == (turns, tools)


def test_a_normal_run_is_unaffected_by_the_default_limits():
    async def main():
        # repeats that are not consecutive, and results seen before now and then, are fine
        script = scripted(
            look("a"), look("a"), look("b"), look("a"), look("a"), ScriptedTurn(text="done")
        )
        r = await rig(script, max_tokens_per_task=100_000, max_cost_per_task_usd=1.0)
        result = await r.ask(task(), deadline=r.probe.now + 60)
        assert (result.status, result.stop_reason, result.output) == (
            "succeeded",
            "final_answer",
            "done",
        )
        assert (result.turns, result.tool_calls, result.error) == (6, 5, None)
        assert [args["q"] for args in r.probe.runs] == ["a", "a", "b", "a", "a"]

    run(main())


def test_the_token_budget_stops_the_loop_before_the_tools_of_the_call_that_crossed_it():
    async def main():
        tokens = {"prompt_tokens": 10, "completion_tokens": 5}
        script = scripted(look("a", **tokens), look("b", **tokens), ScriptedTurn(text="never"))
        r = await rig(script, max_tokens_per_task=25)
        result = await r.ask(task())
        assert_stopped(result, "budget", ErrorCode.BUDGET_EXCEEDED, turns=2, tools=1)
        assert "30 tokens used; the subtask may use 25" in result.error.message
        assert result.usage.total_tokens == 30
        assert r.probe.runs == [{"q": "a"}]  # "b" was not run
        assert r.model_calls() == 2

    run(main())


def test_the_cost_budget_stops_the_loop():
    async def main():
        # $0.001 per prompt token: 10 tokens cost $0.01 a call
        script = scripted(
            look("a", prompt_tokens=10), look("b", prompt_tokens=10), input_usd_per_mtok=1000.0
        )
        r = await rig(script, max_cost_per_task_usd=0.015)
        result = await r.ask(task())
        assert_stopped(result, "budget", ErrorCode.BUDGET_EXCEEDED, turns=2, tools=1)
        assert result.usage.cost_usd == pytest.approx(0.02)
        assert r.probe.runs == [{"q": "a"}]

    run(main())


def test_a_final_answer_is_kept_even_if_its_call_crossed_the_budget():
    async def main():
        r = await rig(scripted(ScriptedTurn(text="done", prompt_tokens=50)), max_tokens_per_task=10)
        result = await r.ask(task())
        assert (result.status, result.stop_reason, result.output) == (
            "succeeded",
            "final_answer",
            "done",
        )

    run(main())


def test_the_request_deadline_stops_the_loop_before_the_next_model_call():
    async def main():
        probe = Probe(advance_s=20.0)  # each run takes 20 s of fake time
        r = await rig(scripted(look("a"), look("b")), probe)
        result = await r.ask(task(), deadline=probe.now + 10)
        assert_stopped(result, "deadline", ErrorCode.DEADLINE_EXCEEDED, turns=1, tools=1)
        assert "deadline passed 10.000 s ago" in result.error.message
        assert probe.runs == [{"q": "a"}]
        assert r.model_calls() == 1

    run(main())


def test_a_deadline_already_passed_makes_no_model_call():
    async def main():
        probe = Probe(now=time.time() + 3600)
        r = await rig(scripted(look("a")), probe)
        # the router delivers the envelope (real time is before its deadline); the agent's
        # clock is already past it when the loop starts
        result = await r.ask(task(), deadline=time.time() + 10)
        assert_stopped(result, "deadline", ErrorCode.DEADLINE_EXCEEDED, turns=0, tools=0)
        assert (probe.runs, r.model_calls()) == ([], 0)

    run(main())


def test_the_envelope_deadline_is_the_subtasks_deadline():
    async def main():
        probe = Probe(advance_s=20.0)
        r = await rig(scripted(look("a"), look("b")), probe)
        # the envelope's deadline is real time 10 s ahead (the router delivers it), but the
        # agent's fake clock passes it during the first tool run
        result = await r.ask(task(), deadline=probe.now + 10)
        assert_stopped(result, "deadline", ErrorCode.DEADLINE_EXCEEDED, turns=1, tools=1)
        assert probe.runs == [{"q": "a"}]

    run(main())


def test_the_same_tool_call_three_times_in_a_row_is_not_run_and_the_model_wraps_up():
    async def main():
        script = scripted(look("a"), look("a"), look("a"), ScriptedTurn(text="found a"))
        r = await rig(script)  # max_repeated_tool_calls defaults to 3
        result = await r.ask(task())
        assert result.status == "succeeded"
        assert result.output == "found a"
        assert r.probe.runs == [{"q": "a"}, {"q": "a"}]  # the third was not run
        *_, third, wrap_up = r.llm.payloads(LLMRequest)
        assert third.tool_choice == "auto"
        assert wrap_up.tool_choice == "none"  # its answer, with no tool offered
        assert wrap_up.messages[-2].text == NOT_RUN  # the unrun call is answered
        assert wrap_up.messages[-1].text == WRAP_UP

    run(main())


def test_a_model_that_repeats_the_call_after_the_wrap_up_is_stopped():
    async def main():
        r = await rig(scripted(look("a"), look("a"), look("a"), look("a")))
        result = await r.ask(task())
        assert_stopped(result, "repeated_tool_call", ErrorCode.REPEATED_TOOL_CALL, turns=4, tools=2)
        assert "same 'probe' call" in result.error.message
        assert r.probe.runs == [{"q": "a"}, {"q": "a"}]
        assert r.model_calls() == 4

    run(main())


def test_repeats_within_one_turn_count_and_call_ids_and_key_order_do_not_matter():
    async def main():
        turn = look({"q": "a", "n": 1}, {"n": 1, "q": "a"}, {"q": "b"})
        r = await rig(scripted(turn, turn), max_repeated_tool_calls=2)
        result = await r.ask(task())
        assert_stopped(result, "repeated_tool_call", ErrorCode.REPEATED_TOOL_CALL, turns=2, tools=1)
        assert r.probe.runs == [{"q": "a", "n": 1}]  # neither the repeat nor what follows ran

    run(main())


def test_turns_that_only_bring_results_already_seen_stagnate():
    async def main():
        probe = Probe(answer=lambda _args: "nothing new")
        script = scripted(look("a"), look("b"), look("c"), ScriptedTurn(text="never"))
        r = await rig(script, probe, stagnation_turns=2)
        result = await r.ask(task())
        # turn 1 brings a new result; turns 2 and 3 only repeat it
        assert_stopped(result, "stagnation", ErrorCode.STAGNATION, turns=3, tools=3)
        assert [args["q"] for args in probe.runs] == ["a", "b", "c"]
        assert r.model_calls() == 3  # no model call after the stagnant run

    run(main())


def test_a_model_repeating_its_text_stagnates_even_with_new_results():
    async def main():
        again = "Let me look once more."
        script = scripted(look("a", text=again), look("b", text=again), look("c", text=again))
        r = await rig(script, stagnation_turns=2)
        result = await r.ask(task())
        assert_stopped(result, "stagnation", ErrorCode.STAGNATION, turns=3, tools=3)

    run(main())


def test_stagnation_can_be_switched_off():
    async def main():
        probe = Probe(answer=lambda _args: "nothing new")
        script = scripted(look("a"), look("b"), look("c"), ScriptedTurn(text="done"))
        r = await rig(script, probe, stagnation_turns=None)
        result = await r.ask(task())
        assert (result.status, result.stop_reason, result.turns) == ("succeeded", "final_answer", 4)

    run(main())


@pytest.mark.parametrize(
    "limit",
    [
        {"max_tokens_per_task": 0},
        {"max_cost_per_task_usd": -1.0},
        {"max_repeated_tool_calls": 1},
        {"stagnation_turns": 0},
    ],
    ids=lambda limit: next(iter(limit)),
)
def test_limits_that_cannot_work_are_refused(limit):
    with pytest.raises(ValidationError):
        AgentSpec.model_validate({"name": "ada", "role": "worker", **limit})


def test_the_last_turn_after_tool_calls_offers_no_tool_and_asks_for_the_answer():
    async def main():
        script = scripted(look("a"), look("b"), ScriptedTurn(text="a and b"))
        r = await rig(script, max_turns=3)
        result = await r.ask(task())
        assert result.status == "succeeded"
        assert result.output == "a and b"
        first, second, last = r.llm.payloads(LLMRequest)
        assert (first.tool_choice, second.tool_choice, last.tool_choice) == ("auto", "auto", "none")
        assert last.messages[-1].role == "user"
        assert last.messages[-1].text == WRAP_UP
        assert WRAP_UP not in [m.text for m in second.messages]

    run(main())


def test_a_model_that_calls_on_its_last_turn_anyway_still_runs_out_of_turns():
    async def main():
        r = await rig(scripted(look("a"), look("b")), max_turns=2)
        result = await r.ask(task())
        assert_stopped(result, "max_turns", ErrorCode.MAX_TURNS, turns=2, tools=2)

    run(main())


def test_a_subtask_that_is_the_whole_job_is_said_once():
    from raytroupe.actors.agent.turns import render_task  # noqa: PLC0415

    alone = render_task(task(instructions="Add 2 and 3.", job=JobContext(request="Add 2 and 3.")))
    assert alone == "Add 2 and 3."
    part = render_task(
        task(instructions="Add 2 and 3.", job=JobContext(request="Add, then double."))
    )
    assert part == "Add 2 and 3.\n\nContext:\nAdd, then double."


@pytest.mark.parametrize("temperature", [0.0, 0.7, None])
def test_the_agents_temperature_goes_with_every_model_call(temperature):
    async def main():
        r = await rig(scripted(look("a"), ScriptedTurn(text="found a")), temperature=temperature)
        result = await r.ask(task())
        assert result.status == "succeeded"
        sent = r.llm.payloads(LLMRequest)
        assert [call.temperature for call in sent] == [temperature, temperature]

    run(main())


def test_a_temperature_out_of_range_is_refused():
    for wrong in (-0.1, 2.5):
        with pytest.raises(ValidationError, match="temperature"):
            AgentSpec(name="ada", role="worker", temperature=wrong)
