r"""Held-out tasks for real local models (``bench/local_models.py --parts compare``).

Written before, and apart from, any tuning of the orchestrator on ``bench/local_tasks.py``:
keep them out of prompts, plans and examples, or they stop measuring anything.

Same :class:`~local_tasks.Task` shape, checked the same way (``re.search(expect, answer,
re.IGNORECASE)`` on the final answer's text). Kinds, six of each, and the multi-part jobs:

- ``word_problem``: arithmetic in words (prices with discount and tax, unit rates, totals of
  several items, a percent change) whose exact value is hard to get by mental arithmetic;
- ``extraction``: fields of a short text as a JSON object (keys named in the task); each value
  is checked, spacing and quote style free, numbers as numbers or strings;
- ``two_questions``: a paragraph of made-up facts and two questions; both answers must be there;
- ``classification``: one label from a set given in the task: the right label, and no other;
- ``multi_part``: background text and a numbered list of 3-4 questions, one arithmetic, shaped
  like the README's research example (not a job of one part).

Numbers are accepted with or without thousands commas and trailing decimal zeros ("1,755",
"1755", "$331.10", "331.1"), never inside a longer number ("11755", "331.15"). An answer that
repeats the whole passage would hold every fact: for ``two_questions`` and ``multi_part``
tasks, an answer holding all three of its markers, facts no question asks for (one of them
in the passage's last, unrelated sentence: e.g. "1964", "212" and "lighthouse"), is an echo,
not an answer; one or two of them in a wordy right answer are fine. Every pattern is anchored
(``\A``), so the lookaheads see the whole answer.
"""

from __future__ import annotations

import re

from local_tasks import Task

__all__ = ["HELDOUT", "ONE_PART_KINDS"]

_GROUP = 3  # digits between thousands commas
ONE_PART_KINDS = frozenset({"word_problem", "extraction", "two_questions", "classification"})


def _number(value: str) -> str:
    """The number ``value`` ("13253", "351.05", "10.8") with commas or not, not in a longer one."""
    whole, _, fraction = value.partition(".")
    groups: list[str] = []
    while len(whole) > _GROUP:
        groups.insert(0, whole[-_GROUP:])
        whole = whole[:-_GROUP]
    groups.insert(0, whole)
    fraction = fraction.rstrip("0")
    tail = rf"\.{fraction}0*" if fraction else r"(?:\.0+)?"
    return rf"(?<![\d.,]){',?'.join(groups)}{tail}(?![\d]|[.,]\d)"


def _all(*patterns: str, echo: tuple[str, ...] = ()) -> str:
    """Every one of ``patterns`` in the answer; not all of the ``echo`` markers at once."""
    guard = "(?!" + "".join(f"(?=.*{m})" for m in echo) + ")" if echo else ""
    return r"(?s)\A" + guard + "".join(f"(?=.*{p})" for p in patterns)


def _words(text: str) -> str:
    """``text`` with any spacing between its words."""
    return r"\s+".join(re.escape(w) for w in text.split())


def _field(key: str, value: str) -> str:
    """``"key": value`` in JSON or a Python dict's quotes, any spacing."""
    return rf"[\"']{key}[\"']\s*:\s*{value}"


def _text(value: str) -> str:
    """A quoted string value that is ``value`` (a pattern), maybe padded with spaces."""
    return rf"[\"']\s*{value}\s*[\"']"


def _num(value: str) -> str:
    """A number value, bare or quoted."""
    return rf"[\"']?{_number(value)}[\"']?"


def _label(right: str, labels: tuple[str, ...]) -> str:
    """Exactly the label ``right`` of ``labels``: present, and no other label present."""
    if right not in labels:  # a typo in the table below, caught at import
        raise ValueError(f"{right!r} is not one of {labels}")

    def word(label: str) -> str:
        return r"\b" + label.replace("_", "[_ -]?") + r"\b"

    others = "|".join(word(label) for label in labels if label != right)
    return rf"(?s)\A(?!.*(?:{others}))(?=.*{word(right)})"


def _classify(item: str, labels: tuple[str, ...]) -> str:
    return f"{item} Labels: {', '.join(labels)}. Answer with the one label that fits."


def _questions(passage: str, *questions: str) -> str:
    listed = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
    return f"{passage}\nQuestions:\n{listed}"


