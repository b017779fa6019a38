"""The offline PII detector: each entity, redaction, overlaps, hard negatives, limits, accuracy."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from raytroupe.actors.guardrails.pii import (
    MAX_TEXT_CHARS,
    PII_ENTITIES,
    Finding,
    find_pii,
    redact,
)

LABELLED = Path(__file__).resolve().parents[1] / "data" / "pii_labelled.jsonl"


def found(text, **kwargs):
    return [(f.entity, f.text) for f in find_pii(text, **kwargs)]


@pytest.mark.parametrize(
    ("text", "entity", "match"),
    [
        ("mail alice@example.com.", "email", "alice@example.com"),
        ("to <bob.smith+news@mail.example.co.uk>", "email", "bob.smith+news@mail.example.co.uk"),
        ("EMAIL: JOHN.DOE@EXAMPLE.COM", "email", "JOHN.DOE@EXAMPLE.COM"),
        ("call (415) 867-5309 now", "phone", "(415) 867-5309"),
        ("call 415.867.5309 now", "phone", "415.867.5309"),
        ("call +1 212 736 5000 now", "phone", "+1 212 736 5000"),
        ("London +44 20 7946 0958", "phone", "+44 20 7946 0958"),
        ("Berlin +49 30 901820", "phone", "+49 30 901820"),
        ("Paris +33 1 42 68 53 00", "phone", "+33 1 42 68 53 00"),
        ("card 4111 1111 1111 1111 exp", "credit_card", "4111 1111 1111 1111"),
        ("card 5555-5555-5555-4444 exp", "credit_card", "5555-5555-5555-4444"),
        ("amex 378282246310005", "credit_card", "378282246310005"),
        ("pay GB82 WEST 1234 5698 7654 32 now", "iban", "GB82 WEST 1234 5698 7654 32"),
        ("IBAN: DE89370400440532013000", "iban", "DE89370400440532013000"),
        ("FR14 2004 1010 0505 0001 3M02 606.", "iban", "FR14 2004 1010 0505 0001 3M02 606"),
        ("SSN: 536-22-8714", "ssn", "536-22-8714"),
        ("SSN 536 22 8714", "ssn", "536 22 8714"),
        ("from 203.0.113.45:8080", "ip_address", "203.0.113.45"),
        ("host 2001:db8::1.", "ip_address", "2001:db8::1"),
        ("mapped ::ffff:192.0.2.128 here", "ip_address", "::ffff:192.0.2.128"),
    ],
)
def test_finds_each_entity_in_its_formats(text, entity, match):
    assert found(text) == [(entity, match)]


def test_findings_carry_offsets_and_come_sorted():
    text = "ip 10.0.0.1, mail a@b.co"
    findings = find_pii(text)
    assert findings == [
        Finding("ip_address", 3, 11, "10.0.0.1"),
        Finding("email", 18, 24, "a@b.co"),
    ]
    assert all(text[f.start : f.end] == f.text for f in findings)


def test_redacts_each_finding_with_its_placeholder():
    text = (
        "Jane: jane@example.com, (415) 867-5309, 4111 1111 1111 1111, "
        "DE89 3704 0044 0532 0130 00, SSN 536-22-8714, from 10.0.0.5."
    )
    assert redact(text, find_pii(text)) == (
        "Jane: [EMAIL], [PHONE], [CREDIT_CARD], [IBAN], SSN [SSN], from [IP_ADDRESS]."
    )


def test_redact_refuses_findings_of_another_text_or_overlapping():
    with pytest.raises(ValueError, match="not in the text"):
        redact("abc", [Finding("email", 0, 3, "xyz")])
    with pytest.raises(ValueError, match="overlapping"):
        redact("abcdef", [Finding("email", 0, 4, "abcd"), Finding("phone", 2, 6, "cdef")])


def test_the_longer_of_overlapping_findings_wins():
    # a card's digits hold a valid phone number; a mapped IPv6 address holds an IPv4 one
    assert found("card 4111 1111 1111 1111") == [("credit_card", "4111 1111 1111 1111")]
    assert found("4012888888881881") == [("credit_card", "4012888888881881")]
    assert found("::ffff:10.0.0.1") == [("ip_address", "::ffff:10.0.0.1")]


def test_only_the_entities_asked_for():
    text = "a@b.co 10.0.0.1"
    assert found(text, entities=("ip_address",)) == [("ip_address", "10.0.0.1")]


def test_national_phone_formats_follow_the_regions():
    assert found("ring 020 7946 0958") == []
    assert found("ring 020 7946 0958", regions=("US", "GB")) == [("phone", "020 7946 0958")]


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 failed",  # Luhn fails
        "account 1234567890123456 closed",
        "tracking 9400 1000 0000 0000 0000 00",  # 22 digits hold no 16-digit card
        "SSN 000-12-3456 rejected",
        "not SSNs: 666-12-3456, 900-12-3456, 123-00-4567",
        "serial 2019-431-22-8714",
        "shipped on 2024-05-06 at 14:30",
        "What is 17 * 23 + 4?",
        "ping @alice and @bob",
        "price $1,299.99, ZIP 94043",
        "version 1.2.3 and v1.2.3.4 and version 4.2.1.0",
        "MAC 00:1A:2B:3C:4D:5E, time 23:59:59, ratio 16:9",
        "use std::vector and x :: Int",
        "invoice INV-2024-000731",  # a valid number's digits, not grouped as one
        "IBAN GB82 WEST 1234 5698 7654 33",  # check digits fail
        "ISBN 978-3-16-148410-0",
        "routing 021000021",  # nine digits alone are not an SSN
    ],
)
def test_hard_negatives_are_not_flagged(text):
    assert found(text) == []


def test_refuses_text_over_the_limit():
    assert find_pii("x" * MAX_TEXT_CHARS) == []
    with pytest.raises(ValueError, match="over the PII detector's limit"):
        find_pii("x" * (MAX_TEXT_CHARS + 1))


def test_refuses_unknown_entities_and_regions():
    with pytest.raises(ValueError, match="unknown PII entities"):
        find_pii("x", ("passport",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown phone regions"):
        find_pii("x", regions=("XX",))


@pytest.mark.parametrize(
    "text",
    [
        "a" * MAX_TEXT_CHARS,
        "a@" * (MAX_TEXT_CHARS // 2),
        "1 " * (MAX_TEXT_CHARS // 2),
        "x@" + "a-" * (MAX_TEXT_CHARS // 2 - 1),
        "1." * (MAX_TEXT_CHARS // 2),
        "a:" * (MAX_TEXT_CHARS // 2),
        "DE89 " * (MAX_TEXT_CHARS // 5),
        "123-" * (MAX_TEXT_CHARS // 4),
    ],
    ids=["letters", "at-signs", "spaced-digits", "domain", "dotted", "colons", "iban", "dashes"],
)
def test_patterns_stay_linear_on_adversarial_text(text):
    # each took under 1 s here; a pattern that backtracks would take minutes
    began = time.perf_counter()
    find_pii(text, [e for e in PII_ENTITIES if e != "phone"])
    assert time.perf_counter() - began < 10


def _score(split: str) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """True positives, false positives and false negatives per entity, and under "all"."""
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for line in LABELLED.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if split not in {"all", row["split"]}:
            continue
        gold = Counter((p["entity"], p["text"]) for p in row["pii"])
        got = Counter((f.entity, f.text) for f in find_pii(row["text"]))
        for counter, part in ((tp, gold & got), (fp, got - gold), (fn, gold - got)):
            for (entity, _), n in part.items():
                counter[entity] += n
                counter["all"] += n
    return tp, fp, fn


def test_labelled_set_is_large_enough_and_exact():
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 120
    assert {p["entity"] for row in rows for p in row["pii"]} == set(PII_ENTITIES)
    assert all(p["text"] in row["text"] for row in rows for p in row["pii"])
    assert sum(row["split"] == "heldout" for row in rows) >= len(rows) // 3


def test_accuracy_on_the_heldout_split_holds():
    # measured (bench/pii_accuracy.py): heldout precision 0.944 (34 TP, 2 FP: "icon@2x.png"
    # and "hero@3x.jpg" read as e-mail), recall 0.971 (1 FN: a UK number in national format,
    # region US). One more error costs ~0.027; a disabled entity costs at least 3/35 recall.
    tp, fp, fn = _score("heldout")
    assert tp["all"] / (tp["all"] + fp["all"]) >= 0.944 - 0.03
    assert tp["all"] / (tp["all"] + fn["all"]) >= 0.971 - 0.03


def test_recall_of_each_entity_on_the_whole_set_holds():
    # measured: 1.0 for all but phone, 0.935 (29 of 31: national-format UK numbers, region US)
    tp, _, fn = _score("all")
    for entity in PII_ENTITIES:
        assert tp[entity] / (tp[entity] + fn[entity]) >= 0.9, entity
