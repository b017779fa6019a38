r"""A fifth held-out set for real local models (``bench/local_models.py --parts compare``).

Written after the fourth round of tuning (on ``bench/local_tasks.py`` and the first four
held-out sets), blind to the orchestrator's heuristics (how it spots arithmetic, splits lists
of questions, checks working, routes to the calculator), and sharing no passage, name or
distinctive number with the earlier sets: phrased as people phrase requests, in varied forms
(questions, imperatives, a question inside a sentence; currency symbols, units, thousands
separators, numbers written as words; numbered, lettered and bulleted lists). Keep them out of
prompts, plans and examples, or they stop measuring anything.

Same :class:`~local_tasks.Task` shape, same kinds (five of each) and the same checks as the
earlier held-out sets (see ``local_tasks_heldout``'s docstring): ``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text; numbers with or without thousands commas and
trailing decimal zeros, never inside a longer number (where an exact value has more decimals
than money or distances want, its sensible roundings are accepted too); JSON values checked
one by one, spacing and quote style free; one label and no other; for ``two_questions`` and
``multi_part``, an answer holding all three echo markers (facts no question asks for, one in
the passage's last sentence) is an echo of the passage, not an answer. Some of the
``two_questions`` ask for a number or a duration the passage states (a look-up, not a sum).
Every pattern is anchored (``\A``).
"""

from __future__ import annotations

from local_tasks import Task
from local_tasks_heldout import ONE_PART_KINDS, _all, _field, _label, _num, _number, _text

__all__ = ["HELDOUT5", "ONE_PART_KINDS"]

_TRADE = ("plumbing", "electrical", "roofing", "heating")
_INSTRUMENT = ("strings", "woodwind", "brass", "percussion")
_TENSE = ("past", "present", "future")
_BIN = ("paper", "glass", "plastic", "food_waste")
_CLAUSE = ("payment", "termination", "confidentiality", "liability")

_BAKEHOUSE = (
    "Fennimore's Bakehouse has been baking on Calloway Street in the river town of Sallowford "
    "since 1994. Its sourdough is left to ferment for 38 hours before it goes into the oven, "
    "and the head baker, Tobiah Marchetti, starts work at 3 a.m. On a Saturday the shop sells "
    "about 450 loaves. The delivery bicycle has a wicker basket on the front."
)
_PUPPETS = (
    "The Tumbledown Puppet Theatre plays in a former Methodist chapel in the market town of "
    "Orrinsby and was founded in 1986. Each show lasts fifty minutes, and every puppet is "
    "carved from lime wood by Marisa Delacroix. The auditorium has 79 seats. A stuffed crow "
    "watches the audience from the organ loft."
)
_HUT = (
    "The Verglas Hut stands at 2,870 metres below the north ridge of the Pointe Sarrasine. "
    "From the car park at Les Aubiers the walk up takes about four and a half hours. The hut "
    "sleeps 56 and is open from mid-June to mid-September; its warden is Anouk Terrasson. A "
    "marmot lives under the woodshed."
)
_LLAMAS = (
    "Bracken Ridge Llama Treks is run by Oonagh Feeney on a hill farm near Carrowmore, where "
    "she keeps 19 llamas. A trek covers about 7 km of moorland, and each llama carries a "
    "picnic for the person leading it. The farm began offering treks in 2002. The farmhouse "
    "kitchen has a green Aga."
)
_RINK = (
    "Skarholt Ice Rink opened in 1962 and has seating for 1,150 spectators. During public "
    "sessions the ice is resurfaced every 90 minutes, and the rink is managed by Tove Lindahl, "
    "a former speed skater. A rubber duck sits on top of the scoreboard."
)
_CIRCUS = (
    "Circo Marrowby is a travelling circus founded in 1968 and run by its ringmaster, Benedikt "
    "Aurich; it has 71 performers and crew. Last summer it toured four towns with a "
    "blue-and-gold big top, playing to 335 people in Penrose, 281 in Kilvey, 409 in Oxwich "
    "and 363 in Tallon. Its star act is a trapeze trio from Tbilisi. The cook keeps a tame "
    "jackdaw."
)
_BIKES = (
    "Spokeway, the bike-share scheme in the city of Morvane, started in 2002 with 90 bikes and "
    "now has 420 bikes at 37 docking stations. It is managed by the council's transport "
    "officer, Imelda Farquhar. Members pay £1.45 a trip and everyone else £2.25. Last month "
    "riders made 9,840 trips, 6,150 of them by members. Some of the bikes have baskets painted "
    "like watermelons."
)
_TEA = (
    "The Kanthal Tea Estate, high in the hills above the town of Vellora, was planted in 1921 "
    "and covers 38 hectares. It grows only Assam-type bushes and is managed by Devika "
    "Raghunathan. Last season each hectare yielded 2,150 kg of fresh leaf, and it takes 4 kg "
    "of fresh leaf to make 1 kg of finished tea. A troop of langur monkeys visits the factory "
    "roof at dusk."
)
_COWORK = (
    "The Loom Rooms is a coworking space in a former textile mill in Haddersby, opened by "
    "Yusra Quenneville. It has 50 hot desks at £210 a month and 12 fixed desks at £295 a "
    "month, as well as a podcast booth and a roof terrace. Last month 44 of the hot desks and "
    "all of the fixed desks were rented. The lift still has its original cage doors."
)
_APPEAL = (
    "Birchcombe Primary's library appeal hopes to raise £9,000 for new books and beanbags. So "
    "far parents have given £3,870, a sponsored readathon has brought in £1,245 and the "
    "bookshop on the high street, Page & Quire, has donated £600. The appeal is led by the "
    "deputy head, Cormac Ruane. The school tortoise, Admiral, sleeps through the whole winter."
)


