"""An agent's check of its arithmetic: one corrective turn, and only one, before it answers."""

import pytest
from test_actors_agent import calc, rig, scripted, task
from wiring import run

from raytroupe.actors.agent.checks import (
    CALCULATE_FIRST,
    MAX_CORRECTIONS,
    Calculation,
    arithmetic_correction,
    copied_example,
    kept_answer,
    next_correction,
    taken_answer,
)
from raytroupe.protocols import AgentSpec, ScriptedTurn

SUM = "What is 17 * 23 + 4?"
CALCULATOR = ("calculator",)


# -- arithmetic_correction ------------------------------------------------------------------


def test_an_agent_without_the_calculator_is_not_corrected():
    assert arithmetic_correction(SUM, ("search",), [], "It is 400.") is None
    assert arithmetic_correction(SUM, (), [], "It is 400.") is None


def test_work_that_asks_for_no_computed_number_is_not_corrected():
    assert arithmetic_correction("Describe the tower.", CALCULATOR, [], "It is tall.") is None
    answer = "Bob, 32"
    assert (
        arithmetic_correction("Extract the name and age from: Bob is 32", CALCULATOR, [], answer)
        is None
    )


def test_an_answer_given_without_calling_the_calculator_is_told_to_calculate_first():
    assert arithmetic_correction(SUM, CALCULATOR, [], "It is 395.") == CALCULATE_FIRST
    assert (
        arithmetic_correction("What is 15% of 80?", ("search", "calculator"), [], "12")
        == CALCULATE_FIRST
    )


def test_an_answer_restating_the_texts_numbers_is_a_lookup_and_stands():
    passage = "The dairy has 92 cows. Each wheel is aged for six weeks; it won gold in 1997."
    question = "How long is each wheel aged, and how many cows are there?"
    looked_up = "Each wheel is aged for six weeks, and there are 92 cows."
    assert arithmetic_correction(question, CALCULATOR, [], looked_up, passage) is None
    # a number the text does not state was computed (or made up): checked as before
    assert arithmetic_correction(question, CALCULATOR, [], "It is 552 weeks.", passage) == (
        CALCULATE_FIRST
    )
    assert arithmetic_correction(question, CALCULATOR, [], "Aged, long.", passage) == (
        CALCULATE_FIRST
    )


def test_working_written_out_and_right_in_every_step_stands_without_the_calculator():
    answer = "17 * 23 = 391, and 391 + 4 = 395. It is 395."
    assert arithmetic_correction(SUM, CALCULATOR, [], answer) is None


def test_a_wrong_step_of_written_working_is_named_with_its_value():
    answer = "17 * 23 = 381, and 381 + 4 = 385. It is 385."
    assert arithmetic_correction(SUM, CALCULATOR, [], answer) == (
        "The calculator disagrees with your working: 17 * 23 is 391, not 381. Redo the working "
        "from there with the right values, then give your final answer."
    )
    many = " ".join(f"{i} * 2 = {i}." for i in range(3, 8))
    told = arithmetic_correction(SUM, CALCULATOR, [], many)
    assert told is not None
    assert told.count(" is ") == 3  # at most three named


def test_any_agents_written_slip_is_named_tool_or_not():
    """A researcher without the calculator, on work not read as arithmetic, writes a slip."""
    answer = "Each of the six owes 291.20 / 6 = 48.50 pounds."
    for tools in ((), ("search",), CALCULATOR):
        told = arithmetic_correction("Split the bill of 291.20 six ways.", tools, [], answer)
        assert told is not None
        assert "291.20 / 6 is 48.5333333333, not 48.50" in told
    assert arithmetic_correction("Describe it.", (), [], "It is 291.20 / 6 = 48.5333.") is None


def test_after_the_first_correction_only_new_slips_are_named_up_to_the_limit():
    slip = "54 * 372 = 20088 and 20088 * 0.28 = 5725.44"
    first = next_correction(SUM, CALCULATOR, [], "It is 400.", "", 0)
    assert first == CALCULATE_FIRST
    assert next_correction(SUM, CALCULATOR, [], "It is 400.", "", 1) is None  # told once
    again = next_correction(SUM, CALCULATOR, [], slip, "", 1)
    assert again is not None
    assert "20088 * 0.28 is 5624.64, not 5725.44" in again
    assert next_correction(SUM, CALCULATOR, [], slip, "", MAX_CORRECTIONS) is None


