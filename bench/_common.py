"""What every benchmark of the suite reports, and the machine it ran on.

A benchmark module exposes ``run(quick: bool) -> Section``. Every figure is a ratio against a
baseline measured in the same run; ``goal`` says which way it must go.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Curve",
    "Figure",
    "Section",
    "from_json",
    "machine",
    "main",
    "median",
    "table",
    "to_json",
]


@dataclass(frozen=True)
class Figure:
    """One measured figure: ``value`` against ``baseline`` (``ratio = value / baseline``).

    ``goal`` is the bound on ``ratio`` (``at_least`` or ``at_most``), or None for a figure
    reported without a goal.
    """

    name: str
    value: float
    baseline: float
    unit: str
    baseline_name: str
    goal: float | None = None
    direction: Literal["at_least", "at_most"] = "at_least"
    note: str = ""

    @property
    def ratio(self) -> float:
        """``value / baseline``."""
        return self.value / self.baseline if self.baseline else float("nan")

    @property
    def met(self) -> bool | None:
        """Whether the goal is met (None without a goal)."""
        if self.goal is None:
            return None
        return self.ratio >= self.goal if self.direction == "at_least" else self.ratio <= self.goal


@dataclass(frozen=True)
class Curve:
    """A scaling curve for the plot: ``y`` at each ``x``."""

    title: str
    x_label: str
    y_label: str
    series: dict[str, list[tuple[float, float]]]
    log_x: bool = False
    goal: float | None = None
    """A horizontal goal line, if any."""


@dataclass
class Section:
    """What one benchmark module measured."""

    title: str
    figures: list[Figure] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def median(values: list[float]) -> float:
    """The median (of at least one value)."""
    return statistics.median(values)


def machine() -> dict[str, str]:
    """The machine the suite runs on, described for the report."""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo", encoding="utf-8")  # noqa: SIM115
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown"
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            mem_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        memory = f"{mem_kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        memory = "unknown"
    ray_version = subprocess.run(
        [sys.executable, "-c", "import ray; print(ray.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "cpu": f"{model} ({os.cpu_count()} logical cores)",
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "ray": ray_version or "unknown",
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def to_json(section: Section) -> dict[str, object]:
    """``section`` as plain JSON data."""
    return {
        "title": section.title,
        "figures": [{**vars(f), "ratio": f.ratio, "met": f.met} for f in section.figures],
        "curves": [vars(c) for c in section.curves],
        "notes": section.notes,
    }


def from_json(data: dict[str, Any]) -> Section:
    """A section written by :func:`to_json`."""
    figures = [
        Figure(**{k: v for k, v in f.items() if k not in {"ratio", "met"}}) for f in data["figures"]
    ]
    curves = [
        Curve(**{**c, "series": {k: [tuple(p) for p in v] for k, v in c["series"].items()}})
        for c in data["curves"]
    ]
    return Section(title=data["title"], figures=figures, curves=curves, notes=data["notes"])


def table(section: Section) -> str:
    """The section's figures as a plain-text table."""
    lines = [section.title, "-" * len(section.title)]
    for f in section.figures:
        goal = (
            ""
            if f.goal is None
            else f"goal {'>=' if f.direction == 'at_least' else '<='} {f.goal:g}x"
        )
        verdict = {None: "", True: "met", False: "MISSED"}[f.met]
        lines.append(
            f"  {f.name:<44} {f.value:>10.3g} {f.unit:<8} vs {f.baseline_name} {f.baseline:.3g}"
            f"  = {f.ratio:.2f}x  {goal} {verdict}".rstrip()
        )
    lines.extend(f"  note: {n}" for n in section.notes)
    return "\n".join(lines)


def main(run: Callable[[bool], Section]) -> None:
    """Command line of a benchmark module: ``[--quick] [--json PATH]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", type=Path, help="write the section here as JSON")
    args = parser.parse_args()
    section = run(args.quick)
    print(table(section))
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(section), indent=1), encoding="utf-8")
