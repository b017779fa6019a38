"""Figures the reliability suite measures, collected for ``RELIABILITY.md``.

A test calls :func:`record` with what it measured; each figure is one JSON line in
``$TROUPE_FIGURES_DIR/<suite>.jsonl`` (default ``tests/reliability/results/``, git-ignored).
``python -m tests.reliability.report`` runs the suites and renders the table from those lines.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

__all__ = ["figures_dir", "record"]


def figures_dir() -> Path:
    """Where figures are written (created on first use)."""
    default = Path(__file__).resolve().parents[1] / "reliability" / "results"
    return Path(os.environ.get("TROUPE_FIGURES_DIR", default))


def record(suite: str, name: str, value: float | int | str, unit: str = "", note: str = "") -> None:
    """Append one measured figure (``suite`` groups rows in the report, e.g. ``chaos``)."""
    folder = figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    row = {"suite": suite, "name": name, "value": value, "unit": unit, "note": note}
    row["at"] = time.time()
    with (folder / f"{suite}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