def test_an_answer_after_a_correction_that_states_no_number_loses_to_the_corrected_one():
    before = "The total is 1,372.50 pounds."
    assert kept_answer("To check the result, I will use the calculator.", before) == before
    assert kept_answer("It is 1,380 pounds.", before) == "It is 1,380 pounds."
    assert kept_answer("No number here.", None) == "No number here."
    assert kept_answer("No number here.", "Nor here.") == "No number here."


def test_an_answer_after_a_call_that_failed_on_its_numbers_stands():
    """Division by zero, an overflow: the model saw why, and can only report it."""
    calculated = [
        Calculation("17 * 23 + 4", "395"),
        Calculation("17 ** 99999", "ERROR: exponent 99999 is larger than 1000", ok=False),
    ]
    assert arithmetic_correction(SUM, CALCULATOR, calculated, "It is huge.") is None
    zero = [Calculation("1 / 0", "ERROR: division by zero in '1 / 0'", ok=False)]
    assert arithmetic_correction(SUM, CALCULATOR, zero, "It cannot be divided.") is None


def test_a_call_the_calculator_could_not_read_is_asked_for_again_in_numbers():
    unread = "ERROR: not an arithmetic expression: '15 percent of 80'"
    told = arithmetic_correction(
        SUM, CALCULATOR, [Calculation("15 percent of 80", unread, ok=False)], "Sorry."
    )
    assert told is not None
    assert "'15 percent of 80'" in told
    assert "numbers and" in told


@pytest.mark.parametrize(
    ("result", "answer"),
    [
        ("395", "17 * 23 + 4 = 395."),
        ("1234", "It comes to 1,234."),
        ("1234.0", "It comes to 1,234."),
        ("3.14159", "About 3.14."),
        ("2.5", "2.50 each"),
    ],
)
def test_an_answer_stating_the_calculators_last_result_stands(result, answer):
    assert arithmetic_correction(SUM, CALCULATOR, [Calculation("e", result)], answer) is None


def test_an_answer_stating_another_number_is_told_the_calculators_result():
    calculated = [
        Calculation("17 * 23", "391"),
        Calculation("17 * 23 + 4", "395"),
    ]  # the last call counts
    told = arithmetic_correction(SUM, CALCULATOR, calculated, "It is 391.")
    assert told == (
        "The calculator returned 395 for 17 * 23 + 4. Give your final answer with that result."
    )
    assert (
        arithmetic_correction(SUM, CALCULATOR, [Calculation("e", "3.14159")], "About 3.15")
        is not None
    )


def test_a_result_that_is_not_one_number_cannot_be_checked_and_the_answer_stands():
    assert arithmetic_correction(SUM, CALCULATOR, [Calculation("e", "1 2")], "It is 7.") is None
    assert (
        arithmetic_correction(SUM, CALCULATOR, [Calculation("e", "no number")], "It is 7.") is None
    )


# -- through the agent's loop ---------------------------------------------------------------


@pytest.mark.parametrize("final", ["It is 395.", "It is 400."])
def test_an_answer_without_the_calculator_gets_one_corrective_turn_and_the_next_answer_stands(
    final,
):
    """Corrected once; then the model calls the calculator, and what it answers stands, right
    (395) or wrong (400: not corrected again)."""

    async def main():
        turns = (ScriptedTurn(text="It is 400."), calc("17 * 23 + 4"), ScriptedTurn(text=final))
        r = await rig(m=scripted(*turns))
        result = (await r.ask(task(SUM))).payload
        await r.pool.remove("m")  # every scripted turn was played
        return result, r.requests()

    result, requests = run(main())
    assert (result.status, result.output, result.stop_reason) == (
        "succeeded",
        final,
        "final_answer",
    )
    assert (result.turns, result.tool_calls) == (3, 1)
    assert len(requests) == 3
    corrected = requests[1].messages[-2:]
    assert [(m.role, m.content) for m in corrected] == [
        ("assistant", "It is 400."),
        ("user", CALCULATE_FIRST),
    ]
    told = [m for m in requests[-1].messages if m.role == "user" and m.content == CALCULATE_FIRST]
    assert len(told) == 1
    assert requests[-1].messages[-1].role == "tool"  # the last answer was not sent back


