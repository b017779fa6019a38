"""Offline detection and redaction of personal data in text: no model, nothing downloaded.

:func:`find_pii` finds e-mail addresses, phone numbers, payment card numbers, IBANs, US social
security numbers and IP addresses; :func:`redact` replaces what it found with placeholders.

Each entity is a cheap candidate pattern and a validator that knows the format: phone
numbers are libphonenumber's (``phonenumbers``: valid numbers of its per-region metadata,
grouped as the country groups them unless written with ``+``), card numbers must pass Luhn
and start like an issuer's, IBANs their ISO 7064 check and the country's format, SSNs the
SSA's rules (``python-stdnum``), IP addresses :mod:`ipaddress`. The validators are what keep
dates, prices, order and version numbers out. Accuracy on a labelled set, per entity:
``bench/pii_accuracy.py`` (``tests/data/pii_labelled.jsonl``).

Work is linear in the text: a lookbehind lets a match start only where a run of the
pattern's characters starts, and no pattern backtracks further than that run or a bounded
length (the one repeated group, a card's digits, takes exactly one digit a time). Texts over
:data:`MAX_TEXT_CHARS` are refused rather than cut (redacting half a text would leak the
other half).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import phonenumbers
from stdnum import iban, luhn
from stdnum.us import ssn

from raytroupe.protocols.guardrails import PII_KINDS, PiiKind

__all__ = ["MAX_TEXT_CHARS", "PII_ENTITIES", "Finding", "PiiEntity", "find_pii", "redact"]

PiiEntity = PiiKind
"""What the detector finds: the kinds a guardrail's PII rule may name."""
PII_ENTITIES: Final = PII_KINDS
MAX_TEXT_CHARS: Final = 200_000
"""The longest text :func:`find_pii` takes: about 0.1 s for prose this long, and 5 s at worst
(nothing but phone numbers: libphonenumber parses each, ~0.3 ms a number). The caller splits
longer texts or refuses them."""


@dataclass(frozen=True)
class Finding:
    """One piece of personal data: its entity and where it is (``text[start:end]``)."""

    entity: PiiEntity
    start: int
    end: int
    text: str


_EMAIL: Final = re.compile(
    # local part, @, labels, a dot and a top-level domain of letters (so "a@b.org." stops
    # before the full stop); the lookbehind starts a match only at the start of a local part
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,63}(?![A-Za-z0-9-])"
)
_CARD: Final = re.compile(
    # 13 to 19 digits, each group separated by at most one space or dash, not part of a
    # longer run of digits (a 22-digit tracking number holds no 16-digit card)
    r"(?<!\d)(?<!\d[ -])\d(?:[ -]?\d){12,18}(?![ -]?\d)"
)
_IBAN: Final = re.compile(
    # every start of a country code and check digits, with what follows in IBAN characters
    # (spaces included); the longest valid prefix of whole groups is the IBAN
    r"(?=\b([A-Z]{2}[0-9]{2}[A-Z0-9 ]{10,40}))"
)
_IBAN_DIGITS: Final = str.maketrans({chr(c): str(c - 55) for c in range(ord("A"), ord("Z") + 1)})
"""A -> 10, ..., Z -> 35: an IBAN's letters as ISO 7064 reads them."""
_SSN: Final = re.compile(
    # 123-45-6789; spaced or bare, only after a word that says so (_SSN_CONTEXT): nine digits
    # alone are as often a routing, order or tracking number
    r"(?<![\w-])\d{3}([- ]?)\d{2}\1\d{4}(?![\w-])"
)
_SSN_CONTEXT: Final = re.compile(r"\b(?:ssn|social)\b", re.IGNORECASE)
_SSN_CONTEXT_CHARS: Final = 40
_IPV4: Final = re.compile(
    # four dotted numbers, not a piece of a longer dotted run ("1.2.3.4.5") or of a word
    r"(?<![\w.])\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w]|\.\d)"
)
_VERSION_BEFORE: Final = re.compile(r"\b(?:version|ver\.?|release|rev\.?)\s*$", re.IGNORECASE)
"""Words after which a dotted quad is a version number ("v1.2.3.4" is one word: never taken)."""
_VERSION_BEFORE_CHARS: Final = 12
_IPV6: Final = re.compile(
    # a run of hex digits, colons and dots (an embedded IPv4 tail), checked by ipaddress
    r"(?<![\w:.])[0-9A-Fa-f:.]{2,45}(?![\w:.])"
)
_HEX_DIGIT: Final = re.compile(r"[0-9A-Fa-f]")
_IPV6_MIN_COLONS: Final = 2
_IBAN_LENGTHS: Final = range(15, 35)
"""ISO 13616: from 15 characters (Norway) to 34."""
_ANY_LENGTH: Final = range(13, 20)
_ISSUERS: Final[tuple[tuple[str, str, Collection[int]], ...]] = (
    # first prefix, last prefix (compared as strings of their length), lengths
    ("4", "4", (13, 16, 19)),  # Visa
    ("34", "34", (15,)),  # American Express
    ("37", "37", (15,)),
    ("51", "55", (16,)),  # Mastercard
    ("2221", "2720", (16,)),
    ("300", "305", range(14, 20)),  # Diners Club
    ("36", "36", range(14, 20)),
    ("38", "39", range(14, 20)),
    ("3528", "3589", range(16, 20)),  # JCB
    ("6", "6", _ANY_LENGTH),  # Discover, UnionPay, Maestro
    ("50", "50", _ANY_LENGTH),  # Maestro
    ("56", "58", _ANY_LENGTH),
)


