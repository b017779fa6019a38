r"""More held-out tasks for real local models (``bench/local_models.py --parts compare``).

Written after the first round of tuning on ``bench/local_tasks.py`` and
``bench/local_tasks_heldout.py``, blind to the orchestrator's heuristics (how it spots
arithmetic, splits lists of questions, routes to the calculator): phrased as people phrase
requests, in varied forms (questions, imperatives, a question inside a sentence; currency
symbols, units, thousands separators). Keep them out of prompts, plans and examples, or they
stop measuring anything.

Same :class:`~local_tasks.Task` shape, same kinds (five of each) and the same checks as the
first held-out set (see ``local_tasks_heldout``'s docstring): ``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text; numbers with or without thousands commas and
trailing decimal zeros, never inside a longer number; JSON values checked one by one, spacing
and quote style free; one label and no other; for ``two_questions`` and ``multi_part``, an
answer holding all three echo markers (facts no question asks for, one in the passage's last
sentence) is an echo of the passage, not an answer. Every pattern is anchored (``\A``).
"""

from __future__ import annotations

from local_tasks import Task
from local_tasks_heldout import ONE_PART_KINDS, _all, _field, _label, _num, _number, _text

__all__ = ["HELDOUT2", "ONE_PART_KINDS"]

_URGENCY = ("low", "medium", "high")
_ANIMAL = ("mammal", "bird", "reptile", "fish", "amphibian")
_EXPENSE = ("travel", "equipment", "software", "catering")
_FEEDBACK = ("bug_report", "feature_request", "billing_question", "praise")
_TONE = ("formal", "informal")

_FESTIVAL = (
    "The village of Brennick holds a lantern festival every October. It was started in 1987 by "
    "a schoolteacher, Oren Maddox, and the lanterns are floated on Lake Cullis. About 2,300 "
    "visitors came last year. The village bakery is known for its rye bread."
)
_TESSALY = (
    "Tessaly Foods moved its head office from Ardmore to Kelsey Bay in 2019. Its chief "
    "executive, Mirela Popescu, joined in 2021. The company employs 640 people and makes frozen "
    "dumplings. Its delivery vans are painted orange."
)
_HERONS = (
    "The Harrowgate Herons have won the regional rowing cup three times, in 2008, 2013 and "
    "2022. Their coach since 2015 has been Dita Lindqvist, and the crew trains on the River "
    "Oyle at 6 a.m. on weekdays. The clubhouse has a blue door."
)
_MOTH = (
    "Researchers at the Pemberton Institute found a new moth, Eudora kestrelia, in the Vask "
    "Hills in 2016. It has a wingspan of 38 mm and feeds only on wild thyme. The institute's "
    "library holds 9,400 books."
)
_TRAIN = (
    "The night train from Sollen to Varga Point leaves at 21:40 and gets in at 07:05. It has "
    "11 carriages, one of them a dining car run by the chef Baptiste Rowe. Sollen station's "
    "clock tower was built in 1902."
)
_LIBRARY = (
    "Greyfield Library opened in 1958 on Calder Street. Its head librarian is Una Pask; it "
    "holds 14,600 books today and adds 85 new ones every month. The building has three floors "
    "and a reading garden. Its café is known for lemon cake."
)
_VINEYARD = (
    "Castell Brava is a small vineyard, owned by the Ferrant family since 1974, on an estate of "
    "31 hectares. It grows two grape varieties, Rosal and Velha. Last autumn's harvest came to "
    "18.5 tonnes, and each tonne makes 712 bottles of wine. The cellar door is open Thursday "
    "to Sunday. A stone owl stands by the front gate."
)
_BUS = (
    "Route 27 runs between Amberley and Costa Fen with 34 stops. It is operated by Kingfisher "
    "Coaches from their depot on Mill Lane. A single ticket costs £2.65 and a weekly pass "
    "costs £19.80. Drivers on the route wear green jackets."
)
_LAB = (
    "The Okonjo Lab at Farhaven University studies coral bleaching. It was founded in 2009, is "
    "led by Professor Adaeze Okonjo and has nine members. In 2023 the lab tagged 1,480 coral "
    "colonies, and in 2024 it tagged 2,035. Its research boat is called the Petrel. The lab's "
    "coffee machine was a gift from a former student."
)
_FAIR = (
    "The Marlow Street Fair, first held in 1996, takes place on the first Saturday of June. "
    "This year 46 stalls are booked at $85 each, and the town council adds a grant of $1,250. "
    "Costs come to $2,740 for the stage and $615 for cleaning. The organiser is Theo Brandt, "
    "and stalls must close by 18:00. Last year's mascot was a giant paper crane."
)


