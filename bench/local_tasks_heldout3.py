r"""A third held-out set for real local models (``bench/local_models.py --parts compare``).

Written after the second round of tuning (on ``bench/local_tasks.py`` and the first two
held-out sets), blind to the orchestrator's heuristics (how it spots arithmetic, splits lists
of questions, routes to the calculator), and sharing no passage, name or number with the
earlier sets: phrased as people phrase requests, in varied forms (questions, imperatives, a
question inside a sentence; currency symbols, units, thousands separators). Keep them out of
prompts, plans and examples, or they stop measuring anything.

Same :class:`~local_tasks.Task` shape, same kinds (five of each) and the same checks as the
earlier held-out sets (see ``local_tasks_heldout``'s docstring): ``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text; numbers with or without thousands commas and
trailing decimal zeros, never inside a longer number; JSON values checked one by one, spacing
and quote style free; one label and no other; for ``two_questions`` and ``multi_part``, an
answer holding all three echo markers (facts no question asks for, one in the passage's last
sentence) is an echo of the passage, not an answer. Every pattern is anchored (``\A``).
"""

from __future__ import annotations

from local_tasks import Task
from local_tasks_heldout import ONE_PART_KINDS, _all, _field, _label, _num, _number, _text

__all__ = ["HELDOUT3", "ONE_PART_KINDS"]

_INTENT = ("cancel_order", "track_order", "return_item", "change_address")
_GENRE = ("mystery", "romance", "fantasy", "biography", "cookbook")
_SKY = ("sunny", "rainy", "snowy", "foggy")
_TEAM = ("payroll", "recruiting", "facilities", "legal")
_EMOTION = ("joy", "anger", "fear", "sadness")

_ALLOTMENT = (
    "The Wrenfield Allotment Society was set up in 1979 and rents out 63 plots along the old "
    "railway line. Its secretary is Gideon Thorley, and the waiting list for a plot is about "
    "two years long. Members share a polytunnel where they grow tomatoes. Someone has painted "
    "the shed doors purple."
)
_OBSERVATORY = (
    "Cairnloch Observatory sits 1,140 metres up and houses a 2.4-metre telescope named Aurelia. "
    "It was paid for by the shipping magnate Corwin Falk and opened to the public in 1961. "
    "Guided tours run on clear Friday evenings. The vending machine in the car park only takes "
    "coins."
)
_POTTER = (
    "The potter Hanne Voss works in an old dairy outside Kilbride, where she fires her kiln to "
    "1,260°C. She mostly sells teapots, and her glazes are made from the ash of local seaweed. "
    "She opened the studio in 2011 and takes on a handful of students each term. Her cat "
    "sleeps on the warm kiln lid."
)
_BADMINTON = (
    "The Delmar Open is a badminton tournament held every spring in Avercombe. This year the "
    "women's singles went to Yuki Tamsin, who beat the defending champion Rosa Quell in three "
    "games, and the men's title went to Anders Brekke. The prize money comes to $72,000 in "
    "all. The scoreboard in the hall was donated by a local dentist."
)
_QUILLPAD = (
    "Quillpad 4.8, the new release of the note-taking app from Fernleaf Studio, adds offline "
    "sync and a dark theme. The studio's lead developer is Farid Nazari. The download is "
    "64 MB, and older tablets are no longer supported. The release notes end with a haiku."
)
_REPAIR = (
    "The Lindenhurst Repair Café meets on the first Monday evening of every month in the scout "
    "hut on Tanner Road. It was started in 2014 by a retired electrician, Bernard Ashdown. Last "
    "year people brought in 575 broken items and the volunteers fixed 391 of them, while the "
    "donation jar raised £1,936. The kettle in the hut is older than most of the volunteers."
)
_SHIP = (
    "The container ship Marisol Vey left Valparaíso on 2 March, bound for Yokohama, 9,048 "
    "nautical miles away. Her master is Captain Elena Sørby, and she is carrying 3,150 "
    "containers of copper ore and fruit. She holds an average speed of 13 knots, that is 13 "
    "nautical miles an hour, day and night. The ship's cook bakes fresh bread every evening."
)
_PLANTS = (
    "The Elmbrook Parents' Association has run a spring plant sale in the school car park "
    "since 2006; this year it was organised by Harriet Quinn. They sold 264 seedlings at $3.50 "
    "each and 53 hanging baskets at $19.50 each, and the compost, pots and baskets had cost "
    "$585 in all. The money will go towards a new climbing frame. It rained for the first "
    "hour, and somebody's dog ate a marigold."
)
_SOLAR = (
    "Hollin Farm, near the village of Brackwater, grows barley and keeps a flock of 120 sheep. "
    "In 2012 it had 54 solar panels fitted to the roof of its grain barn by Sunward "
    "Installations of Kendal. Last year each panel produced 372 kWh of electricity. The farm's "
    "sheepdog is called Moss."
)
_THEATRE = (
    "The Gallowglass Players, founded in 1983, will stage 'The Salt Merchant', a comedy by "
    "Wilhelmina Archer, at Tolley Hall this autumn. It is directed by Dev Kapoor and runs for "
    "9 nights, opening on Wednesday 15 October; the hall seats 186. The company keeps its "
    "costumes in an old church vestry."
)