def _issuer_prefix(digits: str) -> bool:
    """Whether a card number of this length can start so (Visa, Mastercard, Amex, ...)."""
    return any(
        first <= digits[: len(first)] <= last and len(digits) in lengths
        for first, last, lengths in _ISSUERS
    )


def _emails(text: str) -> Iterator[Finding]:
    for m in _EMAIL.finditer(text):
        yield Finding("email", m.start(), m.end(), m.group())


def _phones(text: str, regions: Sequence[str]) -> Iterator[Finding]:
    """Valid numbers; those in national format grouped too as their country groups them.

    A number written with ``+`` and a country code says what it is; ten digits alone say
    less, so their grouping must be the country's ("202-400-0731", not "2024-000731" of an
    invoice number). International numbers keep the looser check: people group them freely.
    """
    for region in regions:
        # max_tries: the matcher gives up after so many invalid candidates; the text limit
        # bounds the work instead, so that a flood of digits cannot hide a number after it
        matcher = phonenumbers.PhoneNumberMatcher(
            text, region, leniency=phonenumbers.Leniency.VALID, max_tries=len(text) + 1
        )
        for m in matcher:
            if m.raw_string.startswith("+") or _grouped(m.raw_string, region):
                yield Finding("phone", m.start, m.end, m.raw_string)


def _grouped(number: str, region: str) -> bool:
    """Whether ``number``'s digits are grouped as its country formats them."""
    strict = phonenumbers.PhoneNumberMatcher(
        number, region, leniency=phonenumbers.Leniency.STRICT_GROUPING
    )
    return any(m.raw_string == number for m in strict)


def _cards(text: str) -> Iterator[Finding]:
    for m in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if _issuer_prefix(digits) and luhn.is_valid(digits):
            yield Finding("credit_card", m.start(), m.end(), m.group())


def _mod97(compact: str) -> bool:
    """ISO 7064 MOD 97-10 of an IBAN without spaces: the cheap test before stdnum's full one."""
    return (
        len(compact) in _IBAN_LENGTHS
        and int((compact[4:] + compact[:4]).translate(_IBAN_DIGITS)) % 97 == 1
    )


def _ibans(text: str) -> Iterator[Finding]:
    for m in _IBAN.finditer(text):
        start, groups = m.start(1), m.group(1).split(" ")
        for n in range(len(groups), 0, -1):
            candidate = " ".join(groups[:n]).rstrip()
            end = start + len(candidate)
            if end < len(text) and text[end].isalnum():
                continue  # it would end inside a word
            if _mod97("".join(groups[:n])) and iban.is_valid(candidate):
                yield Finding("iban", start, end, candidate)
                break