def test_a_slip_in_written_working_is_corrected_once_through_the_loop():
    """The wrong step named, the model redoes its working: the next answer stands."""
    slip = "17 * 23 = 381 and 381 + 4 = 385, so 385."

    async def main():
        turns = (ScriptedTurn(text=slip), ScriptedTurn(text="17 * 23 = 391, 391 + 4 = 395."))
        r = await rig(m=scripted(*turns))
        result = (await r.ask(task(SUM))).payload
        await r.pool.remove("m")
        return result, r.requests()

    result, requests = run(main())
    assert (result.status, result.output, result.turns, result.tool_calls) == (
        "succeeded",
        "17 * 23 = 391, 391 + 4 = 395.",
        2,
        0,
    )
    assert (
        requests[1]
        .messages[-1]
        .content.startswith("The calculator disagrees with your working: 17 * 23 is 391, not 381.")
    )


def test_a_slip_carried_into_the_next_step_is_named_again_and_a_numberless_answer_loses():
    """Through the loop: a slip named, the next one named, then an answer with no number:
    the answer the last correction was about stands, not the empty words, its slip
    recomputed."""
    first = "17 * 23 = 381 and 381 + 4 = 385."
    second = "17 * 23 = 391 and 391 + 4 = 396."

    async def main():
        spec = AgentSpec(name="ada", role="worker", tools=CALCULATOR, model="m", max_turns=4)
        turns = (first, second, "I will check that with the calculator tool.")
        r = await rig(spec, m=scripted(*(ScriptedTurn(text=t) for t in turns)))
        result = (await r.ask(task(SUM))).payload
        await r.pool.remove("m")
        return result, r.requests()

    result, requests = run(main())
    assert (result.status, result.output, result.turns, result.tool_calls) == (
        "succeeded",
        "17 * 23 = 391 and 391 + 4 = 395.",
        3,
        0,
    )
    assert "17 * 23 is 391, not 381" in requests[1].messages[-1].content
    assert "391 + 4 is 395, not 396" in requests[2].messages[-1].content


def test_an_answer_not_stating_the_calculators_result_is_told_it_once():
    async def main():
        turns = (calc("17 * 23 + 4"), ScriptedTurn(text="It is 400."), ScriptedTurn(text="395"))
        r = await rig(m=scripted(*turns))
        result = (await r.ask(task(SUM))).payload
        await r.pool.remove("m")
        return result, r.requests()

    result, requests = run(main())
    assert (result.status, result.output, result.turns) == ("succeeded", "395", 3)
    assert requests[-1].messages[-1].content == (
        "The calculator returned 395 for 17 * 23 + 4. Give your final answer with that result."
    )


def test_no_correction_without_two_turns_left_for_it():
    async def main():
        spec = AgentSpec(name="ada", role="worker", tools=CALCULATOR, model="m", max_turns=2)
        r = await rig(spec, m=scripted(calc("17 * 23 + 4"), ScriptedTurn(text="It is 400.")))
        return (await r.ask(task(SUM))).payload

    result = run(main())
    assert (result.status, result.output, result.turns) == ("succeeded", "It is 400.", 2)


def test_work_that_is_not_arithmetic_is_answered_in_one_turn():
    async def main():
        r = await rig(m=scripted(ScriptedTurn(text="It is tall.")))
        return (await r.ask(task("Describe the Eiffel Tower."))).payload

    result = run(main())
    assert (result.status, result.output, result.turns, result.tool_calls) == (
        "succeeded",
        "It is tall.",
        1,
        0,
    )


def test_the_worked_examples_result_given_as_an_answer_is_told_as_copied():
    """Qwen 1.5B, shown the worked calculator exchange (903 pens), answered "903 minutes"."""
    question = "How long does each show last?"
    told = next_correction(question, CALCULATOR, [], "903 minutes.", "Shows last fifty minutes.", 0)
    assert told is not None
    assert told.startswith("903 is the result of the worked example")
    # the task's own text has it, or this subtask's calculator returned it: it stands
    assert copied_example("903 seats.", "The hall has 903 seats.", []) is None
    assert (
        copied_example("903", "What is 24 * 37 + 15?", [Calculation("24 * 37 + 15", "903")]) is None
    )
    assert copied_example("904 pens.", "", []) is None
    # only while corrections are left
    assert next_correction(question, (), [], "903 minutes.", "", MAX_CORRECTIONS) is None


