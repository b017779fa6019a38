"""What a task's text says about its shape: its independent parts, whether it asks for a number."""

import pytest

from raytroupe.protocols.task_shape import (
    Part,
    TaskParts,
    mentions_number,
    needs_arithmetic,
    numbers_in,
    restates_numbers,
    stands_alone,
    task_parts,
)

# -- task_parts -----------------------------------------------------------------------------


def test_numbered_questions_are_parts_with_their_markers_and_the_shared_text_as_context():
    task = (
        "Our shop sells apples at 2 dollars each.\n"
        "1. How many apples do 10 dollars buy?\n"
        "2) What colour are ripe apples?\n"
        "(3) Where do apples grow?\n"
        "Answer briefly."
    )
    shape = task_parts(task)
    assert shape.split
    assert shape.parts == (
        Part(marker="1.", text="How many apples do 10 dollars buy?"),
        Part(marker="2)", text="What colour are ripe apples?"),
        Part(marker="(3)", text="Where do apples grow?"),
    )
    assert shape.context == "Our shop sells apples at 2 dollars each.\nAnswer briefly."


def test_bulleted_questions_are_parts_and_blank_lines_between_them_do_not_end_the_list():
    task = "- What is the capital of France?\n\n* Who wrote Hamlet?\n\u2022 When did Rome fall?"
    shape = task_parts(task)
    assert [(p.marker, p.text) for p in shape.parts] == [
        ("-", "What is the capital of France?"),
        ("*", "Who wrote Hamlet?"),
        ("\u2022", "When did Rome fall?"),
    ]
    assert shape.context == ""


@pytest.mark.parametrize(
    ("lines", "markers"),
    [
        (("[1] Who is the commodore?", "[2] When do they race?"), ["[1]", "[2]"]),
        (("a) Who set it up?", "b) What does it sell?"), ["a)", "b)"]),
        (("(a) Who set it up?", "(b) What does it sell?"), ["(a)", "(b)"]),
        (("a. Who set it up?", "b. What does it sell?"), ["a.", "b."]),
        (("B) Who set it up?", "C) What does it sell?"), ["B)", "C)"]),
    ],
)
def test_lettered_and_bracketed_questions_are_parts(lines, markers):
    shape = task_parts("The club sails on the loch.\nPlease answer:\n" + "\n".join(lines))
    assert [p.marker for p in shape.parts] == markers
    assert shape.context == "The club sails on the loch."


def test_items_opening_with_a_question_word_are_questions_without_their_question_marks():
    task = (
        "The cinema opened in 1931.\nI need to know\n\u2022 who chooses the films,\n"
        "\u2022 what happens on Thursdays,\n\u2022 and by what percentage admissions went up."
    )
    assert [p.text for p in task_parts(task).parts] == [
        "who chooses the films,",
        "what happens on Thursdays,",
        "and by what percentage admissions went up.",
    ]
    # one item that is not a question keeps the list whole, without a heading asking for it
    assert not task_parts("Notes:\n- who we are\n- our prices in 2024").split
    # under a heading that asks, like "tell me:", the items are parts
    told = task_parts("The farm has 1,380 hens.\nTell me:\n- the owner's name\n- the price")
    assert [p.text for p in told.parts] == ["the owner's name", "the price"]


@pytest.mark.parametrize("heading", ["Questions:", "Tasks:", "Answer the following:"])
def test_items_under_a_heading_that_asks_for_them_are_parts_though_not_questions(heading):
    task = f"Notes: Ray began at Berkeley in 2016.\n{heading}\n1. Name the city.\n2. Name the year."
    shape = task_parts(task)
    assert [p.text for p in shape.parts] == ["Name the city.", "Name the year."]
    assert shape.context == "Notes: Ray began at Berkeley in 2016."  # the heading is not kept


@pytest.mark.parametrize(
    "task",
    [
        "Sort these numbers:\n- 5\n- 3\n- 9",
        "Summarise the list.\n- apples\n- pears\n- plums",
        "Help me:\n- Compute 17 * 23 + 4\n- Describe the tower",  # a heading asking for nothing
        "- Say hello.\n- Say goodbye.",  # instructions, not questions, and no heading
    ],
)
def test_a_list_of_data_or_steps_is_one_part(task):
    assert task_parts(task) == TaskParts(parts=(Part(marker="", text=task),), context="")


def test_two_lists_of_questions_are_one_part():
    task = "- What is A?\n- What is B?\n\nAnd also:\n- What is C?\n- What is D?"
    shape = task_parts(task)
    assert not shape.split
    assert shape.parts == (Part(marker="", text=task),)


@pytest.mark.parametrize(
    "second",
    [
        "Using the answer to question 1, what is it doubled?",
        "What is the result of 1 times 3?",
        "Is the number above even?",
        "What is that result squared?",
    ],
)
def test_items_that_lean_on_each_other_are_one_part(second):
    task = f"1. What is 2 + 2?\n2. {second}"
    assert task_parts(task).parts == (Part(marker="", text=task),)