def _listed(passage: str, lead: str, *questions: str) -> str:
    listed = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
    return f"{passage}\n{lead}\n{listed}"


HELDOUT2: tuple[Task, ...] = (
    # word problems: several steps, an exact value that is hard to get in one's head
    Task(
        "word_problem",
        "Marta is ordering 48 croissants at €2.35 each for an office breakfast. The bakery "
        "takes 15% off orders of more than 40 pieces and then adds a €6.50 delivery charge. "
        "What does the order cost her?",
        r"(?s)\A(?=.*" + _number("102.38") + ")",
    ),
    Task(
        "word_problem",
        "Our rainwater tank holds 3,750 litres and has 890 litres in it right now. The pump "
        "pushes in 73 litres a minute, but a cracked seal loses 8 litres a minute. How long "
        "until the tank is full, in minutes?",
        r"(?s)\A(?=.*" + _number("44") + ")",
    ),
    Task(
        "word_problem",
        "The chess club had 1,250 members in January and 1,407 in December. By what "
        "percentage did its membership grow over the year?",
        r"(?s)\A(?=.*" + _number("12.56") + ")",
    ),
    Task(
        "word_problem",
        "Work out how much Priyanka pays in all over an 18-month lease: the rent is £1,145 a "
        "month for the first 7 months, then it goes up by £60 a month for the rest of the "
        "lease, and there is a one-off £275 admin fee.",
        r"(?s)\A(?=.*" + _number("21545") + ")",
    ),
    Task(
        "word_problem",
        "I'm painting three walls, each 4.6 m wide and 2.75 m high, and they need two coats. "
        "If a litre of paint covers 9.2 m², how many litres do I need?",
        r"(?s)\A(?=.*" + _number("8.25") + ")",
    ),
    # extraction: named fields of a short text, as JSON
    Task(
        "extraction",
        "Parcel TRK-40817 left our Gdansk depot on 12 May and should reach the customer in "
        "Lyon on 16 May. Weight: 7.3 kg. Pull out tracking, origin, destination and weight_kg "
        "as JSON.",
        _all(
            _field("tracking", _text(r"TRK[- ]?40817")),
            _field("origin", _text(r"gda[nń]sk(?:\s+depot)?")),
            _field("destination", _text(r"lyon")),
            _field("weight_kg", _num("7.3")),
        ),
    ),
    Task(
        "extraction",
        "Halvorsen Marine is hiring a senior welder for its yard in Bergen, paying 412 NOK an "
        "hour; applications close on 30 September. Give me a JSON object with the keys "
        "company, role, city and hourly_pay_nok.",
        _all(
            _field("company", _text(r"halvorsen\s+marine")),
            _field("role", _text(r"senior\s+welder")),
            _field("city", _text(r"bergen")),
            _field("hourly_pay_nok", _num("412")),
        ),
    ),
    Task(
        "extraction",
        "Recipe card: fennel and pear tart. Serves 6. Prep: 25 min. Bake: 40 min at 190°C. "
        "Could you turn this into JSON with the keys servings, prep_minutes, bake_minutes and "
        "oven_celsius?",
        _all(
            _field("servings", _num("6")),
            _field("prep_minutes", _num("25")),
            _field("bake_minutes", _num("40")),
            _field("oven_celsius", _num("190")),
        ),
    ),
    Task(
        "extraction",
        "\"Hi, it's Noor Haddad (patient no. P-55309). Could we move my check-up to Friday 9 "
        'August at 10:15? Thanks!" Extract name, patient_id, weekday and time from that '
        "message, as JSON.",
        _all(
            _field("name", _text(r"noor\s+haddad")),
            _field("patient_id", _text(r"P-?55309")),
            _field("weekday", _text(r"friday")),
            _field("time", _text(r"10[:.]15(?:\s*a\.?m\.?)?")),
        ),
    ),
    Task(
        "extraction",
        "Receipt #88214, Corner Hardware, 14 June: 2 boxes of wood screws at $6.45, 1 claw "
        "hammer at $30.70. Total: $43.60. Paid by card. I need receipt_number, store, total and "
        "payment_method from it in JSON.",
        _all(
            _field("receipt_number", r"[\"']?#?" + _number("88214")),
            _field("store", _text(r"corner\s+hardware")),
            _field("total", r"[\"']?\$?" + _number("43.6")),
            _field("payment_method", _text(r"(?:credit\s+|debit\s+)?card")),
        ),
    ),
    # two questions on a paragraph of made-up facts
    Task(
        "two_questions",
        f"{_FESTIVAL} Who started the festival, and on which lake are the lanterns floated?",
        _all("maddox", "cullis", echo=("1987", r"2,?300", "rye")),
    ),
    Task(
        "two_questions",
        f"{_TESSALY} When did the head office move? Also, what does the company make?",
        _all(r"(?<!\d)2019(?!\d)", "dumpling", echo=("popescu", r"\b640\b", "orange")),
    ),
    Task(
        "two_questions",
        f"{_HERONS} I'd like to know who coaches the Herons and which river they train on.",
        _all("lindqvist", "oyle", echo=("2008", "2022", "blue")),
    ),
    Task(
        "two_questions",
        f"{_MOTH} Tell me what the moth feeds on and where it was found.",
        _all("thyme", "vask", echo=(r"38\s*mm", "2016", r"9,?400")),
    ),
    Task(
        "two_questions",
        f"{_TRAIN} What time does the train get in, and who runs its dining car?",
        _all(r"(?<![\d:])0?7[:.]05(?!\d)", "rowe", echo=(r"21[:.]40", r"\b11\b", "1902")),
    ),
    # classification: one label of a set given in the task
    Task(
        "classification",
        'Triage this alert for the on-call team: is it low, medium or high urgency? "Server '
        'room B: 41°C and climbing, two racks have already shut themselves down."',
        _label("high", _URGENCY),
    ),
    Task(
        "classification",
        'From a field guide to made-up animals: "The marsh pippet is covered in short fur, '
        'gives birth to live young and feeds them on milk for six weeks." Which class is it: '
        "mammal, bird, reptile, fish or amphibian? One word, please.",
        _label("mammal", _ANIMAL),
    ),
    Task(
        "classification",
        "Put this expense into one of these categories (travel, equipment, software, "
        'catering): "Annual licences for a diagram editor, 14 seats, billed to the design '
        'team."',
        _label("software", _EXPENSE),
    ),
    Task(
        "classification",
        'A user wrote in: "It would be great if the app could export my workouts to a '
        'spreadsheet." Is this a bug_report, feature_request, billing_question or praise? '
        "Reply with the label only.",
        _label("feature_request", _FEEDBACK),
    ),
    Task(
        "classification",
        'Is the tone of this note formal or informal? "Dear members of the Board, I hereby '
        'tender my resignation as treasurer, effective 31 March."',
        _label("formal", _TONE),
    ),
    # multi-part: background and a numbered list of questions, one of them arithmetic
    Task(
        "multi_part",
        _listed(
            _LIBRARY,
            "Questions:",
            "Who is the head librarian?",
            "In what year did the library open?",
            "If it keeps adding books at that rate, how many will it hold 18 months from now?",
        ),
        _all(
            "pask",
            r"(?<!\d)1958(?!\d)",
            _number("16130"),
            echo=("calder", "garden", "lemon"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _VINEYARD,
            "Please answer:",
            "Which family owns the vineyard?",
            "On which days is the cellar door open?",
            "How many bottles should last autumn's harvest make?",
            "Which two grapes does it grow?",
        ),
        _all(
            "ferrant",
            "thursday",
            "sunday",
            _number("13172"),
            "rosal",
            "velha",
            echo=("1974", "hectare", "owl"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _BUS,
            "I have a few questions:",
            "Which company operates Route 27?",
            "Where is its depot?",
            "A commuter makes two single journeys a day, five days a week. How much would they "
            "save over 7 weeks by buying weekly passes instead?",
        ),
        _all(
            "kingfisher",
            r"mill\s+lane",
            _number("46.9"),
            echo=("amberley", r"\b34\b", "green"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _LAB,
            "Answer these:",
            "Who leads the lab?",
            "What does it study?",
            "What is its research boat called?",
            "By what percentage did the number of tagged colonies grow from 2023 to 2024?",
        ),
        _all(
            "okonjo",
            "bleach",
            "petrel",
            _number("37.5"),
            echo=("2009", r"\bnine\b", "coffee"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _FAIR,
            "Can you tell me:",
            "Who organises the fair?",
            "When does it take place?",
            "How much money will be left over once the costs are paid?",
        ),
        _all(
            "brandt",
            "saturday",
            "june",
            _number("1805"),
            echo=("1996", r"18[:.]00", "crane"),
        ),
    ),
)
