"""The held-out bench tasks' checks: fair to the forms of a right answer, strict on the value."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from local_tasks_heldout import HELDOUT

# per task, in order: answers that must pass, answers that must not
SAMPLES: list[tuple[list[str], list[str]]] = [
    (["She pays $351.05.", "351.05", "Total: 351.050 dollars"], ["$351.5", "1351.05", "351.06"]),
    (["The final price is $331.10.", "331.1", "$331.10 after tax"], ["$331.11", "308", "331"]),
    (["1,755 pages", "It prints 1755 pages.", "1755.0"], ["1775", "11755", "1,7550"]),
    (["It grew by 10.8%.", "10.80 %", "about 10.8 percent"], ["10.08%", "110.8%", "10.9%"]),
    (["13,253 screws", "13253"], ["13,235", "132,530", "13253.5"]),
    (["The fuel costs 162.80 euros.", "€162.8"], ["162.08", "163", "1162.80"]),
    (
        [
            '{"name": "Tomas Reyes", "age": 41, "from_city": "Leeds", "to_city": "Ostrava"}',
            "```json\n{'name':'Tomas  Reyes','age':'41',"
            "'from_city':'Leeds','to_city':'Ostrava'}\n```",
        ],
        [
            '{"name": "Tomas Reyes", "age": 41, "from_city": "Ostrava", "to_city": "Leeds"}',
            '{"name": "Tomas Reyes", "age": 14, "from_city": "Leeds", "to_city": "Ostrava"}',
        ],
    ),
    (
        [
            '{"invoice": "INV-2291", "vendor": "Keller Tools", "date": "2024-03-18", '
            '"amount": 1480.00}',
            '{"invoice":"INV-2291","vendor":"Keller Tools","date":"2024-03-18","amount":"1,480"}',
        ],
        [
            '{"invoice": "INV-2291", "vendor": "Keller Tools", "date": "2024-03-18", '
            '"amount": 148.0}'
        ],
    ),
    (
        [
            '{"flight": "LX 318", "origin": "Zurich", "destination": "London Heathrow", '
            '"departure": "07:45", "gate": "B34"}',
            '{"flight": "LX318", "origin": "Zürich", "destination": "Heathrow", '
            '"departure": "7:45", "gate": "B34"}',
        ],
        [
            '{"flight": "LX 318", "origin": "Zurich", "destination": "London Heathrow", '
            '"departure": "08:30", "gate": "B34"}'
        ],
    ),
    (
        [
            '{"name": "Dr. Amara Osei", "email": "a.osei@northfield.example", '
            '"phone": "+44 20 7946 0321", "department": "Radiology"}',
            '{"name": "Amara Osei", "email": "a.osei@northfield.example", '
            '"phone": "+442079460321", "department": "Radiology"}',
        ],
        [
            '{"name": "Amara Osei", "email": "a.osei@northfield.example", '
            '"phone": "+44 20 7946 0312", "department": "Radiology"}'
        ],
    ),
    (
        [
            '{"product": "Vireo X2", "weight_g": 254, "price_usd": 129.99, '
            '"colors": ["black", "silver"]}',
            '{"product": "Vireo X2 headphones", "weight_g": 254, "price_usd": 129.99, '
            '"colors": ["silver", "black"]}',
        ],
        [
            '{"product": "Vireo X2", "weight_g": 254, "price_usd": 129.9, '
            '"colors": ["black", "silver"]}',
            '{"product": "Vireo X2", "weight_g": 254, "price_usd": 129.99, "colors": ["black"]}',
        ],
    ),
    (
        [
            '{"booking": "7Q2K", "adults": 3, "children": 2, "nights": 4, "room": 214}',
            '{"booking": "7Q2K", "adults": "3", "children": "2", "nights": 4, "room": "214"}',
        ],
        ['{"booking": "7Q2K", "adults": 2, "children": 3, "nights": 4, "room": 214}'],
    ),
    (
        [
            "1. Selby 2. Leda Fontaine",
            "Selby; Fontaine (postcards of a lighthouse)",
            "The Orvell Museum is now located in Selby. The founder was Leda Fontaine, who "
            "donated 212 of her works. The gift shop sells postcards of a lighthouse.",
        ],
        [
            "1. Marrick 2. Leda Fontaine",
            "Selby, Fontaine. The Orvell Museum opened in 1964 in the town of Marrick. Leda "
            "Fontaine gave it 212 of her works. The gift shop sells postcards of a lighthouse.",
        ],
    ),
    (["Ines Varga; Saturday.", "1. Varga 2. Saturdays"], ["Paul Dreyer; Saturday"]),
    (["Rice crackers; 340 people."], ["Rice crackers; 95 people.", "Oat biscuits; 340"]),
    (["1. In Turin. 2. Halvard."], ["1. Delft 2. Halvard", "Turin; Ostra"]),
    (["Chemistry; in 2015 and 2020."], ["Chemistry; in 2015 and 2017.", "Chemistry; 2020"]),
    (["The Gull Inn; by seaplane.", "Gull Inn, sea-plane"], ["Gull Inn; by ferry"]),
    (["negative", "Negative."], ["positive", "negative or neutral"]),
    (["shipping"], ["billing", "shipping or account"]),
    (["German"], ["English", "German (or English)"]),
    (["spam", "Spam"], ["complaint", "spam, not a meeting request"]),
    (["science"], ["politics"]),
    (["mass"], ["length", "mass or time"]),
    (
        ["1. Norvent 2. Harlund 3. 2017 4. 36 x 4.2 = 151.2 MW"],
        [
            "1. Norvent 2. Harlund 3. 2017 4. 151 MW",
            "Norvent, above Aldby; Harlund by a 48 km cable; 2017; 151.2; wool hats",
        ],
    ),
    (
        ["1. Pellucid Labs 2. End-to-end encryption 3. Frankfurt and Helsinki 4. 355,200 GB"],
        ["1. Pellucid Labs 2. encrypted 3. Frankfurt and Helsinki 4. 3,700 GB"],
    ),
    (["1. Goldfinch 2. 1998 3. 472.5 kg"], ["1. Goldfinch 2. 1998 3. 472 kg"]),
]


def test_kinds_and_sizes() -> None:
    kinds = Counter(t.kind for t in HELDOUT)
    assert kinds == {"word_problem": 6, "extraction": 6, "two_questions": 6,
                     "classification": 6, "multi_part": 3}  # fmt: skip
    assert len(SAMPLES) == len(HELDOUT)


@pytest.mark.parametrize(("index", "task"), list(enumerate(HELDOUT)))
def test_right_answers_pass_and_wrong_ones_do_not(index: int, task) -> None:
    right, wrong = SAMPLES[index]
    for answer in right:
        assert re.search(task.expect, answer, re.IGNORECASE), answer
    for answer in wrong:
        assert not re.search(task.expect, answer, re.IGNORECASE), answer


@pytest.mark.parametrize("task", HELDOUT)
def test_the_task_text_itself_does_not_pass(task) -> None:
    """An answer that only repeats the task is wrong, also with the right answer after it."""
    assert not re.search(task.expect, task.text, re.IGNORECASE)
    right = SAMPLES[HELDOUT.index(task)][0][0]
    if task.kind in {"two_questions", "multi_part", "classification"}:
        assert not re.search(task.expect, f"{task.text}\n{right}", re.IGNORECASE)
