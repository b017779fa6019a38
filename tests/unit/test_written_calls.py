"""Tool calls written in an answer's text: recognized, run, or sent back to be written again."""

import pytest
from test_actors_agent import rig, scripted, task
from wiring import run

from raytroupe.actors.agent.written_calls import (
    Unreadable,
    WrittenCalls,
    answer_of,
    described_calculation,
    read_written_calls,
    without_schema_words,
)
from raytroupe.protocols import ScriptedTurn, TaskResult, ToolCall

TOOLS = {"calculator", "http_get"}


def _call(k, tool="calculator", **arguments):
    return ToolCall(call_id=f"call_{k}", tool=tool, arguments=arguments)


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculator", "arguments": {"expression": "2 + 2"}}',
        '  {"name": "calculator", "parameters": {"expression": "2 + 2"}}\n',
        '{"tool": "calculator", "args": "{\\"expression\\": \\"2 + 2\\"}"}',
        '{"type": "function", "function": {"name": "calculator", '
        '"arguments": "{\\"expression\\": \\"2 + 2\\"}"}}',
        '```json\n{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n```',
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>',
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n',  # cut off
        '{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n```',  # closed, not opened
        '```json\n{"name": "calculator", "arguments": {"expression": "2 + 2"}}',  # opened only
        '{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n```\n```',  # two closed
        "<tool_response>\n"  # the tag Qwen's template gives results, around a call
        '{"name": "calculator", "arguments": {"expression": "2 + 2"}}\n</tool_response>',
    ],
    ids=[
        "bare",
        "parameters",
        "tool-args-string",
        "openai-shape",
        "fenced",
        "hermes",
        "unclosed",
        "stray-closing-fence",
        "unclosed-fence",
        "two-closing-fences",
        "tool-response-tags",
    ],
)
def test_a_call_written_in_any_common_form_is_read(text):
    assert read_written_calls(text, TOOLS) == WrittenCalls("", (_call(0, expression="2 + 2"),))


def test_several_calls_keep_their_order_and_the_rest_of_the_text():
    text = (
        "Let me work it out.\n"
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1 + 1"}}</tool_call>\n'
        '<tool_call>{"name": "http_get", "arguments": {"url": "https://example.com"}}</tool_call>'
    )
    found = read_written_calls(text, TOOLS, first_index=3)
    assert found == WrittenCalls("Let me work it out.", (
        _call(3, expression="1 + 1"), _call(4, "http_get", url="https://example.com")))  # fmt: skip
    listed = '[{"name": "calculator", "arguments": {"expression": "1"}}, ' \
        '{"name": "calculator", "arguments": {"expression": "2"}}]'  # fmt: skip
    assert [c.arguments for c in read_written_calls(listed, TOOLS).calls] == [
        {"expression": "1"}, {"expression": "2"}]  # fmt: skip
    fenced = 'I will call it:\n```json\n{"name": "calculator", "arguments": {}}\n```\nthen answer.'
    assert read_written_calls(fenced, TOOLS) == WrittenCalls(
        "I will call it:\n\nthen answer.", (_call(0),))  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 4.",
        '{"name": "Alice", "age": 3}',  # not call-shaped: data, an answer
        '{"name": "Alice", "arguments": "none"}',  # arguments not an object: data
        '{"name": "calculator", "arguments": {"expression": "1"}, "note": "x"}',  # not call-shaped
        '```json\n{"total": 12}\n```',
        '{"sentiment": "positive"}',
        "[]",
    ],
)
def test_answers_that_are_not_calls_stay_answers(text):
    assert read_written_calls(text, TOOLS) is None


def test_no_tools_no_calls():
    assert read_written_calls('{"name": "calculator", "arguments": {}}', ()) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<tool_call>{name: calculator}</tool_call>", "not a call of one of your tools"),
        ('<tool_call>{"name": "rm", "arguments": {}}</tool_call>', "no tool 'rm'"),
        ('{"name": "calculator", "arguments": "2 + 2"}', "not a JSON object"),
        ('{"name": "orderTotal", "arguments": {"lamps": 3}}', "no tool 'orderTotal'"),
        ('{"name": "RAYTROUPE", "arguments": null}', "no tool 'RAYTROUPE'"),
        ('```json\n{"name": "sum", "arguments": {}}\n```', "your tools are calculator, http_get"),
        ('{"name": "calculator", "arguments": {"expression": "2 + 2"}', "not valid JSON"),
    ],
)
def test_a_call_that_cannot_be_read_is_reported(text, problem):
    found = read_written_calls(text, TOOLS)
    assert isinstance(found, Unreadable)
    assert problem in found.problem


def test_the_agent_runs_a_call_written_as_json_and_answers():
    """Qwen under llama.cpp: the call comes back as fenced JSON in the content."""

    async def main():
        written = '```json\n{"name": "calculator", "arguments": {"expression": "17 * 23 + 4"}}\n```'
        r = await rig(m=scripted(ScriptedTurn(text=written), ScriptedTurn(text="It is 395.")))
        result = (await r.ask(task())).payload
        assert isinstance(result, TaskResult)
        assert (result.status, result.output, result.tool_calls) == ("succeeded", "It is 395.", 1)
        _, second = r.requests()
        assistant, tool = second.messages[-2:]
        assert assistant.tool_calls == (_call(0, expression="17 * 23 + 4"),)
        assert (tool.role, tool.tool_call_id, tool.content) == ("tool", "call_0", "395")

    run(main())


