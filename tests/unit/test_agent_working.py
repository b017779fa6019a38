"""The working a model writes out, each step recomputed by the calculator's evaluator."""

import pytest

from raytroupe.actors.agent.working import recomputed, written_steps, wrong_steps


def _steps(text):
    return [(s.expression, s.stated, s.value, s.right) for s in written_steps(text)]


def test_plain_steps_are_recomputed_and_a_slip_is_found():
    text = "First 48 * 2.35 = 110.40, then 112.80 * 0.85 = 95.88, plus 6.50: 95.88 + 6.50 = 102.38"
    assert _steps(text) == [
        ("48 * 2.35", "110.40", 112.8, False),
        ("112.80 * 0.85", "95.88", 95.88, True),
        ("95.88 + 6.50", "102.38", 102.38, True),
    ]


def test_latex_working_is_read_as_arithmetic():
    text = (
        "\\[ \\text{Growth} = \\left( \\frac{2035 - 1480}{1480} \\right) \\times 100 \\]\n"
        "\\[ 2035 - 1480 = 555 \\]\n\\[ \\frac{555}{1480} \\approx 0.380 \\]\n"
        "\\[ 4.6 \\text{ m} \\times 2.75 \\text{ m} = 12.65 \\text{ m}^2 \\]"
    )
    assert _steps(text) == [
        ("2035 - 1480", "555", 555, True),
        ("((555) / (1480))", "0.380", 0.375, False),
        ("4.6 * 2.75", "12.65", 12.65, True),
    ]


@pytest.mark.parametrize(
    ("text", "right"),
    [
        ("555 / 1480 = 0.38", True),  # rounded to the places written
        ("555 / 1480 \u2248 0.375", True),
        ("555 / 1480 = 0.4", True),
        ("555 / 1480 = 0.36", False),
        ("555 / 1480 * 100 = 37.5%", True),
        ("555 / 1480 = 37.5%", True),  # a hundredth of the percentage
        ("555 / 1480 = 38%", True),
        ("555 / 1480 = 35%", False),
        ("\u20ac1,145 \u00d7 7 = \u20ac8,015", True),
        ("$12.50 x 3 = $37.50", True),
        ("\\(53 \\times \\$19.50 = \\$1048.50\\)", False),  # escaped dollars
        ("17 * 23 + 4 = 417", False),
    ],
)
def test_a_stated_number_is_right_when_it_is_the_value_to_its_places(text, right):
    (step,) = written_steps(text)
    assert step.right is right


@pytest.mark.parametrize(
    "text",
    [
        "Total = 12",  # no arithmetic on the left
        "x = 3",
        "The years 2023-2024 were busy.",  # no relation
        "48 * 2.35 = 110.40 * 0.85",  # the right side is another expression, not a number
        "1,145 + 60 * 11 = 1,145 + 660",  # nor is it a number inside one
        "a == b, 3 + 4 == 7",  # a comparison, not a step
        "3 + = 4",  # not readable
        "Speed = distance / time = 12",
    ],
)
def test_text_that_states_no_step_has_none(text):
    assert written_steps(text) == []


def test_chained_steps_count_each_link_with_an_operator():
    steps = written_steps("\u20ac110.40 \u00d7 (1 - 0.15) = \u20ac110.40 \u00d7 0.85 = \u20ac94.20")
    assert [(s.expression, s.stated, s.right) for s in steps] == [
        ("\u20ac110.40 * 0.85", "94.20", False)
    ]


def test_a_long_answer_yields_a_bounded_number_of_steps():
    text = "\n".join(f"{i} + 1 = {i + 1}" for i in range(500))
    assert len(written_steps(text)) == 40
    assert wrong_steps(text) == []


def test_hostile_text_is_read_without_error():
    for text in (
        "9" * 5000 + " ** 99999 = 1",
        "(" * 3000 + "1" + ")" * 3000 + " + 1 = 2",
        "\\frac{" * 50 + "1" + "}{2}" * 50 + " = 1",
        "1 / 0 = 1",
        "= = =",
        "1+" * 8000 + "1x = 2",  # a long run ending in a letter: no step, a bounded scan
    ):
        written_steps(text)  # no exception: steps the calculator cannot read are not steps


def test_a_step_at_the_end_of_a_long_line_is_found_and_a_run_ending_in_a_word_is_none():
    assert [s.expression for s in written_steps("so " * 3000 + "17 * 23 = 391")] == ["17 * 23"]
    assert written_steps("1+" * 8000 + "1x = 2") == []


def test_a_step_starts_after_the_sentence_or_clause_before_it():
    steps = written_steps("17 * 23 = 391. 391 + 4 = 395, and in 2023, 1480 + 555 = 2035")
    assert [(s.expression, s.right) for s in steps] == [
        ("17 * 23", True),
        ("391 + 4", True),
        ("1480 + 555", True),
    ]


@pytest.mark.parametrize(
    ("text", "mended"),
    [
        ("£215 * 58 + £140 * 7 = £12,070.", "£215 * 58 + £140 * 7 = £13,450."),
        (  # the slip carried on: the next step and the total change with it
            "53 * 19.50 = 1048.50, less 20%: 1048.50 * 0.8 = 838.80. Total $838.80.",
            "53 * 19.50 = 1033.50, less 20%: 1033.50 * 0.8 = 826.80. Total $826.80.",
        ),
        ("54 / 18 + 33 / 22 + 25 / 60 = 4.5 hours", "54 / 18 + 33 / 22 + 25 / 60 = 4.92 hours"),
        ("The share is 555 / 1480 = 36%.", "The share is 555 / 1480 = 37.5%."),
        ("The rise is 12 + 3 = 16%.", "The rise is 12 + 3 = 15%."),  # a percentage as it is
        (
            r"\(48 \times 2.35 = 112.90\), so 112.90 in all",
            r"\(48 \times 2.35 = 112.80\), so 112.80 in all",
        ),
        ("17 * 23 = 391 and 391 + 4 = 395.", "17 * 23 = 391 and 391 + 4 = 395."),  # right
        ("3 * 4 = 12, 10 + 3 = 12", "3 * 4 = 12, 10 + 3 = 12"),  # no value fits both: as written
        ("It holds 12 * 3 = 35 crates.", "It holds 12 * 3 = 35 crates."),  # 35 is the task's
    ],
)
def test_wrong_working_is_recomputed_where_it_can_be(text, mended):
    answer, fixed = recomputed(text, "The barn holds 35 crates.")
    assert answer == mended
    assert bool(fixed) == (answer != text)
    assert wrong_steps(answer) == [] or answer == text


def test_recomputing_hostile_working_is_bounded():
    text = " ".join(f"{i} + 1 = {i + 2}," for i in range(500))  # every step wrong, chained
    answer, fixed = recomputed(text, "")
    assert len(fixed) <= 8
    assert answer == text or not wrong_steps(answer)
