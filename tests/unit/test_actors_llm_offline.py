import asyncio
import json
import time

import pytest
from wiring import llm_request

from raytroupe.actors.llm import OfflineProvider, split_task, word_tokens
from raytroupe.actors.orchestrator import parse_plan, plan_request
from raytroupe.actors.tools import CALCULATOR
from raytroupe.protocols import AgentSpec, ChatMessage, OfflineModel, TeamSpec, ToolCall, ToolSpec
from raytroupe.protocols.prompts import RESULTS_HEADING


def complete(request, provider=None):
    return asyncio.run((provider or OfflineProvider()).complete(request))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Do these:\n- first thing\n- second thing",
            ("Do these:", ["first thing", "second thing"]),
        ),
        ("* a\n* b\n* c", ("", ["a", "b", "c"])),
        ("Steps\n1. alpha\n2) beta\n3. gamma", ("Steps", ["alpha", "beta", "gamma"])),
        ("\u2022 one\n\u2022 two", ("", ["one", "two"])),
        ("first line\n\n  second line  \n", ("", ["first line", "second line"])),
        ("- only item\nand a line", ("", ["- only item", "and a line"])),
        (
            "One thing. Another thing! A question?",
            ("", ["One thing.", "Another thing!", "A question?"]),
        ),
        ("  Just one sentence  ", ("", ["Just one sentence"])),
        ("- a lonely item", ("", ["- a lonely item"])),
    ],
)
def test_split_task(text, expected):
    assert split_task(text) == expected


def _team() -> TeamSpec:
    return TeamSpec(
        agents=(
            AgentSpec(name="wendy", role="writer"),
            AgentSpec(name="rita", role="researcher"),
            AgentSpec(name="carl", role="analyst", tools=("calculator",)),
        )
    )


def test_plan_is_json_that_parse_plan_accepts_with_roles_round_robin():
    team = _team()
    task = (
        "Please handle:\n- Summarise the notes\n- Compute 17 * 23 + 4\n"
        "- Find the sources\n- Draft the intro\n- Check the dates"
    )
    response = complete(plan_request(task, team))
    assert response.provider == "offline"
    assert response.finish_reason == "stop"
    assert response.tool_calls == ()
    raw = json.loads(response.text)
    assert [s["id"] for s in raw["subtasks"]] == ["s1", "s2", "s3", "s4", "s5"]
    plan = parse_plan(response.text, team)
    assert [(s.role, s.instructions) for s in plan.subtasks] == [
        ("writer", "Summarise the notes"),
        ("analyst", "Compute 17 * 23 + 4"),
        ("researcher", "Find the sources"),
        ("writer", "Draft the intro"),
        ("researcher", "Check the dates"),
    ]
    assert all(s.depends_on == () for s in plan.subtasks)


def test_plan_without_a_calculator_role_round_robins_over_all_roles():
    team = TeamSpec(
        agents=(AgentSpec(name="a", role="one"), AgentSpec(name="b", role="two")),
    )
    plan = parse_plan(complete(plan_request("x\ny\n2 + 2\nz", team)).text, team)
    assert [s.role for s in plan.subtasks] == ["one", "two", "one", "two"]


def test_plan_reads_enum_roles_and_falls_back_to_worker():
    enum_format = {
        "properties": {"subtasks": {"items": {"properties": {"role": {"enum": ["red", "blue"]}}}}}
    }
    request = llm_request("a\nb\nc", purpose="plan", response_format=enum_format)
    roles = [s["role"] for s in json.loads(complete(request).text)["subtasks"]]
    assert roles == ["red", "blue", "red"]
    bare = json.loads(complete(llm_request("a. b.", purpose="plan")).text)
    assert [s["role"] for s in bare["subtasks"]] == ["worker", "worker"]


def _work(instructions: str, context: str = "", **fields):
    content = f"{instructions}\n\n{context}" if context else instructions
    system = ChatMessage(role="system", content="You are an agent.")
    return llm_request(system, content, purpose="work", **fields)


def test_work_calls_the_calculator_when_offered_and_instructions_hold_arithmetic():
    response = complete(_work("Compute 17 * 23 + 4 please", tools=(CALCULATOR,)))
    assert response.finish_reason == "tool_calls"
    assert response.text == ""
    [call] = response.tool_calls
    assert call.tool == "calculator"
    assert call.arguments == {"expression": "17 * 23 + 4"}


