r"""A sixth held-out set for real local models (``bench/local_models.py --parts compare``).

Written after the fifth round of tuning (on ``bench/local_tasks.py`` and the first five
held-out sets), blind to the orchestrator's heuristics (how it spots arithmetic, splits lists
of questions, checks working, routes to the calculator), and sharing no passage, name or
distinctive number with the earlier sets: phrased as people phrase requests, in varied forms
(questions, imperatives, a request inside a quoted message; currency symbols, units, thousands
separators, numbers written as words; numbered, lettered, bracketed and bulleted lists). Keep
them out of prompts, plans and examples, or they stop measuring anything.

Same :class:`~local_tasks.Task` shape, same kinds (five of each) and the same checks as the
earlier held-out sets (see ``local_tasks_heldout``'s docstring): ``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text; numbers with or without thousands commas and
trailing decimal zeros, never inside a longer number (where an exact value has more decimals
than money or distances want, its sensible roundings are accepted too); JSON values checked
one by one, spacing and quote style free; one label and no other; for ``two_questions`` and
``multi_part``, an answer holding all three echo markers (facts no question asks for, one in
the passage's last sentence) is an echo of the passage, not an answer. Three of the
``two_questions`` ask for a measurement, a duration or a count the passage states (a look-up,
not a sum). Every pattern is anchored (``\A``).
"""

from __future__ import annotations

from local_tasks import Task
from local_tasks_heldout import ONE_PART_KINDS, _all, _field, _label, _num, _number, _text
from local_tasks_heldout5 import _date, _listed, _money

__all__ = ["HELDOUT6", "ONE_PART_KINDS"]

_POLICY = ("motor", "home", "travel", "health")
_ROOM = ("kitchen", "bathroom", "bedroom", "garage")
_SPEECH = ("noun", "verb", "adjective", "adverb")
_COUNCIL = ("parking", "waste_collection", "street_lighting", "noise")
_LEDGER = ("income", "expense", "transfer")

_OBSERVATORY = (
    "The Kestrelmoor Observatory sits on a granite outcrop above the village of Thrushcombe "
    "and was built in 1954. Its main telescope has a mirror 1.9 metres across, and its "
    "director is Aoife Quilligan. Around 6,300 visitors come to its open nights each year. "
    "A ginger cat called Nebula sleeps in the control room."
)
_FERRY = (
    "The MV Corrangarry has carried passengers across the Sound of Elsay since 1976. The "
    "crossing takes 35 minutes and the ferry can take 24 cars. Her master is Captain Ewald "
    "Brzezinski, who grew up on the island. Seals often bask on the slipway at low tide."
)
_ORCHARD = (
    "Hollins Cider Orchard, on the edge of the village of Wrenstead, has 580 trees of 23 apple "
    "varieties. The cider is pressed every October by Bartholomew Wickenden, whose grandfather "
    "planted the first trees in 1938. A flock of geese grazes between the rows."
)
_CHOIR = (
    "The Glenharrow Male Voice Choir was formed by coal miners in 1908 and now has 47 "
    "singers. It is conducted by Nerys Pritchard-Lloyd and rehearses every Wednesday evening "
    "in the chapel vestry. A miner's lamp hangs by the vestry door."
)
_APIARY = (
    "Hartsease Apiary keeps 14 hives on the heath outside Lowther Cross. The beekeeper, "
    "Clementine Strachan, takes the honey off in late August, and a jar of the heather honey "
    "sells for £8.50. The apiary was started in 1999. Foxgloves grow along the hedge behind "
    "the hives."
)
_ALLOTMENT = (
    "Quarry Lane Allotments, on the edge of the market town of Besford, were laid out in 1913 "
    "and have 64 plots: 38 full plots, rented at £42 a year, and 26 half plots at £24 a year, "
    "all of them taken this year. The society's secretary is Winifred Achterberg, and members "
    "share a tool shed with a wood-burning stove. A scarecrow in a bowler hat guards the "
    "rhubarb bed."
)
_FESTIVAL = (
    "The Calderbrook Folk Festival has been held every July since 1977 in a sheep field "
    "outside the village of Kettlebury, and it is organised by Ruaridh Castellanos. This year "
    "it sold 2,380 weekend tickets at £96 each and 1,270 day tickets at £38 each. The headline "
    "act was a fiddle band from Shetland. A hedgehog once slept through a whole weekend under "
    "the main stage."
)
_TRIP = (
    "Year 6 at Ridgeholt Primary is spending three nights in May at the Cragside Outdoor "
    "Centre in the Langmere valley, which opened in 1969. The trip is led by Mr Florian "
    "Nakashima, and 58 pupils and 7 staff are going. The centre charges £215 for each pupil "
    "and £140 for each member of staff, and the activities include gorge walking and "
    "canoeing. The centre's minibus is called Dolores."
)
_WINDFARM = (
    "Skelderby Sands wind farm stands 12 km off the coast of the fishing town of Hollerby. "
    "Its 48 turbines are each rated at 6.5 megawatts, and the site is run by Norwind Energy "
    "with Henrike Aalbersberg as site manager. Construction finished in 2000. Kittiwakes nest "
    "on the substation platform every spring."
)
_COOP = (
    "Threlkeld Wholefoods is a members' co-operative in an old chapel on Beck Street in the "
    "town of Ambleholme. It was founded in 1988, has 287 members and is managed by Dagny "
    "Fairweather-Osei. Its sales rose from £40,500 last year to £47,790 this year. Deliveries "
    "from the farm arrive on Friday mornings. A brass bell hangs above the door."
)