def _listed(passage: str, lead: str, *questions: str, mark: str = "{0}.") -> str:
    """The passage, a lead line, the questions after ``mark`` (``{0}``: number, ``{1}``: letter)."""
    listed = "\n".join(
        f"{mark.format(i, 'abcdefgh'[i - 1])} {q}" for i, q in enumerate(questions, 1)
    )
    return f"{passage}\n{lead}\n{listed}"


def _either(*values: str) -> str:
    """Any of the numbers ``values`` (an exact value and its sensible roundings)."""
    return "(?:" + "|".join(_number(v) for v in values) + ")"


def _money(value: str, symbols: str = "£$€") -> str:
    """A number value, bare or quoted, maybe after a currency symbol."""
    return rf"[\"']?[{symbols}]?\s*{_number(value)}"


def _date(day: str, month: str, digits: str) -> str:
    """A quoted date: "12 July", "July 12th", "2025-07-12" and the like."""
    ordinal = rf"{day}(?:st|nd|rd|th)?"
    return _text(rf"(?:{ordinal}\s+{month}|{month}\s+{ordinal}|(?:\d{{4}}-)?{digits})")


HELDOUT5: tuple[Task, ...] = (
    # word problems: two to four steps on everyday quantities
    Task(
        "word_problem",
        "The hiking boots I want are $174, and the shop has thirty-five percent off everything "
        "this weekend. Sales tax is 7.25%, charged on the sale price, and I'll put a $15 gift "
        "card towards the final total. How much do I actually pay?",
        # 174 * 0.65 = 113.10; 113.10 * 1.0725 = 121.29975; - 15 = 106.29975
        _all(_either("106.30", "106.2998", "106.29975")),
    ),
    Task(
        "word_problem",
        "I swam 76 lengths of my gym's 25-yard pool this morning. How far is that in "
        "kilometres? (One yard is 0.9144 m.)",
        # 76 * 25 = 1900 yd; 1900 * 0.9144 = 1737.36 m; / 1000
        _all(_either("1.74", "1.737", "1.7374", "1.73736")),
    ),
    Task(
        "word_problem",
        "Our film club is doing a triple bill on Saturday: the films run 2 h 22 min, 1 h 58 min "
        "and 2 h 41 min, with a twenty-minute break between each film and the next. If the "
        "first one starts at 1:15 pm, what time will the last one finish?",
        # 142 + 118 + 161 = 421 min; + 2 * 20 = 461 min = 7 h 41 min; 13:15 + 7:41 = 20:56
        r"(?s)\A(?=.*(?<![\d:.])(?:20[:.h]56|0?8[:.]56(?!\s*a\.?\s*m\b))(?!\d))",
    ),
    Task(
        "word_problem",
        "Our flat's rent is €2,940 a month and the three of us split it in proportion to the "
        "size of our bedrooms: mine is 14 m², Theo's is 11 m² and Ama's is 17 m². Work out my "
        "share of the rent each month.",
        _all(_number("980")),  # 14 + 11 + 17 = 42 m²; 2940 / 42 = 70 a m²; 70 * 14
    ),
    Task(
        "word_problem",
        "I put in forty-eight hours this week. The first 40 are paid at £23.40 an hour and "
        "anything beyond that at time and a half, so what's my gross pay for the week?",
        _all(_number("1216.80")),  # 40 * 23.40 = 936; 8 * 35.10 = 280.80; 936 + 280.80
    ),
    # extraction: named fields of a short text, as JSON
    Task(
        "extraction",
        "Your reservation is confirmed, Chiamaka Nwosu: Hotel Bellavista, Sorrento, three "
        "nights from 12 July in a sea-view double at €189 a night, breakfast included. Could "
        "you pull out guest, hotel, check_in, nights, rate_eur and breakfast_included (true or "
        "false) as JSON?",
        _all(
            _field("guest", _text(r"chiamaka\s+nwosu")),
            _field("hotel", _text(r"(?:hotel\s+)?bellavista(?:,?\s+sorrento)?")),
            _field("check_in", _date("12", "july", "07-12")),
            _field("nights", rf"(?:{_num('3')}|{_text('three')})"),
            _field("rate_eur", _money("189", "€")),
            _field("breakfast_included", r"[\"']?(?:true|yes)\b"),
        ),
    ),
    Task(
        "extraction",
        "Saturday's forecast for Skerrow Bay: sunny spells, a high of 19°C and a low of 11°C, "
        "a south-westerly wind of 28 km/h and a 10% chance of rain. Extract location, day, "
        "high_c, low_c, wind_kmh and rain_chance_percent into a JSON object.",
        _all(
            _field("location", _text(r"skerrow\s+bay")),
            _field("day", _text("saturday")),
            _field("high_c", _num("19")),
            _field("low_c", _num("11")),
            _field("wind_kmh", _num("28")),
            _field("rain_chance_percent", _num("10")),
        ),
    ),
    Task(
        "extraction",
        "New on the gym timetable: Spin with Marco Bellandi in Studio 2, Tuesdays and "
        "Thursdays at 18:15, 45 minutes, 20 bikes. What are class_name, instructor, studio, "
        "days (a list), start_time, duration_min and capacity? JSON, please.",
        _all(
            _field("class_name", _text(r"spin(?:\s+class)?")),
            _field("instructor", _text(r"marco\s+bellandi")),
            _field("studio", r"[\"']?\s*(?:studio\s+)?2(?![\d.])\s*[\"']?"),
            _field("days", r"\[(?=[^\]]*tue)(?=[^\]]*thu)[^\]]*\]"),
            _field("start_time", _text(r"(?:18[:.]15|0?6[:.]15\s*p\.?\s*m\.?)")),
            _field("duration_min", _num("45")),
            _field("capacity", _num("20")),
        ),
    ),
    Task(
        "extraction",
        "Saturday's result: Harbury Rovers 3-1 Stanmoor Athletic at Lindell Park, attendance "
        "8,377. Can I have that as JSON with winner, loser, winner_goals, loser_goals, venue "
        "and attendance?",
        _all(
            _field("winner", _text(r"harbury\s+rovers")),
            _field("loser", _text(r"stanmoor\s+athletic")),
            _field("winner_goals", _num("3")),
            _field("loser_goals", _num("1")),
            _field("venue", _text(r"lindell\s+park")),
            _field("attendance", _num("8377")),
        ),
    ),
    Task(
        "extraction",
        "Lost property report: a navy Osprey rucksack left on the X7 bus on Tuesday evening, "
        "with a Lenovo laptop and a green scarf inside. Owner: Ravi Chaudhary, 07700 900315. I "
        "need item, colour, brand, contents (a list), owner and phone as JSON.",
        _all(
            _field("item", _text(r"(?:navy\s+)?(?:osprey\s+)?rucksack")),
            _field("colour", _text(r"navy(?:\s+blue)?")),
            _field("brand", _text("osprey")),
            _field("contents", r"\[(?=[^\]]*laptop)(?=[^\]]*scarf)[^\]]*\]"),
            _field("owner", _text(r"ravi\s+chaudhary")),
            _field("phone", _text(r"07700\s?900\s?315")),
        ),
    ),
    # two questions on a paragraph of made-up facts
    Task(
        "two_questions",
        f"{_BAKEHOUSE} How long is the sourdough left to ferment, and who is the head baker?",
        _all(
            r"(?:(?<![\d.])38|thirty[\s-]eight)[\s-]*(?:hours?|hrs?|h)\b",
            r"\bmarchetti\b",
            echo=(r"\b1994\b", r"\b450\b", "wicker"),
        ),
    ),
    Task(
        "two_questions",
        f"{_PUPPETS} How long does each show last? And who carves the puppets?",
        _all(
            r"(?:(?<![\d.])50|fifty)[\s-]*(?:minutes?|mins?)\b",
            r"\bdelacroix\b",
            echo=(r"\b1986\b", r"\b79\b", r"\bcrow\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_HUT} Could you tell me who the warden is and how long the walk up from the car park "
        "takes?",
        _all(
            r"\bterrasson\b",
            r"(?:four\s+and\s+a\s+half\s+hours"
            r"|(?<![\d.])4(?:\.5|\s*½|\s+1/2)\s*(?:hours?|hrs?|h)\b"
            r"|(?<![\d.])4\s*(?:hours?|hrs?|h)\s*(?:and\s+)?30\s*(?:minutes?|mins?|m)\b"
            r"|(?<![\d.])270\s*min)",
            echo=(r"2,?870", r"\b56\b", "marmot"),
        ),
    ),
    Task(
        "two_questions",
        f"{_LLAMAS} Tell me who runs the treks and what each llama carries.",
        _all(r"\bfeeney\b", "picnic", echo=(r"\b19\b", r"\b2002\b", r"\baga\b")),
    ),
    Task(
        "two_questions",
        f"{_RINK} I'd like to know who manages the rink and how often the ice gets resurfaced.",
        _all(
            r"\blindahl\b",
            r"(?:(?<![\d.])90[\s-]*(?:minutes?|mins?)\b|ninety\s+minutes"
            r"|\bhour\s+and\s+a\s+half|one\s+and\s+a\s+half\s+hours"
            r"|(?<![\d.])1\.5[\s-]*(?:hours?|hrs?)\b)",
            echo=(r"\b1962\b", r"1,?150", r"\bduck\b"),
        ),
    ),
    # classification: one label of a set given in the task
    Task(
        "classification",
        "Job request for our handyman firm: \"Since Saturday's gale a few slates have come "
        "loose and now there's a damp patch in the loft every time it rains.\" Which trade "
        "should we send: plumbing, electrical, roofing or heating?",
        _label("roofing", _TRADE),
    ),
    Task(
        "classification",
        "A music quiz describes an instrument: 'a long wooden tube with keys along its body, "
        "played by blowing through a double reed'. Which family is it in — strings, woodwind, "
        "brass or percussion? One word.",
        _label("woodwind", _INSTRUMENT),
    ),
    Task(
        "classification",
        "Is this sentence in the past, present or future tense? 'By this time next spring, the "
        "new wing of the hospital will open its doors to patients.'",
        _label("future", _TENSE),
    ),
    Task(
        "classification",
        "Help me sort the recycling: which bin do these go in — paper, glass, plastic or "
        "food_waste? \"Coffee grounds, a few eggshells and the peelings from tonight's "
        'potatoes."',
        _label("food_waste", _BIN),
    ),
    Task(
        "classification",
        "Label this contract clause as payment, termination, confidentiality or liability: "
        "\"Either party may end this agreement at any time by giving the other sixty days' "
        'written notice." Reply with the label only.',
        _label("termination", _CLAUSE),
    ),
    # multi-part: background and a list of questions, one of them arithmetic
    Task(
        "multi_part",
        _listed(
            _CIRCUS,
            "Some questions about the circus:",
            "Who is the ringmaster?",
            "Where does the star act come from?",
            "On average, how many people came to a show across the four towns?",
            mark="•",
        ),
        _all(
            r"\baurich\b",
            r"\btbilisi\b",
            _number("347"),  # 335 + 281 + 409 + 363 = 1388; 1388 / 4
            echo=(r"\b1968\b", r"\b71\b", r"\bjackdaw\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _BIKES,
            "Please answer the following:",
            "Who manages the scheme?",
            "How many docking stations does it have?",
            "How much money did last month's trips bring in?",
        ),
        _all(
            r"\bfarquhar\b",
            _number("37"),
            _number("17220"),  # 6150 * 1.45 = 8917.50; 3690 * 2.25 = 8302.50; sum
            echo=(r"\b2002\b", r"\b90\b", "watermelon"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _TEA,
            "I have three questions:",
            "Who manages the estate?",
            "What kind of bushes does it grow?",
            "How many kilograms of finished tea did last season's leaf make?",
            mark="{1})",
        ),
        _all(
            r"\braghunathan\b",
            r"\bassam\b",
            _number("20425"),  # 38 * 2150 = 81700 kg of leaf; 81700 / 4
            echo=(r"\b1921\b", r"\bvellora\b", r"\blangurs?\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _COWORK,
            "I'm writing a piece on local workspaces and need to know:",
            "who opened the Loom Rooms,",
            "what there is up on the roof,",
            "and how much the desk rentals brought in last month.",
            mark="-",
        ),
        _all(
            r"\bquenneville\b",
            r"\bterrace\b",
            _number("12780"),  # 44 * 210 = 9240; 12 * 295 = 3540; 9240 + 3540
            echo=("textile", "podcast", r"\bcage\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _APPEAL,
            "A few things, please:",
            "Who is leading the appeal?",
            "Which bookshop gave money?",
            "What percentage of the target has been raised so far?",
            "Is there anything else the money will buy besides books?",
            mark="Q{0}:",
        ),
        _all(
            r"\bruane\b",
            r"page\s*(?:&|and)\s*quire",
            _either("63.5", "64"),  # 3870 + 1245 + 600 = 5715; 5715 / 9000 = 0.635
            r"\bbeanbags?\b",
            echo=(r"\bbirchcombe\b", r"\breadathon\b", r"\btortoise\b"),
        ),
    ),
)