def test_the_number_of_something_is_a_quantity_not_a_reference_to_another_item():
    task = (
        "In 2023 the club had 1,480 members and in 2024 it had 2,035.\nAnswer these:\n"
        "1. Who founded the club?\n2. By what percentage did the number of members grow?"
    )
    shape = task_parts(task)
    assert [p.text for p in shape.parts] == [
        "Who founded the club?",
        "By what percentage did the number of members grow?",
    ]
    # the number (or the result, the value) on its own still points at another item
    assert not task_parts("1. What is 2 + 2?\n2. Is the number even?").split
    assert not task_parts("1. What is 2 + 2?\n2. What is the value doubled?").split


def test_one_item_is_not_a_list():
    assert not task_parts("Questions:\n1. What is the capital of France?").split


# -- needs_arithmetic -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "17 * 23 + 4",
        "Compute 17 * 23 + 4",
        "What is 15% of 80?",
        "What is 3 x 4?",
        "What is 2^10?",
        "What is 120 - 45?",
        "A box holds 12 eggs. How many eggs are in 7 boxes?",
        "Pens cost 3 dollars and we buy 14. What is the total cost?",
        "Tom has 5 apples and Ann has 8. How many do they have altogether?",
        "A car uses 6.4 litres per 100 km and fuel costs 1.85 a litre. What does a 950 km "
        "trip cost?",
        "Sales went from 4,200 to 4,830 units. By what percentage did they grow?",
        "A runner covers 21 km in 105 minutes. At what speed, in km/h, does she run?",
        "Rent is 950 a month and parking 75. Find the total for 12 months.",
        "Each crate holds 24 jars and 17 crates ship. Figure out the jars shipped.",
        "Four of us spent 86.40 on lunch. Split evenly, what does each of us owe?",
        "A bulb uses 9 W instead of 60 W for 5 hours a day. What does it save in a year?",
        "4 nights at 85 euros a night: can you tell me what the stay will cost me?",
    ],
)
def test_expressions_and_word_problems_need_arithmetic(text):
    assert needs_arithmetic(text)


@pytest.mark.parametrize(
    "text",
    [
        "Summarise the 2024-2025 season.",
        "The new build gave a 2x speedup. Describe why.",
        "Classify this review as positive or negative: 'Paid $40 total for 2 shirts, great!'",
        "Extract the name and age from: Bob is 32",
        "Who wrote Hamlet?",
        "How many moons does Mars have?",  # a count to know, with no numbers to compute from
        "Describe the 3 laws of motion.",
        "What does the 2019 report say about its 4 regions?",  # asks for words, not a sum
        "Find the 2 typos in: 'Teh cat sat on teh mat.'",
    ],
)
def test_texts_that_ask_for_no_computed_number_need_no_arithmetic(text):
    assert not needs_arithmetic(text)


@pytest.mark.parametrize(
    ("text", "alone"),
    [
        ("How many requests are 17 * 23 + 4 requests?", True),
        ("What is 14 * 3?", True),
        ("What is (120 - 45) / 5?", True),
        ("What is 15% of 80?", False),  # of what, may be elsewhere: kept with its text
        ("What is 15% of the total above?", False),
        ("Multiply 3 * 4 by the price given.", False),
        ("What is 3 * 4 plus the result of question 2?", False),
        ("What is the total cost of 5 pens?", False),
        ("Where did Ray begin?", False),
        ("Summarise the 2024 - 2025 season.", False),
    ],
)
def test_only_arithmetic_written_out_in_full_stands_alone(text, alone):
    assert stands_alone(text) is alone


# -- numbers_in, mentions_number ------------------------------------------------------------


def test_numbers_are_read_as_written_in_prose():
    assert numbers_in("Total: 1,234.5 from -3 and 12 items (v2 aside).") == [1234.5, -3.0, 12.0]
    assert numbers_in("no numbers here") == []


@pytest.mark.parametrize(
    ("text", "value", "stated"),
    [
        ("The answer is 395.", 395.0, True),
        ("It comes to 1,234.", 1234.0, True),
        ("It comes to 1234.0", 1234.0, True),
        ("About 3.14", 3.14159, True),  # rounded to 2 places
        ("Roughly 3.1", 3.14159, True),  # rounded to 1 place
        ("That is 0.33", 1 / 3, True),
        ("The answer is 394.", 395.0, False),
        ("About 3.15", 3.14159, False),  # not its rounding
        ("It is 3.142", 3.14159, False),  # 3 places: more than the check reads
        ("No number at all.", 395.0, False),
    ],
)
def test_mentions_number_accepts_the_value_or_its_rounding_to_two_places(text, value, stated):
    assert mentions_number(text, value) is stated


@pytest.mark.parametrize(
    ("answer", "restates"),
    [
        ("Aged for six weeks, from 92 cows.", True),
        ("It won gold in 1,997.", True),  # as written or with separators
        ("Six.", True),
        ("Aged for 6 weeks.", True),  # six in the text, 6 in the answer: one number
        ("1. Jersey cows.\n2. Six weeks, from 92 cows.", True),  # list markers are layout
        ("Ninety-two cows.", False),  # compound number words are not read
        ("552 weeks.", False),
        ("Six weeks and 93 cows.", False),
        ("Seven weeks.", False),
        ("No number at all.", False),
    ],
)
def test_an_answer_restates_numbers_only_when_the_text_states_each(answer, restates):
    source = "The dairy has 92 cows. Each wheel is aged for six weeks; gold in 1997."
    assert restates_numbers(answer, source) is restates