_SENTIMENT = ("positive", "negative", "neutral")
_TICKET = ("billing", "shipping", "technical", "account")
_LANGUAGE = ("English", "French", "German", "Spanish", "Italian")
_EMAIL = ("meeting_request", "complaint", "invoice", "spam")
_TOPIC = ("sports", "politics", "science", "business")
_QUANTITY = ("length", "mass", "time", "temperature")

_MUSEUM = (
    "The Orvell Museum opened in 1964 in the town of Marrick. Its founder, the sculptor Leda "
    "Fontaine, gave it 212 of her works. In 1989 the museum moved to a larger building in "
    "Selby, where it still stands today. The gift shop sells postcards of a lighthouse."
)
_ROWING = (
    "The Kestrel Rowing Club has 58 members. Its head coach is Ines Varga, who took over from "
    "Paul Dreyer in 2018. The club trains on the Lune river every Saturday at 6 a.m. Last "
    "winter the boathouse roof was repaired."
)
_FOODS = (
    "Brightwater Foods was founded by Samir Haddad in 2003. Its plant in Dunmore makes oat "
    "biscuits and employs 340 people. In 2021 the company opened a second plant, in "
    "Castlebar, which makes rice crackers and employs 95 people. The company's mascot is a "
    "heron."
)
_PROBE = (
    "The Tarn-3 probe was launched on 9 May 2019 and reached the comet Halvard in 2022, after "
    "passing the asteroid Ostra. It carries a spectrometer built in Delft and a camera built in "
    "Turin. Its mission leader is Dr. Chen Lu. The control room's coffee machine is called "
    "Bertha."
)
_SCHOOL = (
    "Greyfield School has 14 classrooms and 410 pupils. Its headteacher, Olga Brandt, also "
    "teaches chemistry to the oldest class. The school choir won the regional prize in 2015 "
    "and again in 2020; the chess club won it in 2017. A fox often crosses the playground."
)
_TRIP = (
    "Our trip to the Varn Islands starts with a ferry from Port Ellis at 09:10; the crossing "
    "takes 2 hours 15 minutes. On the main island we stay three nights at the Gull Inn, then "
    "we fly back on Friday by seaplane. The ferry's captain keeps a parrot."
)
_WIND = (
    "The Solvik Wind Farm stands on a ridge above the village of Aldby. It has 36 turbines, "
    "each rated at 4.2 megawatts. It was built by Norvent and began operating in 2017. Its "
    "power goes to the city of Harlund through a 48 km cable. The visitor centre sells wool "
    "hats."
)
_KORA = (
    "Kora is a messaging app made by Pellucid Labs in Tallinn. Its messages are end-to-end "
    "encrypted with the Signal protocol. Its servers run in two data centres, one in "
    "Frankfurt and one in Helsinki. The team's office dog is called Biscuit."
)
_ORCHARD = (
    "The Amberly orchard grows three apple varieties: Redmoor, Goldfinch and Pippet. Redmoor is "
    "picked in September, Goldfinch in October and Pippet in November. The orchard's cider "
    "press was bought in 1998. The owners keep bees in 27 hives, and each hive gives 17.5 kg "
    "of honey a year. The farm shop's sign was painted by a neighbour."
)