def test_an_unreadable_call_goes_back_to_the_model_instead_of_becoming_the_answer():
    async def main():
        broken = '<tool_call>{"name": "calculator", "arguments": {"expression": 17 * 23}}'
        fixed = '<tool_call>{"name": "calculator", "arguments": {"expression": "17 * 23"}}'
        r = await rig(m=scripted(ScriptedTurn(text=broken), ScriptedTurn(text=fixed),
                                 ScriptedTurn(text="It is 391.")))  # fmt: skip
        result = (await r.ask(task())).payload
        assert (result.status, result.output, result.turns, result.tool_calls) == (
            "succeeded", "It is 391.", 3, 1)  # fmt: skip
        _, second, _ = r.requests()
        assert second.messages[-2].content == broken
        assert second.messages[-1].role == "user"
        assert second.messages[-1].content.startswith("Your tool call could not be read:")

    run(main())


def test_schema_words_a_model_copied_into_its_arguments_are_dropped_and_nothing_else():
    strict = {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
        "additionalProperties": False,
    }
    copied = {"expression": "2+2", "required": ["expression"], "type": "x"}
    echoed = ToolCall(call_id="c", tool="calculator", arguments=copied)
    assert without_schema_words(echoed, strict).arguments == {"expression": "2+2"}
    other = echoed.model_copy(update={"arguments": {"expression": "1", "unit": "m"}})
    assert without_schema_words(other, strict) is other  # the tool says what is wrong with it
    loose = {**strict, "additionalProperties": True}
    assert without_schema_words(echoed, loose) is echoed  # it may take a 'type'
    named = {**strict, "properties": {**strict["properties"], "type": {"type": "string"}}}
    assert without_schema_words(echoed, named).arguments == {"expression": "2+2", "type": "x"}


def test_a_call_wrapped_in_the_tags_a_template_lists_tools_in_is_a_call():
    text = '<tools>\n{"name": "calculator", "arguments": {"expression": "1+2"}}\n</tools>'
    assert read_written_calls(text, TOOLS) == WrittenCalls("", (_call(0, expression="1+2"),))
    assert read_written_calls("<tools>none needed</tools>", TOOLS) is None
    assert read_written_calls("See <tool>x</tool> and more", TOOLS) is None


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("<tool_response>\n395\n</tool_response>", "395"),
        ("The answer is:\n<tool_response>\n395\n</tool_response>", "The answer is:\n\n395"),
        ("395 requests.", "395 requests."),
        ("<tool_response></tool_response>", "<tool_response></tool_response>"),  # nothing else
    ],
)
def test_a_final_answer_loses_the_tool_result_tags_it_copied(text, answer):
    assert answer_of(text) == answer


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        (
            "To check the calculation, we can use the calculator tool with the expression "
            "`3 * 2.4 * 6.2 + 2 * 3.75 * 6.2`. Let's do this step by step.",
            "3 * 2.4 * 6.2 + 2 * 3.75 * 6.2",
        ),
        ('Use the calculator with "5360 + 7840". It returns 13200.', "5360 + 7840"),
        ("The calculator: `$12.50 * 3`", "$12.50 * 3"),
        ("The Calculator says `(1 - 0.25) * 80`.", "(1 - 0.25) * 80"),
    ],
)
def test_a_calculation_described_instead_of_made_is_read_as_the_call(text, expression):
    call = described_calculation(text, call_id="call_0")
    assert call is not None
    assert (call.call_id, call.tool, call.arguments) == (
        "call_0",
        "calculator",
        {"expression": expression},
    )


@pytest.mark.parametrize(
    "text",
    [
        "The answer is `17 * 23 + 4` = 395.",  # no calculator named: an answer
        "The calculator gave 395.",  # no expression quoted
        "Use the calculator with `total_price * 3`.",  # words: not an expression to run
        'The calculator: "2024"',  # a number, no operator
        "The calculator `1,340` per month",
    ],
)
def test_answers_that_describe_no_calculation_stay_answers(text):
    assert described_calculation(text, call_id="call_0") is None


def test_a_described_calculation_is_run_only_before_the_subtasks_first_calculator_call():
    described = "We can use the calculator tool with the expression `17 * 23 + 4`."
    again = "The calculator returned 395 for `17 * 23 + 4`, so 395 requests."

    async def main():
        r = await rig(m=scripted(ScriptedTurn(text=described), ScriptedTurn(text=again)))
        reply = await r.ask(task("How many requests are 17 * 23 + 4 requests?"))
        return reply.payload, r.requests()

    result, requests = run(main())
    assert (result.status, result.output, result.tool_calls) == ("succeeded", again, 1)
    assert requests[1].messages[-1].text == "395"  # the tool's result, then the answer stands