HELDOUT6: tuple[Task, ...] = (
    # word problems: two to four steps on everyday quantities
    Task(
        "word_problem",
        "I'm repainting the spare room. Two of its walls are 5.1 m long, the other two are "
        "3.3 m, and the ceiling is 2.5 m high. Ignoring the door and window, and doing two "
        "coats, how many litres of paint do I need if a litre covers 10 m²?",
        _all(_number("8.4")),  # 2 * (5.1 + 3.3) = 16.8 m; * 2.5 = 42 m²; * 2 = 84 m²; / 10
    ),
    Task(
        "word_problem",
        "Our heat pump used 1,860 kWh over the 90 days of winter. Electricity is 27.2p per kWh "
        "and there's a standing charge of 53p a day. What does that come to in pounds?",
        # 1860 * 0.272 = 505.92; 90 * 0.53 = 47.70; 505.92 + 47.70 = 553.62
        _all(_number("553.62")),
    ),
    Task(
        "word_problem",
        "A sponge recipe that serves 4 needs 300 g of flour. I'm making it for 10 people out of "
        "a fresh 2 kg bag — how much flour will be left in the bag afterwards?",
        # 300 / 4 = 75 g a person; * 10 = 750 g; 2000 - 750 = 1250 g
        rf"(?s)\A(?=.*(?:{_number('1250')}|(?<![\d.])1\.25\s*(?:kg|kilo)))",
    ),
    Task(
        "word_problem",
        "For twenty-six weeks I put aside £85 a week, then for the next 14 weeks £120 a week. "
        "After that I bought a bike for £1,385. How much of my savings is left?",
        _all(_number("2505")),  # 26 * 85 = 2210; 14 * 120 = 1680; 3890 - 1385
    ),
    Task(
        "word_problem",
        "On Sunday I cycled 54 km at an average of 18 km/h, stopped for a 25-minute lunch, then "
        "rode another 33 km at 22 km/h. How long was I out altogether, lunch included?",
        # 54 / 18 = 3 h; 33 / 22 = 1.5 h; 3 h + 25 min + 1 h 30 min = 4 h 55 min = 295 min
        r"(?s)\A(?=.*(?:(?<![\d.])4\s*(?:hours?|hrs?|h)\s*(?:and\s+)?55\s*(?:minutes?|mins?|m)\b"
        r"|(?<![\d.])295\s*(?:minutes?|mins?)\b|(?<![\d.])4\.92\s*(?:hours?|hrs?|h)\b"
        r"|(?<![\d:.])4:55(?!\d)))",
    ),
    # extraction: named fields of a short text, as JSON
    Task(
        "extraction",
        "Just confirming the booking for Ingeborg Valtonen: flight FQ 482, Tromsø to Porto, on "
        "3 October, seat 17C, one checked bag. Can you turn that into JSON with passenger, "
        "flight_number, origin, destination, date, seat and checked_bags?",
        _all(
            _field("passenger", _text(r"ingeborg\s+valtonen")),
            _field("flight_number", _text(r"fq\s?-?482")),
            _field("origin", _text(r"troms(?:ø|o|oe)")),
            _field("destination", _text("porto")),
            _field("date", _date("0?3", "october", "10-03")),
            _field("seat", _text("17c")),
            _field("checked_bags", rf"(?:{_num('1')}|{_text('one')})"),
        ),
    ),
    Task(
        "extraction",
        "Receipt 20417 from Corvin & Daughters Hardware, 9 March: two boxes of wood screws, a "
        "claw hammer and a tin of wood filler, total $38.60, paid by Visa card. Give me store, "
        "receipt_number, date, items (a list), total and payment_method in JSON.",
        _all(
            _field("store", _text(r"corvin\s*(?:&|and)\s*daughters(?:\s+hardware)?")),
            _field("receipt_number", _num("20417")),
            _field("date", _date("0?9", "march", "03-09")),
            _field("items", r"\[(?=[^\]]*screws)(?=[^\]]*hammer)(?=[^\]]*filler)[^\]]*\]"),
            _field("total", _money("38.60", "$")),
            _field("payment_method", _text(r"[^\"'\n]*(?:visa|card)[^\"'\n]*")),
        ),
    ),
    Task(
        "extraction",
        "Flat to let: two bedrooms on the third floor at 9 Ashgrove Terrace, 68 m², €1,340 a "
        "month, available from 1 November, pets welcome, no parking. Please extract bedrooms, "
        "floor, size_m2, rent_eur, available_from, pets_allowed and parking (true/false).",
        _all(
            _field("bedrooms", rf"(?:{_num('2')}|{_text('two')})"),
            _field("floor", "(?:" + _num("3") + "|" + _text(r"(?:third|3rd)(?:\s+floor)?") + ")"),
            _field("size_m2", _num("68")),
            _field("rent_eur", _money("1340", "€")),
            _field("available_from", _date("0?1", "november", "11-01")),
            _field("pets_allowed", r"[\"']?(?:true|yes)\b"),
            _field("parking", r"[\"']?(?:false|no)\b"),
        ),
    ),
    Task(
        "extraction",
        "We're hiring a junior data analyst at Brackenfold Insurance in Bradford — £31,500 a "
        "year, hybrid with two days a week in the office, applications close 28 February. I need "
        "job_title, company, city, salary_gbp, office_days_per_week and closing_date as JSON.",
        _all(
            _field("job_title", _text(r"junior\s+data\s+analyst")),
            _field("company", _text(r"brackenfold(?:\s+insurance)?")),
            _field("city", _text("bradford")),
            _field("salary_gbp", _money("31500", "£")),
            _field("office_days_per_week", rf"(?:{_num('2')}|{_text('two')})"),
            _field("closing_date", _date("28", "february", "02-28")),
        ),
    ),
    Task(
        "extraction",
        "From the vet's note: Pickle, a seven-year-old beagle, is to have carprofen 50 mg, one "
        "tablet twice a day with food for 10 days, prescribed by Dr Leopold Pettersen. What are "
        "pet_name, breed, age_years, medicine, dose_mg, times_per_day, days and vet? As JSON.",
        _all(
            _field("pet_name", _text("pickle")),
            _field("breed", _text("beagle")),
            _field("age_years", rf"(?:{_num('7')}|{_text('seven')})"),
            _field("medicine", _text("carprofen")),
            _field("dose_mg", _num("50")),
            _field("times_per_day", rf"(?:{_num('2')}|{_text('twice')}|{_text('two')})"),
            _field("days", _num("10")),
            _field("vet", _text(r"(?:dr\.?\s+)?(?:leopold\s+)?pettersen")),
        ),
    ),
    # two questions on a paragraph of made-up facts
    Task(
        "two_questions",
        f"{_OBSERVATORY} How big is the main telescope's mirror, and who is the director?",
        _all(
            r"(?<![\d.])1\.9\s*(?:metres?|meters?|m)\b",
            r"\bquilligan\b",
            echo=(r"\b1954\b", r"6,?300", r"\bnebula\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_FERRY} How long does the crossing take? Who is the ferry's captain?",
        _all(
            r"(?:(?<![\d.])35|thirty[\s-]five)[\s-]*(?:minutes?|mins?)\b",
            r"\bbrzezinski\b",
            echo=(r"\b1976\b", r"\b24\b", r"\bseals?\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_ORCHARD} I'd like to know who presses the cider and how many apple varieties the "
        "orchard has.",
        _all(
            r"\bwickenden\b",
            rf"(?:{_number('23')}|twenty[\s-]three)",
            echo=(r"\b580\b", r"\b1938\b", r"\bgeese\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_CHOIR} Tell me who conducts the choir and on which evening it rehearses.",
        _all(r"\bpritchard", r"\bwednesday", echo=(r"\b1908\b", r"\b47\b", r"\blamp\b")),
    ),
    Task(
        "two_questions",
        f"{_APIARY} When does the honey get taken off, and who's the beekeeper?",
        _all(r"\baugust\b", r"\bstrachan\b", echo=(r"\b14\b", r"\b1999\b", "foxglove")),
    ),
    # classification: one label of a set given in the task
    Task(
        "classification",
        'Which of our policies should this claim go to — motor, home, travel or health? "My '
        "suitcase went missing on the flight to Faro and the airline still hasn't found it "
        'after nine days."',
        _label("travel", _POLICY),
    ),
    Task(
        "classification",
        "We're packing for the move and labelling boxes by room: kitchen, bathroom, bedroom or "
        "garage. Which room is this box for? 'A toolbox, two tins of engine oil, the lawnmower's "
        "spare blade and a bicycle pump.'",
        _label("garage", _ROOM),
    ),
    Task(
        "classification",
        "In the sentence 'The delivery van stopped abruptly outside the post office', what part "
        "of speech is 'abruptly': noun, verb, adjective or adverb?",
        _label("adverb", _SPEECH),
    ),
    Task(
        "classification",
        "Route this report to one council team (parking, waste_collection, street_lighting or "
        "noise): 'The lamp post outside number 9 has been flickering all week, and last night "
        "it didn't come on at all, so our end of the road was pitch black.'",
        _label("street_lighting", _COUNCIL),
    ),
    Task(
        "classification",
        "How should my budgeting app tag this line from my bank statement — income, expense or "
        'transfer? "Moved £500 from current account to Rainy Day savings pot"',
        _label("transfer", _LEDGER),
    ),
    # multi-part: background and a list of questions, one of them arithmetic
    Task(
        "multi_part",
        _listed(
            _ALLOTMENT,
            "Could you answer these for the newsletter?",
            "Who is the society's secretary?",
            "What is in the shared shed besides tools?",
            "How much rent does the society collect in a year?",
            mark="{0})",
        ),
        _all(
            r"\bachterberg\b",
            r"\bstove\b",
            _number("2220"),  # 38 * 42 = 1596; 26 * 24 = 624; 1596 + 624
            echo=(r"\b1913\b", r"\bbesford\b", r"\bbowler\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _FESTIVAL,
            "Four quick questions:",
            "Who organises the festival?",
            "In which month is it held?",
            "Where did the headline act come from?",
            "How much did this year's tickets bring in altogether?",
        ),
        _all(
            r"\bcastellanos\b",
            r"\bjuly\b",
            r"\bshetland\b",
            _number("276740"),  # 2380 * 96 = 228480; 1270 * 38 = 48260; sum
            echo=(r"\b1977\b", r"\bkettlebury\b", r"\bhedgehog\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _TRIP,
            "A parent asked me:",
            "who is leading the trip,",
            "how many nights they'll be away,",
            "and what the centre's bill will come to.",
            mark="*",
        ),
        _all(
            r"\bnakashima\b",
            r"(?:\bthree\b|(?<![\d.])3(?![\d]|[.,]\d))",
            _number("13450"),  # 58 * 215 = 12470; 7 * 140 = 980; 12470 + 980
            echo=(r"\b1969\b", r"\blangmere\b", r"\bdolores\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _WINDFARM,
            "For my geography homework:",
            "Who is the site manager?",
            "How far offshore is the wind farm?",
            "What is its total rated capacity, in megawatts?",
            mark="({1})",
        ),
        _all(
            r"\baalbersberg\b",
            r"(?<![\d.])12\s*(?:km|kilomet)",
            _number("312"),  # 48 * 6.5
            echo=(r"\b2000\b", r"\bhollerby\b", r"\bkittiwakes?\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _COOP,
            "Three things I'd like to know:",
            "Who manages the co-op?",
            "When do the farm deliveries come in?",
            "By what percentage did sales go up?",
            mark="{0}.",
        ),
        _all(
            r"\bfairweather",
            r"\bfriday",
            _number("18"),  # 47790 / 40500 = 1.18
            echo=(r"\b1988\b", r"\b287\b", r"\bbell\b"),
        ),
    ),
)
