r"""A seventh held-out set for real local models (``bench/local_models.py --parts compare``).

Written after the sixth round of tuning (on ``bench/local_tasks.py`` and the first six
held-out sets), blind to the orchestrator's heuristics (how it spots arithmetic, splits lists
of questions, checks working, routes to the calculator), and sharing no passage, name or
distinctive number with the earlier sets: phrased as people phrase requests, in varied forms
(questions, imperatives, a request inside a quoted message; currency symbols, units, thousands
separators, numbers written as words; numbered, lettered, bracketed and bulleted lists). Keep
them out of prompts, plans and examples, or they stop measuring anything.

Same :class:`~local_tasks.Task` shape, same kinds (five of each) and the same checks as the
earlier held-out sets (see ``local_tasks_heldout``'s docstring): ``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text; numbers with or without thousands commas and
trailing decimal zeros, never inside a longer number; JSON values checked one by one, spacing
and quote style free; one label and no other; for ``two_questions`` and ``multi_part``, an
answer holding all three echo markers (facts no question asks for, one in the passage's last
sentence) is an echo of the passage, not an answer. Three of the ``two_questions`` ask for a
measurement, a duration or a count the passage states (a look-up, not a sum). Every pattern is
anchored (``\A``).
"""

from __future__ import annotations

from local_tasks import Task
from local_tasks_heldout import ONE_PART_KINDS, _all, _field, _label, _num, _number, _text
from local_tasks_heldout5 import _date, _listed, _money

__all__ = ["HELDOUT7", "ONE_PART_KINDS"]

_SENSE = ("sight", "hearing", "smell", "taste", "touch")
_SENTENCE = ("statement", "question", "command", "exclamation")
_CLINIC = ("cardiology", "dermatology", "neurology", "ophthalmology")
_FORM_FIELD = ("email", "phone", "postcode", "date")
_HOTEL_DESK = ("housekeeping", "maintenance", "room_service", "reception")

_RAILWAY = (
    "The Tregarrow Valley Railway runs steam trains along 11.5 km of narrow-gauge track from "
    "Porthcollan to Polgrista Halt. It was reopened by volunteers in 1971, its chief engineer "
    "is Morwenna Pascoe, and it owns five locomotives. A stuffed pike in a glass case hangs in "
    "the booking office."
)
_FALCONRY = (
    "Ashcombe Falconry Centre, in the woods above the village of Lydgate St Mary, keeps 51 "
    "birds of prey. Its flying displays last forty minutes and are given by the head falconer, "
    "Ysolde Maclachlan. The centre was opened in 1993. An old red tractor rusts quietly beside "
    "the car park."
)
_DISTILLERY = (
    "The Ardnashee distillery stands on the shore of Loch Corrabhain and has made whisky since "
    "1826. Its three warehouses hold 3,460 casks, and its master distiller is Fenella "
    "Mackintosh-Burns. Every spirit is aged in old sherry butts shipped from Jerez. A pair of "
    "oystercatchers nests on the shingle by the pier."
)
_MUSHROOMS = (
    "Underhill Mushrooms grows oyster and shiitake mushrooms in the vaulted cellars of a "
    "disused brewery in Pellacombe, where the air stays at 13°C all year round. The farm was "
    "started in 1992 by Osric Blundell-Ashe and now supplies a dozen restaurants. A colony of "
    "pipistrelle bats roosts above the cellar steps."
)
_CLOCK = (
    "The market hall clock in Dunharrow was made in 1867 and has four faces, each 2.1 metres "
    "across. It is wound by hand every Saturday morning by Augustin Feltwell, who climbs 117 "
    "steps to reach the mechanism. A family of starlings lives behind the west face."
)
_SAILING = (
    "Dorravaig Sailing Club was founded in 1952 on the north shore of Loch Dorravaig, near the "
    "village of Inverstrathy. Its commodore is Hamish Oyelowo-Grant, and its dinghies race "
    "every Sunday afternoon from April to October. This year it has 116 adult members paying "
    "£195 each and 49 junior members paying £65 each. A ship's figurehead of a mermaid stands "
    "outside the clubhouse."
)
_BREWERY = (
    "The Crookback Brewery is a two-person microbrewery in a former fire station in the town "
    "of Halstow Magna. It was set up in 1995 by Perpetua Ndlovu, and its best seller is a "
    "smoked porter called Cinder Path. It brews on three days a week, making 616 litres on "
    "each brewing day, and every drop of it goes into 440 ml cans. The old brass pole still "
    "runs down through the middle of the tasting room."
)
_CINEMA = (
    "The Roxburgh Picture House in the seaside town of Carrickmead is a 1930s cinema with "
    "188 seats, run as a charity. Its films are chosen by a volunteer, Lorcan Whitlow, and "
    "every Thursday it shows a silent film with a live pianist. Admissions rose from 3,250 "
    "last year to 4,160 this year. The projection room still holds an old carbon-arc projector "
    "named Gloria."
)
_SPONSORED_WALK = (
    "Every June the pupils of Hazelmere Junior School, founded in 1889, walk a 9 km loop "
    "around Fallowby Reservoir for charity. This year 86 pupils took part and raised an "
    "average of £3.25 for every kilometre each of them walked, all of it for the Wyvern Air "
    "Ambulance. The walk was organised by the PE teacher, Berenice Otieno. A lollipop lady in a "
    "tutu cheered everyone over the finishing line."
)
_HENS = (
    "Brackenholme Farm, in the hills above the market town of Ollerton Bridge, keeps 1,380 "
    "free-range hens, and on average each of them lays 5 eggs a week. The eggs are sold in "
    "half-dozen boxes at £2.10 a box from an honesty shed at the farm gate. The farm is run by "
    "Thaddeus Quayle, who took it over from his aunt in 1984. The hens are guarded by two "
    "white Maremma dogs."
)