def _ssns(text: str) -> Iterator[Finding]:
    for m in _SSN.finditer(text):
        said = m.group(1) == "-" or _SSN_CONTEXT.search(
            text, max(0, m.start() - _SSN_CONTEXT_CHARS), m.start()
        )
        if said and ssn.is_valid(m.group().replace(" ", "-")):
            yield Finding("ssn", m.start(), m.end(), m.group())


def _ips(text: str) -> Iterator[Finding]:
    for m in _IPV4.finditer(text):
        if _VERSION_BEFORE.search(text, max(0, m.start() - _VERSION_BEFORE_CHARS), m.start()):
            continue
        try:
            ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        yield Finding("ip_address", m.start(), m.end(), m.group())
    for m in _IPV6.finditer(text):
        candidate = m.group().rstrip(".")  # a sentence's full stop
        if candidate.count(":") < _IPV6_MIN_COLONS or not _HEX_DIGIT.search(candidate):
            continue  # "16:9", a time; "::" alone is an operator, not an address
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        yield Finding("ip_address", m.start(), m.start() + len(candidate), candidate)


_FINDERS: Final[dict[PiiEntity, Callable[[str], Iterator[Finding]]]] = {
    "email": _emails,
    "credit_card": _cards,
    "iban": _ibans,
    "ssn": _ssns,
    "ip_address": _ips,
}


def find_pii(
    text: str,
    entities: Collection[PiiEntity] = PII_ENTITIES,
    *,
    regions: Sequence[str] = ("US",),
) -> list[Finding]:
    """The personal data in ``text``: non-overlapping findings, sorted by start.

    Where two findings overlap the longer wins (a card number's digits are not also a phone
    number; an IPv4 tail is part of its IPv6 address); of two as long, the entity earlier in
    :data:`PII_ENTITIES`.

    Args:
        text: at most :data:`MAX_TEXT_CHARS` characters.
        entities: what to look for.
        regions: ISO 3166 regions whose national phone formats are recognised (each tried);
            numbers written with ``+`` and a country code are found whatever the regions.

    Raises:
        ValueError: ``text`` is too long, or an entity or region is unknown.
    """
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"text of {len(text)} characters is over the PII detector's limit of "
            f"{MAX_TEXT_CHARS}: split it"
        )
    unknown = set(entities) - set(PII_ENTITIES)
    if unknown:
        raise ValueError(f"unknown PII entities {sorted(unknown)}; known: {list(PII_ENTITIES)}")
    bad_regions = [r for r in regions if r not in phonenumbers.SUPPORTED_REGIONS]
    if bad_regions:
        raise ValueError(f"unknown phone regions {bad_regions} (ISO 3166 codes, e.g. 'US')")
    found: list[Finding] = []
    for entity in PII_ENTITIES:
        if entity not in entities:
            continue
        found.extend(_phones(text, regions) if entity == "phone" else _FINDERS[entity](text))
    rank = {entity: i for i, entity in enumerate(PII_ENTITIES)}
    found.sort(key=lambda f: (f.start - f.end, rank[f.entity], f.start))
    taken = bytearray(len(text))
    kept: list[Finding] = []
    for finding in found:
        if taken.find(1, finding.start, finding.end) == -1:
            taken[finding.start : finding.end] = b"\x01" * (finding.end - finding.start)
            kept.append(finding)
    return sorted(kept, key=lambda f: f.start)


def redact(text: str, findings: Sequence[Finding]) -> str:
    """``text`` with each finding replaced by its placeholder: ``[EMAIL]``, ``[PHONE]``, ...

    Raises:
        ValueError: the findings overlap, or one is not what ``text`` holds at its offsets
            (findings of another text).
    """
    parts: list[str] = []
    at = 0
    for finding in sorted(findings, key=lambda f: f.start):
        if finding.start < at:
            raise ValueError(f"overlapping findings at offset {finding.start}")
        if text[finding.start : finding.end] != finding.text:
            raise ValueError(f"finding {finding.entity} at {finding.start} is not in the text")
        parts += (text[at : finding.start], f"[{finding.entity.upper()}]")
        at = finding.end
    parts.append(text[at:])
    return "".join(parts)
