r"""A fourth held-out set for real local models (``bench/local_models.py --parts compare``).

Written after the third round of tuning (on ``bench/local_tasks.py`` and the first three
held-out sets), blind to the orchestrator's heuristics (how it spots arithmetic, splits lists
of questions, checks working, routes to the calculator), and sharing no passage, name or
number with the earlier sets: phrased as people phrase requests, in varied forms (questions,
imperatives, a question inside a sentence; currency symbols, units, thousands separators,
numbers written as words; numbered and bulleted lists). Keep them out of prompts, plans and
examples, or they stop measuring anything.

Same :class:`~local_tasks.Task` shape, same kinds (five of each) and the same checks as the
earlier held-out sets (see ``local_tasks_heldout``'s docstring): ``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text; numbers with or without thousands commas and
trailing decimal zeros, never inside a longer number (where an exact value has more decimals
than money or minutes want, its sensible roundings are accepted too); JSON values checked one
by one, spacing and quote style free; one label and no other; for ``two_questions`` and
``multi_part``, an answer holding all three echo markers (facts no question asks for, one in
the passage's last sentence) is an echo of the passage, not an answer. Every pattern is
anchored (``\A``).
"""

from __future__ import annotations

from local_tasks import Task
from local_tasks_heldout import ONE_PART_KINDS, _all, _field, _label, _num, _number, _text

__all__ = ["HELDOUT4", "ONE_PART_KINDS"]

_ASPECT = ("food", "service", "price", "ambience")
_TEXT_KIND = ("recipe", "poem", "news_report", "instruction_manual")
_CARRIAGE = ("rail", "road", "air", "sea")
_DESK = ("loans", "cards", "savings", "fraud")
_SPEECH = ("noun", "verb", "adjective", "adverb")

_LIDO = (
    "Pennock Lido is an open-air pool on the cliffs at Stowmarsh, filled with seawater and 55 "
    "metres long. It was built in 1936 and reopened in 2007 after a campaign led by a retired "
    "swimming teacher, Maeve Corrigan. From May to September the water is warmed by a "
    "ground-source heat pump. The lifeguards' hut has a weathervane shaped like a seal."
)
_RADIO = (
    "Radio Kelderby has been on air since 2005, broadcasting on 104.6 FM from a converted "
    "signal box beside the station. It is run by 43 volunteers, and its longest-running "
    "programme is a Sunday folk show hosted by Ottilie Branagh. A framed photo of a steam "
    "engine hangs above the mixing desk."
)
_GLASS = (
    "Morrow Glassworks, in the hill town of Vedrin, has made glass since 1872. Its 33 "
    "glassblowers turn out mostly green drinking glasses, coloured with iron oxide. The works "
    "belongs to the Castellan brothers, Luca and Piero, and its main furnace has not been "
    "allowed to go cold since 1950. Visitors are greeted by a glass peacock in the entrance "
    "hall."
)
_DAIRY = (
    "Thistledown Dairy, on the edge of Harrowmere Common, makes a soft cheese called Little "
    "Wendle from the milk of its 92 Jersey cows. Each wheel is aged for six weeks in a cave "
    "cut into the chalk. The dairy is run by Nadia Okwuosa and her son Femi, and its cheese "
    "took a gold award in 1997. Swallows nest every summer above the milking parlour."
)
_FOUNDRY = (
    "The Ashby bell foundry cast its first bell in 1738 and its heaviest, Great Tobias, in "
    "1911; that bell weighs 7.2 tonnes and hangs in the cathedral at Wexmoor. The foundry is "
    "now run by the seventh generation of the Pellinore family, and every bell is still tuned "
    "by hand on a lathe. The yard cat is called Clapper."
)
_BALLOONS = (
    "The Skelmoor Balloon Fiesta is held every August on the water meadows outside Tarrow and "
    "was first held in 1991. This year 57 balloons took part. The fiesta's own balloon, "
    "Halcyon, takes up to 9 passengers a flight at £185 a seat; it flew 16 times over the "
    "weekend, full every time. The fiesta is directed by Rhiannon Gask. A brass band plays "
    "at the evening glow."
)
_CLIMB = (
    "Crux Yard is a climbing centre in a former tram depot in Ellesport, with 112 routes and "
    "a bouldering cave. It is owned by the twins Saoirse and Declan Mulvey. Adult membership "
    "costs $67 a month, or $690 for a year paid up front. Chalk is sold at the front desk. "
    "The depot's old clock still runs ten minutes slow."
)
_CANAL = (
    "The Ledwith Canal Trust was formed in 1972 to reopen the 21-mile Ledwith Canal, which "
    "has been closed to boats since 1944. The canal has 32 locks, and so far the trust's "
    "volunteers have restored 8 of them. Its chairwoman is Priscilla Haverford, and its work "
    "boat is called the Dabchick. Otters have been seen near the top lock."
)
_RESCUE = (
    "Hollybush Animal Rescue in Crannock rehomes dogs and cats. It was founded in 2001 by a "
    "vet, Ifeoma Adair, and has 24 dog kennels. Last year it found new homes for 297 dogs and "
    "205 cats. Feeding one dog costs the rescue about $2.15 a day. The volunteers' minibus is "
    "painted with paw prints."
)
_RACE = (
    "The Fenwick Sands Half Marathon was run for the ninth time on Sunday, starting and "
    "finishing on the promenade at Saltcote. The women's race was won by Kalani Brooks and "
    "the men's by Radek Wierzba. 1,265 runners finished, raising an average of £83 each for "
    "St Brannoc's Hospice, and the organisers' costs came to £17,650. A piper played at the "
    "start line."
)