HELDOUT: tuple[Task, ...] = (
    # -- word problems: the exact value needs a calculator --------------------------------
    Task(
        "word_problem",
        "A stationery shop sells notebooks at $3.85 each and pens at $1.35 each. Maya buys 47 "
        "notebooks and 126 pens. How much does she pay in all, in dollars?",
        # 47 * 3.85 = 180.95; 126 * 1.35 = 170.10; 180.95 + 170.10 = 351.05
        _all(_number("351.05")),
    ),
    Task(
        "word_problem",
        "A jacket's list price is $385. The shop takes 20% off, then adds 7.5% sales tax to "
        "the discounted price. What is the final price, in dollars?",
        # 385 * 0.80 = 308.00; 308 * 1.075 = 331.10
        _all(_number("331.10")),
    ),
    Task(
        "word_problem",
        "A printer prints 2,418 pages in 62 minutes. At the same rate, how many pages does it "
        "print in 45 minutes?",
        # 2418 / 62 = 39 pages a minute; 39 * 45 = 1755
        _all(_number("1755")),
    ),
    Task(
        "word_problem",
        "A town had 7,250 residents in 2019 and 8,033 in 2024. By what percent did its "
        "population grow from 2019 to 2024?",
        # 8033 - 7250 = 783; 783 / 7250 = 0.108 -> 10.8 %
        _all(_number("10.8")),
    ),
    Task(
        "word_problem",
        "A warehouse ships 37 boxes of 144 screws, 26 boxes of 250 screws and 19 boxes of 75 "
        "screws. How many screws does it ship in all?",
        # 37 * 144 = 5328; 26 * 250 = 6500; 19 * 75 = 1425; 5328 + 6500 + 1425 = 13253
        _all(_number("13253")),
    ),
    Task(
        "word_problem",
        "A car uses 6.4 litres of fuel per 100 km, and fuel costs 1.85 euros a litre. How "
        "much does the fuel for a 1,375 km trip cost, in euros?",
        # 1375 * 6.4 / 100 = 88 litres; 88 * 1.85 = 162.80
        _all(_number("162.80")),
    ),
    # -- extraction to JSON ---------------------------------------------------------------
    Task(
        "extraction",
        'Return a JSON object with the keys "name", "age", "from_city" and "to_city" for '
        "this sentence: Last spring Tomas Reyes, aged 41, moved from Leeds to Ostrava.",
        _all(
            _field("name", _text(_words("Tomas Reyes"))),
            _field("age", _num("41")),
            _field("from_city", _text("leeds")),
            _field("to_city", _text("ostrava")),
        ),
    ),
    Task(
        "extraction",
        'Return a JSON object with the keys "invoice", "vendor", "date" and "amount" (a '
        "number) for this line: Invoice INV-2291 from Keller Tools, dated 2024-03-18, "
        "amount due 1,480.00 EUR.",
        _all(
            _field("invoice", _text("INV-2291")),
            _field("vendor", _text(_words("Keller Tools"))),
            _field("date", _text("2024-03-18")),
            _field("amount", _num("1480")),
        ),
    ),
    Task(
        "extraction",
        'Return a JSON object with the keys "flight", "origin", "destination", "departure" '
        'and "gate" for this notice: Flight LX 318 leaves Zurich at 07:45 and lands at '
        "London Heathrow at 08:30; boarding is at gate B34.",
        _all(
            _field("flight", _text(r"LX\s?318")),
            _field("origin", _text(r"z[uü]rich")),
            _field("destination", r"[\"'][^\"']*(?:london|heathrow)[^\"']*[\"']"),
            _field("departure", _text(r"0?7:45")),
            _field("gate", _text("B34")),
        ),
    ),
    Task(
        "extraction",
        'Return a JSON object with the keys "name", "email", "phone" and "department" for '
        "this note: For scans, call Dr. Amara Osei (Radiology) on +44 20 7946 0321 or write "
        "to a.osei@northfield.example.",
        _all(
            _field("name", _text(r"(?:dr\.?\s*)?amara\s+osei")),
            _field("email", _text(re.escape("a.osei@northfield.example"))),
            _field("phone", _text(r"\+?\s*44[\s-]*20[\s-]*7946[\s-]*0321")),
            _field("department", _text("radiology")),
        ),
    ),
    Task(
        "extraction",
        'Return a JSON object with the keys "product", "weight_g" (a number), "price_usd" (a '
        'number) and "colors" (a list) for this text: The Vireo X2 headphones weigh 254 '
        "grams, sell for 129.99 US dollars and come in black or silver.",
        _all(
            _field("product", _text(r"vireo\s+x2[^\"']*")),
            _field("weight_g", _num("254")),
            _field("price_usd", _num("129.99")),
            _field("colors", r"\[(?=[^\]]*black)(?=[^\]]*silver)[^\]]*\]"),
        ),
    ),
    Task(
        "extraction",
        'Return a JSON object with the keys "booking", "adults", "children", "nights" and '
        '"room" (numbers where the value is a count or number) for this text: Booking 7Q2K '
        "is for three adults and two children, checking in on 12 August for 4 nights in "
        "room 214.",
        _all(
            _field("booking", _text("7Q2K")),
            _field("adults", _num("3")),
            _field("children", _num("2")),
            _field("nights", _num("4")),
            _field("room", _num("214")),
        ),
    ),
    # -- two questions over a given text -------------------------------------------------
    Task(
        "two_questions",
        _questions(_MUSEUM, "In which town is the museum now?", "Who founded the museum?"),
        _all(r"\bselby\b", r"\bfontaine\b", echo=(r"\b1964\b", r"\b212\b", r"lighthouse")),
    ),
    Task(
        "two_questions",
        _questions(
            _ROWING, "Who is the club's head coach now?", "On which day of the week does it train?"
        ),
        _all(r"\bvarga\b", r"\bsaturdays?\b", echo=(r"\b58\b", r"\b2018\b", r"\broof\b")),
    ),
    Task(
        "two_questions",
        _questions(
            _FOODS,
            "What does the Castlebar plant make?",
            "How many people work at the Dunmore plant?",
        ),
        _all(r"rice\s+crackers?", _number("340"), echo=(r"\bhaddad\b", r"\b2003\b", r"\bheron\b")),
    ),
    Task(
        "two_questions",
        _questions(_PROBE, "Where was the probe's camera built?", "Which comet did it reach?"),
        _all(r"\bturin\b", r"\bhalvard\b", echo=(r"\b2019\b", r"\bchen\b", r"\bbertha\b")),
    ),
    Task(
        "two_questions",
        _questions(
            _SCHOOL,
            "What subject does the headteacher teach?",
            "In which years did the choir win the regional prize?",
        ),
        _all(r"\bchemistry\b", r"\b2015\b", r"\b2020\b", echo=(r"\b14\b", r"\b410\b", r"\bfox\b")),
    ),
    Task(
        "two_questions",
        _questions(_TRIP, "What is the name of the place we stay at?", "How do we travel back?"),
        _all(
            r"\bgull\b", r"\bsea[\s-]?planes?\b", echo=(r"\bellis\b", r"\b2 hours\b", r"\bparrot\b")
        ),
    ),
    # -- classification into a given label set -------------------------------------------
    Task(
        "classification",
        _classify(
            "Classify the sentiment of this review: 'The battery died after two days and "
            "support never answered my emails.'",
            _SENTIMENT,
        ),
        _label("negative", _SENTIMENT),
    ),
    Task(
        "classification",
        _classify(
            "Route this support ticket to a team: 'My parcel shows as delivered, but it "
            "never reached my door.'",
            _TICKET,
        ),
        _label("shipping", _TICKET),
    ),
    Task(
        "classification",
        _classify(
            "In which language is this sentence written: 'Der Zug nach Hamburg fährt um acht "
            "Uhr ab.'?",
            _LANGUAGE,
        ),
        _label("German", _LANGUAGE),
    ),
    Task(
        "classification",
        _classify(
            "Classify this email: 'Congratulations! You have been selected to win a free "
            "cruise. Click the link within 24 hours to claim your prize.'",
            _EMAIL,
        ),
        _label("spam", _EMAIL),
    ),
    Task(
        "classification",
        _classify(
            "Give the topic of this headline: 'Astronomers find water vapour in the "
            "atmosphere of a distant planet'.",
            _TOPIC,
        ),
        _label("science", _TOPIC),
    ),
    Task(
        "classification",
        _classify(
            "Which quantity does this sentence measure: 'The parcel weighs 3.2 kilograms.'?",
            _QUANTITY,
        ),
        _label("mass", _QUANTITY),
    ),
    # -- multi-part jobs like the README's research example -------------------------------
    Task(
        "multi_part",
        _questions(
            _WIND,
            "Which company built the wind farm?",
            "Where does its power go?",
            "In which year did it begin operating?",
            "What is the rated capacity of all its turbines together, in megawatts?",
        ),
        # 36 * 4.2 = 151.2
        _all(
            r"\bnorvent\b",
            r"\bharlund\b",
            r"\b2017\b",
            _number("151.2"),
            echo=(r"\baldby\b", r"\b48\s*km\b", r"\bwool\b"),
        ),
    ),
    Task(
        "multi_part",
        _questions(
            _KORA,
            "Who makes Kora?",
            "How are its messages protected?",
            "Where are its data centres?",
            "If each data centre holds 1,850 servers and each server stores 96 GB of "
            "messages, how many GB do the data centres store in all?",
        ),
        # 2 * 1850 = 3700 servers; 3700 * 96 = 355200 GB
        _all(
            r"\bpellucid\b",
            r"encrypt",
            r"\bfrankfurt\b",
            r"\bhelsinki\b",
            _number("355200"),
            echo=(r"\btallinn\b", r"\bsignal\b", r"\bbiscuit\b"),
        ),
    ),
    Task(
        "multi_part",
        _questions(
            _ORCHARD,
            "Which variety is picked in October?",
            "When was the cider press bought?",
            "How many kilograms of honey do all the hives give in a year?",
        ),
        # 27 * 17.5 = 472.5
        _all(
            r"\bgoldfinch\b",
            r"\b1998\b",
            _number("472.5"),
            echo=(r"\bredmoor\b", r"\bpippet\b", r"\bneighbou?r\b"),
        ),
    ),
)