def _listed(passage: str, lead: str, *questions: str, mark: str = ".") -> str:
    listed = "\n".join(f"{i}{mark} {q}" for i, q in enumerate(questions, 1))
    return f"{passage}\n{lead}\n{listed}"


def _money(value: str, symbols: str = "£$€") -> str:
    """A number value, bare or quoted, maybe after a currency symbol."""
    return rf"[\"']?[{symbols}]?\s*{_number(value)}"


HELDOUT3: tuple[Task, ...] = (
    # word problems: two to four steps on everyday quantities
    Task(
        "word_problem",
        "The six of us had dinner at a Turkish place last night. The bill was £291.20 and we "
        "added a 12.5% service charge on top. If we split it evenly, what does each person owe?",
        _all(_number("54.60")),  # 291.20 * 1.125 = 327.60; 327.60 / 6 = 54.60
    ),
    Task(
        "word_problem",
        "Our café goes through 3.5 kg of espresso beans every week. The roaster sells them in "
        "250 g bags at $11.75 a bag. Work out what we'll spend on beans over the next 13 weeks.",
        _all(_number("2138.50")),  # 3500 / 250 = 14 bags a week; 14 * 13 = 182; 182 * 11.75
    ),
    Task(
        "word_problem",
        "My market stall took $1,284, $976, $1,412, $1,108 and $1,530 over the past five weeks. "
        "How much do I need to take in week six so that my average over the six weeks comes to "
        "$1,300?",
        _all(_number("1490")),  # 1300 * 6 = 7800; the five weeks sum to 6310; 7800 - 6310
    ),
    Task(
        "word_problem",
        "I've booked 4 nights in Brno at 2,850 CZK a night, and my bank converts at 25 CZK to "
        "the euro, then charges a 2% foreign transaction fee on top — can you tell me what the "
        "stay will cost me in euros?",
        _all(_number("465.12")),  # 2850 * 4 = 11400 CZK; 11400 / 25 = 456; 456 * 1.02
    ),
    Task(
        "word_problem",
        "Rice at our shop comes in 2 kg bags for $7.40 or 5 kg bags for $16.25. For a 30 kg "
        "catering order, how much cheaper is it to buy only the 5 kg bags than only the 2 kg "
        "bags?",
        _all(_number("13.50")),  # 15 * 7.40 = 111.00; 6 * 16.25 = 97.50; 111.00 - 97.50
    ),
    # extraction: named fields of a short text, as JSON
    Task(
        "extraction",
        "Gig listing: the Ruth Abernethy Quartet plays The Copper Kettle on Saturday 22 March. "
        "Doors 19:30, tickets £13 on the door. Can you put performer, venue, doors_open and "
        "ticket_price_gbp into a JSON object?",
        _all(
            _field("performer", _text(r"(?:the\s+)?ruth\s+abernethy(?:\s+quartet)?")),
            _field("venue", _text(r"(?:the\s+)?copper\s+kettle")),
            _field("doors_open", _text(r"(?:19[:.]30|0?7[:.]30\s*p\.?\s*m\.?)")),
            _field("ticket_price_gbp", _money("13")),
        ),
    ),
    Task(
        "extraction",
        "Payment confirmation: you sent €865.40 to Björn Aaltonen on 3 November, reference "
        '"March rent". Extract amount_eur, recipient, date and reference as JSON, please.',
        _all(
            _field("amount_eur", _money("865.40")),
            _field("recipient", _text(r"bj(?:ö|o|oe)rn\s+aaltonen")),
            _field(
                "date",
                _text(r"(?:3(?:rd)?\s+nov(?:ember)?|nov(?:ember)?\s+3(?:rd)?|(?:\d{4}-)?11-03)"),
            ),
            _field("reference", _text(r"march\s+rent")),
        ),
    ),
    Task(
        "extraction",
        "FOR SALE: 2010 Skoda Octavia estate, 87,400 miles, one owner, heated seats and a tow "
        "bar, £6,950 or near offer, collection from Derby. I need this as a JSON object with "
        "make, model, year, mileage, price_gbp and extras (a list).",
        _all(
            _field("make", _text(r"[sš]koda")),
            _field("model", _text(r"octavia(?:\s+estate)?")),
            _field("year", _num("2010")),
            _field("mileage", _num("87400")),
            _field("price_gbp", _money("6950")),
            _field("extras", r"\[(?=[^\]]*heated)(?=[^\]]*tow)[^\]]*\]"),
        ),
    ),
    Task(
        "extraction",
        "Rota change: Kofi Mensah is covering Lena Strand's night shift on ward 6B, Tuesday 4 "
        "February, 20:00 to 08:00. Return a JSON object with the keys who_covers, whose_shift, "
        "ward, start_time and end_time.",
        _all(
            _field("who_covers", _text(r"kofi\s+mensah")),
            _field("whose_shift", _text(r"lena\s+strand")),
            _field("ward", _text(r"(?:ward\s+)?6\s?B")),
            _field("start_time", _text(r"(?:20[:.]00|0?8[:.]00\s*p\.?\s*m\.?)")),
            _field("end_time", _text(r"0?8[:.]00(?:\s*a\.?\s*m\.?)?")),
        ),
    ),
    Task(
        "extraction",
        "Library reminder: Winter at Coldharbour by Imogen Feld is due back on 23 April, and "
        "late returns cost 0.30 a day. What are the title, author, due_date and "
        "late_fee_per_day (a number) here? Answer in JSON.",
        _all(
            _field("title", _text(r"winter\s+at\s+coldharbour")),
            _field("author", _text(r"imogen\s+feld")),
            _field("due_date", _text(r"(?:23(?:rd)?\s+april|april\s+23(?:rd)?|(?:\d{4}-)?04-23)")),
            _field("late_fee_per_day", _money("0.30")),
        ),
    ),
    # two questions on a paragraph of made-up facts
    Task(
        "two_questions",
        f"{_ALLOTMENT} Who is the secretary, and what do members grow in the shared polytunnel?",
        _all(r"\bthorley\b", "tomato", echo=(r"\b1979\b", r"\b63\b", "purple")),
    ),
    Task(
        "two_questions",
        f"{_OBSERVATORY} What is the telescope called? And who paid for the observatory?",
        _all(r"\baurelia\b", r"\bfalk\b", echo=(r"1,?140", r"\b1961\b", "vending")),
    ),
    Task(
        "two_questions",
        f"{_POTTER} I was wondering what she mostly sells and what her glazes are made from.",
        _all("teapot", "seaweed", echo=(r"1,?260", r"\b2011\b", r"\bcat\b")),
    ),
    Task(
        "two_questions",
        f"{_BADMINTON} Tell me who won the men's title and who Yuki Tamsin beat.",
        _all(r"\bbrekke\b", r"\bquell\b", echo=(r"72,?000", r"\bavercombe\b", "dentist")),
    ),
    Task(
        "two_questions",
        f"{_QUILLPAD} Which two features does the update add, and who is the lead developer?",
        _all(
            "offline",
            r"\bdark\b",
            r"\bnazari\b",
            echo=(r"\b64\s*MB\b", r"\btablets?\b", "haiku"),
        ),
    ),
    # classification: one label of a set given in the task
    Task(
        "classification",
        'Customer chat: "Hiya, the trainers I got last week are a size too small, how do I '
        'send them back for a refund?" Which intent is this: cancel_order, track_order, '
        "return_item or change_address?",
        _label("return_item", _INTENT),
    ),
    Task(
        "classification",
        "Sort this back-cover blurb into a genre (mystery, romance, fantasy, biography or "
        "cookbook): 'When the last cable car comes down the mountain with one passenger fewer "
        "than went up, Inspector Maud Keane has until dawn to find out who fell, and who "
        "pushed.'",
        _label("mystery", _GENRE),
    ),
    Task(
        "classification",
        "Our weather-diary app wants one tag per entry. Today's entry: \"Couldn't see the end of "
        'the street this morning, and the harbour horns kept sounding until noon." Tag it '
        "sunny, rainy, snowy or foggy.",
        _label("foggy", _SKY),
    ),
    Task(
        "classification",
        'Which team should pick this up: payroll, recruiting, facilities or legal? "The lift '
        "on the third floor has been stuck between floors since Monday and everyone is taking "
        'the stairs."',
        _label("facilities", _TEAM),
    ),
    Task(
        "classification",
        'What emotion does this diary line express, joy, anger, fear or sadness? "My hands '
        "shook as the footsteps on the stairs came closer, and I didn't dare breathe.\" Just "
        "the one word.",
        _label("fear", _EMOTION),
    ),
    # multi-part: background and a numbered list of questions, one of them arithmetic
    Task(
        "multi_part",
        _listed(
            _REPAIR,
            "A few things I'd like to know:",
            "Who started the repair café?",
            "Where does it meet?",
            "What percentage of the items brought in last year were fixed?",
        ),
        _all(
            r"\bashdown\b",
            r"(?:scout\s+hut|tanner\s+road)",
            _number("68"),  # 391 / 575 = 0.68
            echo=(r"\b2014\b", r"1,?936", "kettle"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _SHIP,
            "Could you help me with these?",
            "Who is the ship's captain?",
            "Where is she heading?",
            "What is she carrying?",
            "At her average speed, how many days will the crossing take?",
            mark=")",
        ),
        _all(
            r"s(?:ø|o|oe)rby",
            "yokohama",
            "copper",
            "fruit",
            _number("29"),  # 9048 / 13 = 696 hours; 696 / 24 = 29
            echo=(r"valpara[ií]so", r"3,?150", "bread"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _PLANTS,
            "My questions:",
            "Who organised this year's sale?",
            "What will the money be spent on?",
            "How much profit did the sale make once the costs are taken off?",
        ),
        _all(
            r"\bquinn\b",
            r"climbing\s+frame",
            _number("1372.50"),  # 264 * 3.50 = 924; 53 * 19.50 = 1033.50; 1957.50 - 585
            echo=(r"\b2006\b", r"car\s+park", "marigold"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _SOLAR,
            "Please work through the following:",
            "What crop does the farm grow?",
            "Which company fitted the panels?",
            "If every kWh they produced saved the farm £0.28, how much did the panels save it "
            "last year?",
        ),
        _all(
            "barley",
            r"\bsunward\b",
            _number("5624.64"),  # 54 * 372 = 20088 kWh; 20088 * 0.28
            echo=(r"\b120\b", r"\b2012\b", r"\bmoss\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _THEATRE,
            "Quick questions about this:",
            "Who wrote the play?",
            "Who is directing it?",
            "On which day of the week does it open?",
            "If every seat is sold at £12.50 on every night of the run, how much will the "
            "tickets bring in?",
        ),
        _all(
            r"\barcher\b",
            r"\bkapoor\b",
            r"\bwednesday\b",
            _number("20925"),  # 186 * 9 = 1674 seats; 1674 * 12.50
            echo=(r"\b1983\b", "vestry", r"\btolley\b"),
        ),
    ),
)