def test_work_does_not_call_tools_that_are_not_offered():
    other = ToolSpec(name="search", description="Searches.")
    for request in (
        _work("Compute 17 * 23 + 4"),
        _work("Compute 17 * 23 + 4", tools=(other,)),
        _work("Compute 17 * 23 + 4", tools=(CALCULATOR,), tool_choice="none"),
    ):
        response = complete(request)
        assert response.tool_calls == ()
        assert response.finish_reason == "stop"


def test_work_without_arithmetic_does_not_call_the_calculator():
    response = complete(_work("Describe the weather", tools=(CALCULATOR,)))
    assert response.tool_calls == ()


def test_work_answers_from_the_tool_result():
    call = ToolCall(call_id="c7", tool="calculator", arguments={"expression": "17 * 23 + 4"})
    request = llm_request(
        ChatMessage(role="system", content="sys"),
        "Compute 17 * 23 + 4",
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="c7", content="395"),
    )
    response = complete(request)
    assert response.tool_calls == ()
    assert response.text == "17 * 23 + 4 = 395"


def test_work_answers_with_every_tool_result_of_the_last_turn():
    calls = (
        ToolCall(call_id="a", tool="calculator", arguments={"expression": "1 + 1"}),
        ToolCall(call_id="b", tool="lookup", arguments={"q": "x"}),
    )
    request = llm_request(
        "Do it",
        ChatMessage(role="assistant", tool_calls=calls),
        ChatMessage(role="tool", tool_call_id="a", content="2"),
        ChatMessage(role="tool", tool_call_id="b", content="found x"),
    )
    assert complete(request).text == "1 + 1 = 2; found x"


def test_extractive_answer_picks_the_best_overlapping_statement():
    context = (
        "Context:\nIs Berlin the capital of France?\n"
        "Berlin is in Germany. Paris is the capital of France. Lyon is in France."
    )
    response = complete(_work("What is the capital of France?", context))
    assert response.text == "Paris is the capital of France."


def test_extractive_answer_keeps_at_most_two_best_sentences():
    context = "Cats purr. Cats sleep a lot. Cats chase mice. Dogs bark."
    assert complete(_work("cats", context)).text == "Cats purr. Cats sleep a lot."


def test_no_overlap_means_no_answer():
    response = complete(_work("Name the tallest mountain", "Bananas are yellow."))
    assert response.text == "My inputs hold no answer to: Name the tallest mountain"
    assert complete(_work("Name the tallest mountain")).text.startswith("My inputs hold no answer")


def test_chat_answers_extractively():
    request = llm_request("Compute 2 + 2\n\n2 + 2 is four.", purpose="chat")
    response = complete(request)
    assert response.tool_calls == ()
    assert response.text == "2 + 2 is four."


def test_aggregate_returns_the_lines_under_the_results_heading():
    content = f"Task:\nDo things\n\n{RESULTS_HEADING}\n- a: one\n- b: two\n"
    response = complete(llm_request(content, purpose="aggregate"))
    assert response.text == "- a: one\n- b: two"
    assert complete(llm_request("  no heading here ", purpose="aggregate")).text == (
        "no heading here"
    )


def test_latency_is_applied():
    latency = 0.05
    provider = OfflineProvider(OfflineModel(latency_s=latency))
    slack = time.get_clock_info("monotonic").resolution

    async def main():
        loop = asyncio.get_running_loop()
        start = loop.time()
        response = await provider.complete(_work("hello"))
        return loop.time() - start, response

    elapsed, response = asyncio.run(main())
    assert elapsed >= latency - slack
    assert response.latency_s >= latency - slack


def test_usage_counts_whitespace_tokens():
    request = _work("Name the tallest mountain", "Bananas are yellow.")
    response = complete(request)
    assert response.usage.prompt_tokens == word_tokens(request.messages)
    assert response.usage.prompt_tokens == 4 + 4 + 3
    assert response.usage.completion_tokens == len(response.text.split())
    assert (response.usage.calls, response.usage.cost_usd) == (1, 0.0)
    assert response.model == "default"


def test_answers_are_deterministic():
    request = plan_request("- a\n- b\n- 3 * 3", _team())
    assert complete(request).text == complete(request).text
