"""The worked calculator exchange shown to small local models (no Ray, no model)."""

from __future__ import annotations

from raytroupe.actors.llm.tool_examples import family_of, with_tool_examples
from raytroupe.actors.tools import CALCULATOR
from raytroupe.protocols import ChatMessage, LLMRequest, ToolCall, ToolSpec

ECHO = ToolSpec(name="echo", description="Echo.", parameters={"type": "object"})
SYSTEM = ChatMessage(role="system", content="You are alan, an analyst.")
TASK = ChatMessage(role="user", content="How many requests are 17 * 23 + 4 requests?")


def request(*messages: ChatMessage, tools=(CALCULATOR,), **fields) -> LLMRequest:
    return LLMRequest(model="m", messages=messages, tools=tools, purpose="work", **fields)


def test_families_are_read_from_file_or_model_names():
    assert family_of("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") == "qwen"
    assert family_of("Meta-Llama-3.1-8B-Instruct") == "llama"
    assert family_of("SmolLM2-135M-Instruct.Q4_1.gguf") == "smollm"
    assert family_of("gpt-4o") is None


def test_the_exchange_follows_the_system_prompt_of_a_first_turn():
    shown = with_tool_examples(request(SYSTEM, TASK), "qwen", native_tools=True).messages
    assert shown[0] == SYSTEM
    assert [m.role for m in shown[1:5]] == ["user", "assistant", "tool", "assistant"]
    (call,) = shown[2].tool_calls
    assert (call.tool, call.arguments) == ("calculator", {"expression": "24 * 37 + 15"})
    assert shown[3].text == "903"
    assert shown[5:] == (TASK,)


def test_later_turns_keep_the_exchange_in_the_same_place():
    call = ToolCall(call_id="c1", tool="calculator", arguments={"expression": "17 * 23 + 4"})
    later = (
        SYSTEM,
        TASK,
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="c1", content="395"),
    )
    first = with_tool_examples(request(SYSTEM, TASK), "qwen", native_tools=True).messages
    shown = with_tool_examples(request(*later), "qwen", native_tools=True).messages
    assert shown[:6] == first  # the same prefix each turn: the server's prompt cache holds
    assert shown[6:] == later[2:]


def test_no_exchange_where_it_cannot_help():
    plain = request(SYSTEM, TASK)
    assert with_tool_examples(plain, "smollm", native_tools=True) == plain  # template drops it
    assert with_tool_examples(plain, None, native_tools=True) == plain
    assert with_tool_examples(request(SYSTEM, TASK, tools=(ECHO,)), "qwen", native_tools=True) == (
        request(SYSTEM, TASK, tools=(ECHO,))
    )
    wrap_up = request(SYSTEM, TASK, tool_choice="none")
    assert with_tool_examples(wrap_up, "qwen", native_tools=True) == wrap_up
    planner = plain.model_copy(update={"purpose": "plan"})
    assert with_tool_examples(planner, "qwen", native_tools=True) == planner


def test_text_mode_writes_the_exchange_for_any_family():
    shown = with_tool_examples(request(SYSTEM, TASK), "smollm", native_tools=False).messages
    assert len(shown) == 6
    headless = with_tool_examples(request(TASK), None, native_tools=False).messages
    assert len(headless) == 5  # no system prompt: the exchange opens the conversation
    assert headless[0].text.endswith("How many pens?")
    assert headless[-1] == TASK