HELDOUT7: tuple[Task, ...] = (
    # word problems: two to four steps on everyday quantities
    Task(
        "word_problem",
        'My friend just texted: "Dinner for the five of us came to $187.50 before tax. Tax is '
        "8%, and we're tipping 18% of the pre-tax amount. Can you work out what each of us owes "
        'if we split it evenly?"',
        # 187.50 * 0.08 = 15.00; 187.50 * 0.18 = 33.75; 187.50 + 15.00 + 33.75 = 236.25; / 5
        _all(_number("47.25")),
    ),
    Task(
        "word_problem",
        "I lent my brother £6,400 at 3.25% simple interest a year, to be paid back in one go "
        "after two and a half years. How much will he owe me altogether when it's due?",
        _all(_number("6920")),  # 6400 * 0.0325 = 208 a year; 208 * 2.5 = 520; 6400 + 520
    ),
    Task(
        "word_problem",
        "The sofa I like is €1,280 and it's 15% off this week. If I add the €24 arrangement fee "
        "and spread the lot over eight equal monthly payments, how much is each payment?",
        _all(_number("139")),  # 1280 * 0.85 = 1088; 1088 + 24 = 1112; 1112 / 8
    ),
    Task(
        "word_problem",
        "I'm catching the 07:48 train from Aldermoss to Strathkell, which takes 3 h 39 min. "
        "Then I wait twenty-eight minutes for the connecting bus, and the bus ride to Glenbrae "
        "is 1 h 56 min. What time will I get to Glenbrae?",
        # 07:48 + 3:39 = 11:27; + 0:28 = 11:55; + 1:56 = 13:51
        r"(?s)\A(?=.*(?<![\d:.])(?:13[:.h]51|0?1[:.]51(?!\s*a\.?\s*m\b))(?!\d))",
    ),
    Task(
        "word_problem",
        "The bathroom tap drips once every second, and twenty drops make a millilitre. If "
        "nobody fixes it for a fortnight, how many litres of water will it waste?",
        # 14 * 24 * 3600 = 1209600 drops; / 20 = 60480 ml; / 1000 = 60.48 litres
        rf"(?s)\A(?=.*(?:{_number('60.48')}|{_number('60480')}\s*(?:ml|millilit)))",
    ),
    # extraction: named fields of a short text, as JSON
    Task(
        "extraction",
        "Job card 6621, Spindle & Sprocket Cycles: new chain and rear cassette fitted to a "
        "touring bike for Casimir Oduya, parts £54.80 plus £30 labour, ready for collection on "
        "Wednesday. Give me job_number, customer, parts_gbp and collection_day as JSON.",
        _all(
            _field("job_number", _num("6621")),
            _field("customer", _text(r"(?:mr\.?\s+)?casimir\s+oduya")),
            _field("parts_gbp", _money("54.80", "£")),
            _field("collection_day", _text("wednesday")),
        ),
    ),
    Task(
        "extraction",
        'Forwarding this from the box office: "2 tickets for The Marram Singers at the '
        'Kilnhouse Theatre, Galway, on 14 November, row F, €36.50 each." Could you put '
        "act, venue, date and ticket_price_eur into a JSON object?",
        _all(
            _field("act", _text(r"(?:the\s+)?marram\s+singers")),
            _field("venue", _text(r"(?:the\s+)?kilnhouse(?:\s+theatre)?(?:,?\s+galway)?")),
            _field("date", _date("14", "november", "11-14")),
            _field("ticket_price_eur", _money("36.50", "€")),
        ),
    ),
    Task(
        "extraction",
        "Order confirmed with Wren & Hawthorn Nurseries: three Japanese maples and a bag of "
        "ericaceous compost, delivered to Ellerby on 26 April, total $412.90 including "
        "delivery. Extract supplier, number_of_trees, delivery_date and total_usd as JSON.",
        _all(
            _field("supplier", _text(r"wren\s*(?:&|and)\s*hawthorn(?:\s+nurser(?:y|ies))?")),
            _field("number_of_trees", rf"(?:{_num('3')}|{_text('three')})"),
            _field("delivery_date", _date("26", "april", "04-26")),
            _field("total_usd", _money("412.90", "$")),
        ),
    ),
    Task(
        "extraction",
        "Ilse Vandermolen has signed up for Beginners' Woodturning: six Tuesday evenings from 9 "
        "September, £165 for the course. Pull out student, course, sessions and fee_gbp into "
        "JSON for me.",
        _all(
            _field("student", _text(r"ilse\s+vandermolen")),
            _field("course", _text(r"beginners?'?\s+woodturning")),
            _field("sessions", rf"(?:{_num('6')}|{_text('six')})"),
            _field("fee_gbp", _money("165", "£")),
        ),
    ),
    Task(
        "extraction",
        "Walk log, Saturday: Ben Crochan by the east ridge, 14.2 km there and back, 960 m of "
        "ascent, summit at 1,047 m. Turn it into JSON with peak, distance_km, ascent_m and "
        "summit_height_m.",
        _all(
            _field("peak", _text(r"ben\s+crochan")),
            _field("distance_km", _num("14.2")),
            _field("ascent_m", _num("960")),
            _field("summit_height_m", _num("1047")),
        ),
    ),
    # two questions on a paragraph of made-up facts
    Task(
        "two_questions",
        f"{_RAILWAY} How long is the line, and who is the chief engineer?",
        _all(
            r"(?<![\d.])11\.5\s*(?:km|kilomet)",
            r"\bpascoe\b",
            echo=(r"\b1971\b", r"\bfive\b", r"\bpike\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_FALCONRY} Who gives the flying displays? And how long does a display last?",
        _all(
            r"\bmaclachlan\b",
            r"(?:(?<![\d.])40|forty)[\s-]*(?:minutes?|mins?)\b",
            echo=(r"\b51\b", r"\b1993\b", r"\btractor\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_DISTILLERY} I'd like to know how many casks the warehouses hold and who the master "
        "distiller is.",
        _all(
            _number("3460"),
            r"\bmackintosh",
            echo=(r"\b1826\b", r"\bjerez\b", r"\boystercatchers?\b"),
        ),
    ),
    Task(
        "two_questions",
        f'{_MUSHROOMS} My daughter wants to know: "Which mushrooms do they grow there, and who '
        'started the farm?"',
        _all(
            r"\boyster",
            r"\bshiitake\b",
            r"\bblundell",
            echo=(r"\b13\s*°", r"\b1992\b", r"\bpipistrelles?\b"),
        ),
    ),
    Task(
        "two_questions",
        f"{_CLOCK} Tell me who winds the clock and on which day of the week.",
        _all(r"\bfeltwell\b", r"\bsaturdays?\b", echo=(r"\b1867\b", r"\b117\b", r"\bstarlings?\b")),
    ),
    # classification: one label of a set given in the task
    Task(
        "classification",
        "Which sense does this line of the poem mostly appeal to: sight, hearing, smell, taste "
        'or touch? "The whole harbour reeked of diesel, tar and yesterday\'s herring."',
        _label("smell", _SENSE),
    ),
    Task(
        "classification",
        "Is this sentence a statement, question, command or exclamation? 'Shut the top gate "
        "behind you and keep the dogs on a lead through the lambing field.' Label only, please.",
        _label("command", _SENTENCE),
    ),
    Task(
        "classification",
        "Which clinic should this GP referral go to — cardiology, dermatology, neurology or "
        'ophthalmology? "A mole on her left shoulder has doubled in size since the spring and '
        'its edges have become ragged and uneven."',
        _label("dermatology", _CLINIC),
    ),
    Task(
        "classification",
        "Our sign-up form checks what kind of value someone typed into a box: email, phone, "
        "postcode or date. Which one is 'EH7 5QJ'?",
        _label("postcode", _FORM_FIELD),
    ),
    Task(
        "classification",
        'A guest just rang down: "Could we have two club sandwiches and a pot of Earl Grey sent '
        'up to our room, please?" Which desk takes this — housekeeping, maintenance, '
        "room_service or reception?",
        _label("room_service", _HOTEL_DESK),
    ),
    # multi-part: background and a list of questions, one of them arithmetic
    Task(
        "multi_part",
        _listed(
            _SAILING,
            "For the club's annual report, please answer:",
            "Who is the commodore?",
            "When do the dinghies race?",
            "How much do this year's membership fees bring in?",
            mark="[{0}]",
        ),
        _all(
            r"\boyelowo",
            r"\bsundays?\b",
            _number("25805"),  # 116 * 195 = 22620; 49 * 65 = 3185; 22620 + 3185
            echo=(r"\b1952\b", r"\binverstrathy\b", r"\bmermaids?\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _BREWERY,
            "Three questions, if you don't mind:",
            "Who set up the brewery?",
            "What is its best-selling beer?",
            "How many cans does it fill in a week?",
            mark="{1})",
        ),
        _all(
            r"\bndlovu\b",
            r"(?:cinder\s+path|smoked\s+porter)",
            _number("4200"),  # 3 * 616 = 1848 litres = 1848000 ml; 1848000 / 440
            echo=(r"\b1995\b", r"\bhalstow\b", r"\bpole\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _CINEMA,
            "I'm writing it up for the local paper and need to know",
            "who chooses the films,",
            "what happens on Thursdays,",
            "and by what percentage admissions went up.",
            mark="•",
        ),
        _all(
            r"\bwhitlow\b",
            r"(?:\bsilent\b|\bpian)",
            _number("28"),  # 4160 / 3250 = 1.28
            echo=(r"\b188\b", r"\bcarrickmead\b", r"\bgloria\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _SPONSORED_WALK,
            "Questions from the governors:",
            "Who organised the walk?",
            "Which charity does the money go to?",
            "How much did the pupils raise in total?",
        ),
        _all(
            r"\botieno\b",
            r"\bwyvern\b",
            _number("2515.50"),  # 86 * 9 = 774 km; 774 * 3.25
            echo=(r"\b1889\b", r"\bfallowby\b", r"\btutu\b"),
        ),
    ),
    Task(
        "multi_part",
        _listed(
            _HENS,
            "Before I visit, tell me:",
            "who runs the farm,",
            "where the eggs are sold,",
            "and how much the eggs bring in a week if every one of them is sold.",
            mark="-",
        ),
        _all(
            r"\bquayle\b",
            r"(?:honesty|\bshed\b|farm\s+gate)",
            _number("2415"),  # 1380 * 5 = 6900 eggs; 6900 / 6 = 1150 boxes; 1150 * 2.10
            echo=(r"\b1984\b", r"\bollerton\b", r"\bmaremmas?\b"),
        ),
    ),
)
