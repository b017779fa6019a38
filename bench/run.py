"""Run the benchmark suite: a table, a markdown report and a PNG of the scaling curves.

Each benchmark runs in a fresh process (its own Ray), writes its section as JSON under
``bench/results/``; this script prints every figure (a ratio against a baseline measured in
the same run), then writes ``bench/REPORT.md`` and ``bench/scaling.png``.

Usage: python bench/run.py [--quick] [--only router,fanout,...]
Needs the bench extra: pip install -e '.[bench]' (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import Curve, Section, from_json, machine, table

HERE = Path(__file__).parent
SUITE = (
    "router",
    "fanout",
    "graphs",
    "pool_replicas",
    "capacity",
    "cpu_tools",
    "footprint",
    "http_api",
    "memory",
    "knowledge",
    "state_store",
    "console",
    "tracing",
    "fairness",
)
RESULTS = HERE / "results"


def _run_one(name: str, quick: bool) -> tuple[Section | None, float, str]:
    out = RESULTS / f"{name}.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, str(HERE / f"{name}.py"), "--json", str(out)]
    if quick:
        command.append("--quick")
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not out.exists():
        return None, seconds, (done.stderr or done.stdout)[-2000:]
    return from_json(json.loads(out.read_text(encoding="utf-8"))), seconds, ""


def _markdown(sections: list[Section], failures: dict[str, str], about: dict[str, str]) -> str:
    lines = [
        "# raytroupe benchmarks",
        "",
        "Every figure is a ratio against a baseline measured in the same run, on this machine:",
        "",
        *(f"- {key}: {value}" for key, value in about.items()),
        "",
        "Regenerate: `.venv/bin/pip install -q -e '.[bench]' && .venv/bin/python bench/run.py`",
        "",
        "| measure | value | baseline | ratio | goal | |",
        "|---|---|---|---|---|---|",
    ]
    for section in sections:
        for f in section.figures:
            goal = (
                ""
                if f.goal is None
                else ("≥ " if f.direction == "at_least" else "≤ ") + f"{f.goal:g}x"
            )
            verdict = {None: "", True: "met", False: "**missed**"}[f.met]
            lines.append(
                f"| {section.title}: {f.name} | {f.value:.4g} {f.unit} | {f.baseline_name}: "
                f"{f.baseline:.4g} {f.unit} | {f.ratio:.2f}x | {goal} | {verdict} |"
            )
    for section in sections:
        if section.notes:
            lines += ["", f"## {section.title}", "", *(f"- {note}" for note in section.notes)]
    for name, why in failures.items():
        lines += ["", f"## {name}: did not run", "", "```text", why.strip(), "```"]
    lines += ["", "![scaling curves](scaling.png)", ""]
    return "\n".join(lines)


def _plot(curves: list[Curve], path: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - only the suite needs it

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if not curves:
        return
    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4.2), squeeze=False)
    for ax, curve in zip(axes[0], curves, strict=True):
        for label, points in curve.series.items():
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", label=label)
        if curve.goal is not None:
            ax.axhline(curve.goal, linestyle="--", color="grey", label=f"goal {curve.goal:g}")
        if curve.log_x:
            ax.set_xscale("log", base=2)
        ax.set_title(curve.title)
        ax.set_xlabel(curve.x_label)
        ax.set_ylabel(curve.y_label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    """Run the suite; exit 1 if a benchmark failed to run (a missed goal is reported, not 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", help="comma-separated subset of " + ",".join(SUITE))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(SUITE)
    RESULTS.mkdir(exist_ok=True)
    about = machine()
    print("machine: " + "; ".join(f"{k} {v}" for k, v in about.items()))
    sections: list[Section] = []
    failures: dict[str, str] = {}
    for name in names:
        section, seconds, why = _run_one(name, args.quick)
        if section is None:
            failures[name] = why
            print(f"\n{name}: FAILED after {seconds:.0f} s\n{why}")
            continue
        sections.append(section)
        print(f"\n{table(section)}\n  ({seconds:.0f} s)")
    (HERE / "REPORT.md").write_text(_markdown(sections, failures, about), encoding="utf-8")
    _plot([c for s in sections for c in s.curves], HERE / "scaling.png")
    print(f"\nwrote {HERE / 'REPORT.md'} and {HERE / 'scaling.png'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