def test_a_slip_written_again_after_it_was_named_is_not_named_again():
    """Qwen 1.5B, told ``£215 * 58 + £140 * 7 is 13450, not 12,070``, wrote it twice more."""
    slip = "The bill is £215 * 58 + £140 * 7 = £12,070."
    told = next_correction(SUM, CALCULATOR, [], slip, "", 1, before=slip)
    assert told is None
    other = "The bill is £215 * 58 + £140 * 7 = £13,450 and 13,450 * 2 = 26,000."
    again = next_correction(SUM, CALCULATOR, [], other, "", 1, before=slip)
    assert again is not None
    assert "13,450 * 2 is 26900, not 26,000" in again


def test_the_answer_taken_has_its_wrong_working_recomputed_and_the_tasks_numbers_kept():
    answer, fixed = taken_answer("£215 * 58 + £140 * 7 = £12,070.", None, "58 pupils at £215")
    assert answer == "£215 * 58 + £140 * 7 = £13,450."
    assert [(s.expression, s.stated) for s in fixed] == [("£215 * 58 + £140 * 7", "12,070")]
    # a wrong number the task states is a fact the model may have used: nothing changes
    kept = "It holds 12 * 3 = 35 crates."
    assert taken_answer(kept, None, "The barn holds 35 crates.") == (kept, [])
    # a numberless answer after a correction loses to the corrected one, which is recomputed
    answer, fixed = taken_answer("I will check.", "17 * 23 = 381.", SUM)
    assert (answer, [s.stated for s in fixed]) == ("17 * 23 = 391.", ["381"])


def test_the_worked_examples_own_call_is_told_as_copied_unless_the_task_has_its_numbers():
    """Asked for litres of paint, Qwen 1.5B called the calculator with ``24 * 37 + 15``."""
    example = [Calculation("24*37 + 15", "903")]
    paint = "Walls of 5.1 m and 3.3 m, 2.5 m high, two coats: how many litres?"
    told = copied_example("903 litres of paint are needed.", paint, example)
    assert told is not None
    assert told.startswith("24 * 37 + 15 is the worked example shown before this task")
    assert copied_example("903 pens.", "Order 37 boxes of 24 pens and 15 more.", example) is None
    assert copied_example("903 m.", paint, [Calculation("21 * 43", "903")]) is None


def test_a_repeated_slip_is_recomputed_through_the_loop():
    """The slip named once, written again: no more turns spent, the calculator's value taken."""
    slip = "58 * 215 = 12,070 pounds."

    async def main():
        turns = (ScriptedTurn(text=slip), ScriptedTurn(text=slip))
        spec = AgentSpec(name="ada", role="worker", tools=CALCULATOR, model="m", max_turns=6)
        r = await rig(spec, m=scripted(*turns))
        result = (await r.ask(task("What do 58 pupils pay at £215 each?"))).payload
        await r.pool.remove("m")
        return result

    result = run(main())
    assert (result.status, result.output, result.turns) == (
        "succeeded",
        "58 * 215 = 12,470 pounds.",
        2,
    )


def test_an_answer_writing_a_named_slip_again_loses_to_the_answer_it_was_told_about():
    first = "* Mr Nakashima leads it.\n* Three nights.\n* £215 * 58 + £140 * 7 = £12,070."
    again = "The correct calculation is £215 * 58 + £140 * 7 = £12,070."
    answer, fixed = taken_answer(again, first, "58 pupils and 7 staff, £215 and £140 each")
    assert answer == "* Mr Nakashima leads it.\n* Three nights.\n* £215 * 58 + £140 * 7 = £13,450."
    assert len(fixed) == 1
    # a new answer with other working is the one kept
    other = "£215 * 58 = £12,470 and £140 * 7 = £980, so £13,450."
    assert taken_answer(other, first, "")[0] == other