def _listed(passage: str, lead: str, *questions: str, mark: str = "{}.") -> str:
    """The passage, a lead line, and the questions, each after ``mark`` (its number in it)."""
    listed = "\n".join(f"{mark.format(i)} {q}" for i, q in enumerate(questions, 1))
    return f"{passage}\n{lead}\n{listed}"


def _either(*values: str) -> str:
    """Any of the numbers ``values`` (an exact value and its sensible roundings)."""
    return "(?:" + "|".join(_number(v) for v in values) + ")"


def _money(value: str, symbols: str = "£$€") -> str:
    """A number value, bare or quoted, maybe after a currency symbol."""
    return rf"[\"']?[{symbols}]?\s*{_number(value)}"


HELDOUT4: tuple[Task, ...] = (
    # word problems: two to four steps on everyday quantities
    Task(
        "word_problem",
        "I'm setting off at 8:55 on a 74 km bike ride, and I usually average 20 km/h. With a "
        "fifty-minute lunch stop on the way, what time should I expect to be back?",
        # 74 / 20 = 3.7 h = 3 h 42 min; 8:55 + 3:42 = 12:37; + 0:50 = 13:27
        r"(?s)\A(?=.*(?<![\d:.])(?:13[:.h]27|0?1[:.]27(?!\s*a\.?\s*m\b))(?!\d))",
    ),
    Task(
        "word_problem",
        "A space heater draws 1,800 watts. If I run it five hours a night for the 30 nights of "
        "November and electricity costs 24.5 cents per kWh, how much will it add to my bill, "
        "in dollars?",
        _all(_number("66.15")),  # 1.8 kW * 5 h * 30 = 270 kWh; 270 * 0.245
    ),
    Task(
        "word_problem",
        "Twelve of us are going to a concert in Osaka. Tickets are ¥8,500 each, the promoter "
        "takes 10% off the ticket price for groups, and there's a ¥330 booking fee per ticket "
        "that isn't discounted. Work out the total for the group.",
        _all(_number("95760")),  # 8500 * 0.9 = 7650; 7650 + 330 = 7980; 7980 * 12
    ),
    Task(
        "word_problem",
        "Nine of us are chipping in for Dana's leaving present: an espresso machine at $145 "
        "plus 8.875% sales tax, and $18.50 for wrapping and delivery (no tax on that). If we "
        "split it evenly, how much does each of us put in?",
        # 145 * 1.08875 = 157.86875; + 18.50 = 176.36875; / 9 = 19.5965...
        _all(_either("19.60", "19.597", "19.5965")),
    ),
    Task(
        "word_problem",
        "My commute over the last four weeks added up to 6 h 12 min, 5 h 43 min, 6 h 35 min "
        "and 5 h 52 min, with five working days in each week. On average, how many minutes a "
        "day did I spend commuting?",
        _all(_number("73.1")),  # 372 + 343 + 395 + 352 = 1462 min; 1462 / 20
    ),
    # extraction: named fields of a short text, as JSON
    Task(
        "extraction",
        "To let: two-bedroom flat on Quayside Row, Harbourne, €1,465 a month, free from 1 "
        "September, sorry no pets. Can you give me bedrooms, street, rent_eur and pets_allowed "
        "(true or false) as JSON?",
        _all(
            _field("bedrooms", _num("2")),
            _field("street", _text(r"quayside\s+row(?:,?\s+harbourne)?")),
            _field("rent_eur", _money("1465", "€")),
            _field("pets_allowed", r"[\"']?(?:false|no)\b"),
        ),
    ),
    Task(
        "extraction",
        "Registration R-7730 confirmed: Dr. Selin Gürsoy of Marrow Biotech will attend days 1 "
        "and 3 of the symposium and has asked for a vegetarian meal. Extract registration_id, "
        "name, organisation, days (a list of numbers) and meal into JSON.",
        _all(
            _field("registration_id", _text(r"R-?7730")),
            _field("name", _text(r"(?:dr\.?\s*)?selin\s+g(?:ü|u|ue)rsoy")),
            _field("organisation", _text(r"marrow\s+biotech")),
            _field("days", r"\[\s*[\"']?1[\"']?\s*,\s*[\"']?3[\"']?\s*\]"),
            _field("meal", _text(r"vegetarian(?:\s+meal)?")),
        ),
    ),
    Task(
        "extraction",
        "The label says: Amoxelin 500 mg capsules, take one three times a day for seven days, "
        "with food. Put medication, dose_mg, times_per_day and course_days in a JSON object "
        "for me.",
        _all(
            _field("medication", _text(r"amoxelin(?:\s+500\s*mg)?(?:\s+capsules?)?")),
            _field("dose_mg", _num("500")),
            _field("times_per_day", _num("3")),
            _field("course_days", _num("7")),
        ),
    ),
    Task(
        "extraction",
        "Hi Jonah, your interview for the junior data analyst role at Pellow & Grange is on "
        "Thursday 17 June at 2:30 pm in room 4.07, with Marguerite Oyelaran. What I need from "
        "this email, as JSON: role, company, weekday, time, room, interviewer.",
        _all(
            _field("role", _text(r"junior\s+data\s+analyst(?:\s+role)?")),
            _field("company", _text(r"pellow\s*(?:&|and)\s*grange")),
            _field("weekday", _text("thursday")),
            _field("time", _text(r"(?:14[:.]30|0?2[:.]30\s*p\.?\s*m\.?)")),
            _field("room", r"[\"']?\s*(?:room\s+)?4\.07(?!\d)\s*[\"']?"),
            _field("interviewer", _text(r"marguerite\s+oyelaran")),
        ),
    ),
    Task(
        "extraction",
        "Morning run logged: Riverside Loop, 12.6 km in 1 h 04 min, average heart rate 148 "
        "bpm, 612 kcal. Convert it to JSON with route, distance_km, duration_min (a number of "
        "minutes), avg_hr and kcal.",
        _all(
            _field("route", _text(r"riverside\s+loop")),
            _field("distance_km", _num("12.6")),
            _field("duration_min", _num("64")),
            _field("avg_hr", _num("148")),
            _field("kcal", _num("612")),
        ),
    ),
    # two questions on a paragraph of made-up facts
    Task(
        "two_questions",
        f"{_LIDO} Who led the campaign to reopen the lido, and what warms its water?",
        _all(r"\bcorrigan\b", r"heat\s+pump", echo=(r"\b55\b", r"\b1936\b", "weathervane")),
    ),
    Task(
        "two_questions",
        f"{_RADIO} What frequency is the station on? I'd also like to know who hosts the Sunday "
        "folk show.",
        _all(_number("104.6"), r"\bbranagh\b", echo=(r"\b2005\b", r"\b43\b", r"\bsteam\b")),
    ),
    Task(
        "two_questions",
        f"{_GLASS} Tell me who owns the glassworks and what gives its glasses their colour.",
        _all(r"\bcastellan\b", r"iron\s+oxide", echo=(r"\b1872\b", r"\b33\b", "peacock")),
    ),
    Task(
        "two_questions",
        f"{_DAIRY} Could you tell me which breed of cow the milk comes from and how long each "
        "wheel is aged?",
        _all(
            r"\bjerseys?\b",
            r"(?:\bsix|(?<![\d.])6)[\s-]+weeks?\b",
            echo=(r"\bokwuosa\b", r"\b1997\b", "swallow"),
        ),
    ),
    Task(
        "two_questions",
        f"{_FOUNDRY} Where does Great Tobias hang? And how are the bells tuned?",
        _all(r"\bwexmoor\b", r"\blathe\b", echo=(r"\b1738\b", r"\bpellinore\b", r"\bclapper\b")),
    ),
    # classification: one label of a set given in the task
    Task(
        "classification",
        "Tag this restaurant review with its main aspect (food, service, price or ambience): "
        '"The waiter forgot our order twice and we had to go up to the bar ourselves to ask '
        'for water."',
        _label("service", _ASPECT),
    ),
    Task(
        "classification",
        "What kind of text is this? Choose from recipe, poem, news_report or "
        "instruction_manual. 'Press and hold the pairing button for ten seconds until the "
        "light blinks amber, then release it and wait for the chime.'",
        _label("instruction_manual", _TEXT_KIND),
    ),
    Task(
        "classification",
        "I sort shipments by how they travelled: rail, road, air or sea. Where does this one "
        'go? "The reefer containers were unloaded at Rotterdam after eleven days crossing the '
        'Atlantic."',
        _label("sea", _CARRIAGE),
    ),
    Task(
        "classification",
        'Which desk at the bank should handle this call: loans, cards, savings or fraud? "Someone '
        "in another country just bought three phones from my account and I never made those "
        'purchases."',
        _label("fraud", _DESK),
    ),
    Task(
        "classification",
        "In the sentence 'The kite rose swiftly above the dunes', what part of speech is "
        "'swiftly': noun, verb, adjective or adverb? Just the label, please.",
        _label("adverb", _SPEECH),
    ),
    # multi-part: background and a list of questions, one of them arithmetic
    Task(
        "multi_part",
        _listed(
            _BALLOONS,
            "Some questions for you:",
            "Who directs the fiesta?",
            "What is the fiesta's own balloon called?",
            "How much did its passenger flights take in over the weekend?",
        ),
        _all(
            r"\bgask\b",
            r"\bhalcyon\b",
            _number("26640"),  # 9 * 16 = 144 seats; 144 * 185
            echo=(r"\b1991\b", r"\b57\b", r"\bbrass\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _CLIMB,
            "I'm thinking of joining and want to know:",
            "who owns Crux Yard,",
            "what the building used to be,",
            "and how much I'd save in a year by paying up front rather than monthly.",
            mark="-",
        ),
        _all(
            r"\bmulvey\b",
            r"tram\s+depot",
            _number("114"),  # 67 * 12 = 804; 804 - 690
            echo=(r"\b112\b", r"\bchalk\b", r"\bclock\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _CANAL,
            "Please answer these:",
            "Who chairs the trust?",
            "Since when has the canal been closed to boats?",
            "What percentage of its locks still need restoring?",
            "What is the work boat called?",
            mark="{})",
        ),
        _all(
            r"\bhaverford\b",
            r"\b1944\b",
            _number("75"),  # 32 - 8 = 24; 24 / 32 = 0.75
            r"\bdabchick\b",
            echo=(r"\b1972\b", r"\b21\b", r"\botters?\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _RESCUE,
            "Could you help with the following?",
            "Who founded the rescue?",
            "How many cats did it rehome last year?",
            "If all the dog kennels stayed full for a whole year of 365 days, what would the "
            "dogs' food cost?",
        ),
        _all(
            r"\badair\b",
            _number("205"),
            _number("18834"),  # 24 * 365 = 8760 dog-days; 8760 * 2.15
            echo=(r"\b2001\b", r"\bcrannock\b", r"\bminibus\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _RACE,
            "A few questions about the race:",
            "Who won the women's race?",
            "Which charity does the money go to?",
            "How much will the charity get once the organisers' costs are covered?",
            mark="({})",
        ),
        _all(
            r"\bbrooks\b",
            r"\bbrannoc",
            _number("87345"),  # 1265 * 83 = 104995; 104995 - 17650
            echo=(r"\bninth\b", r"\bsaltcote\b", r"\bpiper\b"),
        ),
    ),
)
