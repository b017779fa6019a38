"""The second held-out set's checks: fair to the forms of a right answer, strict on the value."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from local_tasks import Task
from local_tasks_heldout2 import HELDOUT2, ONE_PART_KINDS

# per task, in order: answers that must pass, answers that must not
SAMPLES: list[tuple[list[str], list[str]]] = [
    # word problems
    (
        ["The order costs her €102.38.", "102.38", "€102.380 in total"],
        ["€102.83", "1102.38", "102.385", "€101.88"],
    ),
    (["44 minutes", "It will be full in 44 min.", "44.0"], ["45 minutes", "440", "4.4", "144"]),
    (
        ["It grew by 12.56%.", "12.560 %", "about 12.56 percent"],
        ["12.65%", "112.56%", "12.5%", "12.566%"],
    ),
    (
        ["She pays £21,545 in all.", "21545", "£21,545.00"],
        ["£21,454", "£215,450", "21,5450", "£21,270"],
    ),
    (["You need 8.25 litres.", "8.250 L"], ["8.2 litres", "8.52", "18.25", "8.255"]),
    # extraction
    (
        [
            '{"tracking": "TRK-40817", "origin": "Gdansk", "destination": "Lyon", '
            '"weight_kg": 7.3}',
            "```json\n{'tracking':'TRK40817','origin':'Gdańsk depot','destination':'Lyon',"
            "'weight_kg':'7.30'}\n```",
        ],
        [
            '{"tracking": "TRK-40817", "origin": "Lyon", "destination": "Gdansk", '
            '"weight_kg": 7.3}',
            '{"tracking": "TRK-40871", "origin": "Gdansk", "destination": "Lyon", '
            '"weight_kg": 7.3}',
            '{"tracking": "TRK-40817", "origin": "Gdansk", "destination": "Lyon", '
            '"weight_kg": 7.03}',
        ],
    ),
    (
        [
            '{"company": "Halvorsen Marine", "role": "Senior Welder", "city": "Bergen", '
            '"hourly_pay_nok": 412}',
            '{"company":"Halvorsen Marine","role":"senior welder","city":"Bergen",'
            '"hourly_pay_nok":"412 NOK"}',
        ],
        [
            '{"company": "Halvorsen Marine", "role": "Senior Welder", "city": "Bergen", '
            '"hourly_pay_nok": 421}',
            '{"company": "Halvorsen Marine", "role": "Welder", "city": "Bergen", '
            '"hourly_pay_nok": 412}',
            '{"company": "Halvorsen Marine", "role": "Senior Welder", "city": "Bergen", '
            '"hourly_pay_nok": 4120}',
        ],
    ),
    (
        [
            '{"servings": 6, "prep_minutes": 25, "bake_minutes": 40, "oven_celsius": 190}',
            "{'servings': '6', 'prep_minutes': '25', 'bake_minutes': '40', 'oven_celsius': '190'}",
        ],
        [
            '{"servings": 6, "prep_minutes": 40, "bake_minutes": 25, "oven_celsius": 190}',
            '{"servings": 6, "prep_minutes": 25, "bake_minutes": 40, "oven_celsius": 1900}',
            '{"servings": 16, "prep_minutes": 25, "bake_minutes": 40, "oven_celsius": 190}',
        ],
    ),
    (
        [
            '{"name": "Noor Haddad", "patient_id": "P-55309", "weekday": "Friday", '
            '"time": "10:15"}',
            '{"name":"Noor Haddad","patient_id":"P55309","weekday":"friday","time":"10:15 AM"}',
        ],
        [
            '{"name": "Noor Haddad", "patient_id": "P-55390", "weekday": "Friday", '
            '"time": "10:15"}',
            '{"name": "Noor Haddad", "patient_id": "P-55309", "weekday": "Friday", '
            '"time": "10:51"}',
            '{"name": "Noor Haddad", "patient_id": "P-55309", "weekday": "Thursday", '
            '"time": "10:15"}',
        ],
    ),
    (
        [
            '{"receipt_number": "88214", "store": "Corner Hardware", "total": 43.60, '
            '"payment_method": "card"}',
            '{"receipt_number": "#88214", "store": "Corner Hardware", "total": "$43.6", '
            '"payment_method": "Card"}',
            '{"receipt_number": 88214, "store": "Corner Hardware", "total": 43.6, '
            '"payment_method": "credit card"}',
        ],
        [
            '{"receipt_number": "88214", "store": "Corner Hardware", "total": 43.06, '
            '"payment_method": "card"}',
            '{"receipt_number": "82214", "store": "Corner Hardware", "total": 43.60, '
            '"payment_method": "card"}',
            '{"receipt_number": "88214", "store": "Corner Hardware", "total": 43.60, '
            '"payment_method": "cash"}',
            '{"receipt_number": "88214", "store": "Corner Hardware", "total": 143.60, '
            '"payment_method": "card"}',
        ],
    ),
    # two questions
    (
        [
            "Oren Maddox started it; the lanterns float on Lake Cullis.",
            "1. Maddox 2. Cullis",
            "Maddox, a schoolteacher, began it in 1987; Lake Cullis.",
        ],
        [
            "Oren Maddox; Lake Brennick",
            "Maddox, Cullis. The festival started in 1987 and draws about 2,300 visitors; "
            "the bakery sells rye bread.",
        ],
    ),
    (
        [
            "It moved in 2019, and the company makes frozen dumplings.",
            "2019; dumplings",
        ],
        [
            "In 2021; frozen dumplings.",
            "2019; frozen pizza",
            "In 2019 it moved; it makes dumplings. Mirela Popescu runs its 640 staff and "
            "orange vans.",
        ],
    ),
    (
        ["Dita Lindqvist coaches them, on the River Oyle.", "Lindqvist; Oyle"],
        [
            "Dita Lindqvist; the River Harrow",
            "Lindqvist, Oyle; cups in 2008, 2013 and 2022, blue door",
        ],
    ),
    (
        ["It feeds only on wild thyme and was found in the Vask Hills.", "thyme; Vask Hills"],
        ["wild thyme; Pemberton", "Thyme, Vask Hills, 2016, 38 mm, 9,400 books"],
    ),
    (
        [
            "It gets in at 07:05, and chef Baptiste Rowe runs the dining car.",
            "7:05 a.m.; Rowe",
            "07.05, Baptiste Rowe",
        ],
        [
            "21:40; Baptiste Rowe",
            "07:15; Rowe",
            "17:05; Rowe",
            "07:05; Rowe. It leaves at 21:40, has 11 carriages; the clock tower dates from 1902.",
        ],
    ),
    # classification
    (["high", "High urgency."], ["medium", "high or medium", "low"]),
    (["mammal", "Mammal."], ["reptile", "mammal or amphibian", "bird"]),
    (["software", "Software"], ["equipment", "software (or equipment)"]),
    (
        ["feature_request", "Feature request", "feature-request"],
        ["bug_report", "feature_request, maybe praise"],
    ),
    (["formal", "Formal."], ["informal", "formal, not informal"]),
    # multi-part
    (
        [
            "1. Una Pask 2. 1958 3. 16,130 books",
            "1. Pask\n2. In 1958.\n3. 14,600 + 85 x 18 = 16130",
        ],
        [
            "1. Una Pask 2. 1958 3. 16,310 books",
            "1. Una Pask 2. 1985 3. 16,130",
            "1. Pask 2. 1958 3. 161,300",
            "Pask; 1958 on Calder Street; 16,130; reading garden; lemon cake",
        ],
    ),
    (
        [
            "1. The Ferrant family 2. Thursday to Sunday 3. 13,172 bottles 4. Rosal and Velha",
            "1. Ferrant\n2. Thursday-Sunday\n3. 18.5 x 712 = 13172\n4. Rosal, Velha",
        ],
        [
            "1. Ferrant 2. Thursday to Sunday 3. 13,712 bottles 4. Rosal and Velha",
            "1. Ferrant 2. Thursday to Sunday 3. 13,172 bottles 4. Rosal",
            "Ferrant since 1974; 31 hectares; Thursday to Sunday; 13,172; Rosal and Velha; "
            "a stone owl",
        ],
    ),
    (
        [
            "1. Kingfisher Coaches 2. Mill Lane 3. £46.90",
            "1. Kingfisher\n2. On Mill Lane\n3. (26.50 - 19.80) x 7 = £46.9",
        ],
        [
            "1. Kingfisher Coaches 2. Mill Lane 3. £46.09",
            "1. Kingfisher Coaches 2. Mill Lane 3. £6.70",
            "1. Kingfisher Coaches 2. Amberley 3. £46.90",
            "Kingfisher, Mill Lane, £46.90; Amberley to Costa Fen, 34 stops, green jackets",
        ],
    ),
    (
        [
            "1. Professor Adaeze Okonjo 2. Coral bleaching 3. The Petrel 4. 37.5%",
            "1. Okonjo\n2. coral bleaching\n3. Petrel\n4. (2035 - 1480) / 1480 = 37.50 %",
        ],
        [
            "1. Okonjo 2. Coral bleaching 3. Petrel 4. 27.5%",
            "1. Okonjo 2. Coral bleaching 3. Petrel 4. 137.5%",
            "1. Okonjo 2. Coral reefs 3. Petrel 4. 37.5%",
            "Okonjo, founded 2009, nine members; coral bleaching; Petrel; 37.5%; coffee machine",
        ],
    ),
    (
        [
            "1. Theo Brandt 2. On the first Saturday of June 3. $1,805",
            "1. Brandt\n2. first Saturday in June\n3. 3,910 + 1,250 - 3,355 = 1805",
        ],
        [
            "1. Theo Brandt 2. first Saturday of June 3. $1,850",
            "1. Theo Brandt 2. first Saturday of July 3. $1,805",
            "1. Theo Brandt 2. first Saturday of June 3. $18,050",
            "Brandt; since 1996, first Saturday of June, close at 18:00; $1,805; a paper crane",
        ],
    ),
]


def test_kinds_and_sizes() -> None:
    kinds = Counter(t.kind for t in HELDOUT2)
    assert kinds == {"word_problem": 5, "extraction": 5, "two_questions": 5,
                     "classification": 5, "multi_part": 5}  # fmt: skip
    assert len(SAMPLES) == len(HELDOUT2)
    assert len({t.text for t in HELDOUT2}) == len(HELDOUT2)


def test_every_kind_but_multi_part_is_one_part() -> None:
    """The bench counts tasks of one part by kind: the new set uses the same kinds."""
    assert {t.kind for t in HELDOUT2} - {"multi_part"} == ONE_PART_KINDS


@pytest.mark.parametrize(("index", "task"), list(enumerate(HELDOUT2)))
def test_right_answers_pass_and_wrong_ones_do_not(index: int, task: Task) -> None:
    right, wrong = SAMPLES[index]
    assert task.expect.startswith(r"(?s)\A")
    for answer in right:
        assert re.search(task.expect, answer, re.IGNORECASE), answer
    for answer in wrong:
        assert not re.search(task.expect, answer, re.IGNORECASE), answer


@pytest.mark.parametrize("task", HELDOUT2)
def test_the_task_text_itself_does_not_pass(task: Task) -> None:
    """An answer that only repeats the task is wrong, also with the right answer after it."""
    assert not re.search(task.expect, task.text, re.IGNORECASE)
    right = SAMPLES[HELDOUT2.index(task)][0][0]
    if task.kind in {"two_questions", "multi_part", "classification"}:
        assert not re.search(task.expect, f"{task.text}\n{right}", re.IGNORECASE)
