"""PII detector accuracy on a labelled set, and its cost against one regular expression.

The set is ``tests/data/pii_labelled.jsonl``: texts written by hand, each with the personal
data a reader would mark in it (entity and exact substring), hard negatives among them (dates,
prices, order, tracking and version numbers, Luhn-failing card-like numbers, invalid SSNs,
ISBNs, @ mentions). About a third of the lines, every third one, were marked ``heldout``
before the detector existed; it was tuned on the rest (``tuned``). A finding counts as a true
positive when a label has the same entity and text (each label matches once).

Time: :func:`find_pii` over the set's texts per 1,000 texts, against ``re.findall`` of the
e-mail pattern alone over the same texts, measured in the same run (lower is better).

Usage: python bench/pii_accuracy.py [--quick] [--json PATH] [--errors tuned|heldout|all]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import Figure, Section, table, to_json

from raytroupe.actors.guardrails.pii import _EMAIL, PII_ENTITIES, find_pii

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "pii_labelled.jsonl"
SPLITS = ("tuned", "heldout", "all")


@dataclass
class Counts:
    """True positives, false positives and false negatives of one entity (or all)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        """``tp / (tp + fp)``; 1 with nothing found (no false alarm)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """``tp / (tp + fn)``; 1 with nothing to find."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        """The harmonic mean of precision and recall."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def load() -> list[dict[str, Any]]:
    """The labelled lines."""
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]


def score(rows: list[dict[str, Any]], split: str) -> tuple[dict[str, Counts], list[str]]:
    """Counts per entity (and ``"all"``) on ``split``, and each miss and false alarm, worded."""
    counts = {entity: Counts() for entity in (*PII_ENTITIES, "all")}
    errors: list[str] = []
    for row in rows:
        if split != "all" and row["split"] != split:
            continue
        text = str(row["text"])
        gold = Counter((p["entity"], p["text"]) for p in row["pii"])
        found = Counter((f.entity, f.text) for f in find_pii(text))
        for key in gold | found:
            tp, fp, fn = (gold & found)[key], (found - gold)[key], (gold - found)[key]
            for c in (counts[key[0]], counts["all"]):
                c.tp, c.fp, c.fn = c.tp + tp, c.fp + fp, c.fn + fn
            errors += [f"FP {key[0]:<11} {key[1]!r} in {text!r}"] * fp
            errors += [f"FN {key[0]:<11} {key[1]!r} in {text!r}"] * fn
    return counts, errors


def accuracy_table(rows: list[dict[str, Any]]) -> str:
    """Per split and entity: TP, FP, FN, precision, recall, F1."""
    lines = [
        f"{'split':<8} {'entity':<11} {'TP':>4} {'FP':>4} {'FN':>4} "
        f"{'precision':>9} {'recall':>7} {'F1':>6}"
    ]
    for split in SPLITS:
        counts, _ = score(rows, split)
        lines += [
            f"{split:<8} {entity:<11} {c.tp:>4} {c.fp:>4} {c.fn:>4} "
            f"{c.precision:>9.3f} {c.recall:>7.3f} {c.f1:>6.3f}"
            for entity, c in counts.items()
        ]
        lines.append("")
    return "\n".join(lines).rstrip()


def _per_1000(texts: list[str], work: Callable[[str], object], rounds: int) -> float:
    """Median seconds per 1,000 texts of ``work(text)`` over ``texts``."""
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        for text in texts:
            work(text)
        times.append((time.perf_counter() - began) / len(texts) * 1000)
    return statistics.median(times)


def run(quick: bool) -> Section:
    """Accuracy per split (notes) and the time per 1,000 texts against the e-mail pattern."""
    rows = load()
    texts = [str(row["text"]) for row in rows] * 7  # ~1,000 texts
    rounds = 3 if quick else 9
    baseline = _per_1000(texts, _EMAIL.findall, rounds)
    detector = _per_1000(texts, find_pii, rounds)
    section = Section("PII detector: accuracy on the labelled set, time per 1,000 texts")
    section.figures.append(
        Figure(
            "find_pii, all entities, per 1,000 texts",
            detector,
            baseline,
            "s",
            "re.findall of the e-mail pattern",
        )
    )
    tuned = score(rows, "tuned")[0]["all"]
    heldout = score(rows, "heldout")[0]["all"]
    section.figures.append(
        Figure("F1, heldout split", heldout.f1, tuned.f1, "", "F1, tuned split", note="")
    )
    section.notes += [
        f"{split}: precision {c.precision:.3f}, recall {c.recall:.3f}, F1 {c.f1:.3f} "
        f"({c.tp} TP, {c.fp} FP, {c.fn} FN)"
        for split in SPLITS
        for c in [score(rows, split)[0]["all"]]
    ]
    section.notes.append(f"{len(rows)} labelled texts ({DATA.name}); phone region US")
    return section


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", type=Path, help="write the section here as JSON")
    parser.add_argument("--errors", choices=SPLITS, help="list each miss and false alarm")
    args = parser.parse_args()
    labelled = load()
    print(accuracy_table(labelled), end="\n\n")
    if args.errors:
        print("\n".join(score(labelled, args.errors)[1]), end="\n\n")
    result = run(args.quick)
    print(table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(result), indent=1), encoding="utf-8")
