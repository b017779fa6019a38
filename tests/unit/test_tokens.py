"""Offline token counts (actors.llm.tokens): a real tokenizer, not words; cached per message."""

import gc
import json
from concurrent.futures import ThreadPoolExecutor

from raytroupe.actors.llm import tokens
from raytroupe.actors.llm.tokens import (
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    SAFETY_FACTOR,
    TOOLS_TOKENS,
    count_tokens,
    message_tokens,
    messages_tokens,
    tools_tokens,
    truncate,
    upper_bound,
)
from raytroupe.protocols import ChatMessage, ImagePart, TextPart, ToolCall, ToolSpec

PROSE = (
    "The orchestrator plans a job into subtasks; each agent runs a ReAct loop, calling its "
    "tools until it can answer. Unbelievably, nobody counted the tokens by words again."
)


def test_text_counts_tokens_not_words():
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    # sub-words and punctuation are tokens of their own: more tokens than words
    assert count_tokens(PROSE) > len(PROSE.split())
    assert count_tokens("unbelievably") > 1
    data = '{"a": [1, 2.5, "three"]}'
    assert count_tokens(data) == 18 > len(data.split())


def test_what_a_bpe_spends_and_wordpiece_drops_is_counted():
    # WordPiece takes "1234567890" in six tokens: a BPE may take a token per digit
    assert count_tokens("1234567890") == 10
    assert count_tokens("mp3") == 2  # a digit inside a word piece counts too
    # line breaks, runs of spaces or tabs, a space before a number: a token each
    assert count_tokens("a\nb\nc") == 5
    assert count_tokens("if x:\n    return y") == count_tokens("if x: return y") + 2
    assert count_tokens("a\tb") == count_tokens("a   b") == 3
    assert count_tokens("x = 12") == count_tokens("x =12") + 1


def test_unicode_counts_a_token_per_byte_of_a_character_outside_ascii():
    assert count_tokens("héllo") == count_tokens("hello") + 1  # é is two bytes of UTF-8
    assert count_tokens("你好世界") == 4 * 3  # a WordPiece token each, three bytes each
    assert count_tokens("✓ 🙂 ∑") == 3 + 4 + 3  # unknown to WordPiece: still counted
    assert count_tokens("\ud800") >= 1  # a lone surrogate (from bad JSON) does not raise


def test_long_texts_are_counted_whole():
    # the tokenizer file truncates to 128 tokens and pads to them: both are switched off
    assert count_tokens("river " * 1000) == 1000
    assert count_tokens("a") == 1


def test_a_message_counts_its_framing_parts_and_images():
    text = ChatMessage(role="user", content=PROSE)
    assert message_tokens(text) == count_tokens(PROSE) + MESSAGE_TOKENS
    parts = ChatMessage(
        role="user", content=(TextPart(text=PROSE), ImagePart(url="https://example.com/a.png"))
    )
    assert message_tokens(parts) == count_tokens(PROSE) + IMAGE_TOKENS + MESSAGE_TOKENS


def test_tool_calls_count_their_names_and_arguments():
    def asking(arguments):
        call = ToolCall(call_id="c1", tool="search", arguments=arguments)
        return ChatMessage(role="assistant", tool_calls=(call,))

    bare = message_tokens(asking({}))
    arguments = {"query": "offline token counting for agents", "k": 12, "tags": ["a", "b"]}
    assert message_tokens(asking(arguments)) - bare == count_tokens(
        json.dumps(arguments)
    ) - count_tokens("{}")
    assert bare > MESSAGE_TOKENS + count_tokens("search")  # a call's framing counts too
    answer = ChatMessage(role="tool", tool_call_id="c1", content="[]")
    assert message_tokens(answer) == MESSAGE_TOKENS + count_tokens("[]") + count_tokens("c1")


def test_a_conversation_is_the_sum_of_its_messages():
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content=PROSE),
    ]
    assert messages_tokens(messages) == sum(message_tokens(m) for m in messages)
    assert messages_tokens([]) == 0


def test_counts_are_kept_per_live_message_and_go_with_it():
    message = ChatMessage(role="user", content=PROSE + " once")
    equal = ChatMessage(role="user", content=PROSE + " once")  # another object, same count
    kept = tokens._counted._by_id
    first = message_tokens(message)
    assert id(message) in kept
    assert message_tokens(message) == first == message_tokens(equal)
    keys = (id(message), id(equal))
    del message, equal
    gc.collect()
    assert not any(key in kept for key in keys)  # no message is kept alive by its count


def test_tools_count_their_names_descriptions_and_schemas():
    small = ToolSpec(name="ping", description="Ping.")
    schema = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "What to evaluate."}},
        "required": ["expression"],
    }
    large = ToolSpec(name="calculator", description="Evaluate arithmetic.", parameters=schema)
    assert 0 < tools_tokens([small]) < tools_tokens([large])
    # the instructions a template writes around the tools come once
    assert tools_tokens([small, large]) == tools_tokens([small]) + tools_tokens([large]) - (
        TOOLS_TOKENS
    )
    assert tools_tokens([]) == 0


def test_truncate_cuts_between_tokens():
    cut = truncate(PROSE, 10)
    assert PROSE.startswith(cut)
    assert count_tokens(cut) == 10
    assert truncate(PROSE, 10_000) == PROSE
    assert truncate(PROSE, 0) == ""


def test_the_upper_bound_is_the_count_raised_by_the_safety_factor():
    assert SAFETY_FACTOR > 1.0
    assert upper_bound(0) == 0
    assert upper_bound(100) == int(100 * SAFETY_FACTOR)
    assert upper_bound(3) >= 3 * SAFETY_FACTOR


def test_counting_from_many_threads_agrees():
    texts = [f"{PROSE} {n} " * (n % 7 + 1) for n in range(200)]
    alone = [count_tokens(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(count_tokens, texts))
    assert together == alone
