"""Tasks with checkable answers for real local models (``bench/local_models.py``).

Each task is one job for a solo agent that has the calculator; ``expect`` is a regular
expression the answer must match (case-insensitive). The material a task needs is in the
task itself: what is measured is reading, arithmetic through a tool, and following a format,
not what a 1.5B model happens to know.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TASKS", "Task"]


@dataclass(frozen=True)
class Task:
    """One job: its text, and the pattern a right answer matches."""

    kind: str
    text: str
    expect: str


_PASSAGE = (
    "The Halden Bridge opened in 1931. It is 412 metres long and carries two railway tracks. "
    "Its designer, Ingrid Solberg, also built the Vang Tower in 1927. The bridge was repaired "
    "in 1978 after a flood, and it was painted green in 2004."
)
_MEMO = (
    "Memo: the quarterly review moves from Tuesday to Thursday, 14:00, room B12. Bring the "
    "budget sheet. Contact: Priya Natarajan, extension 4471."
)
_ORDER = "Order 5531: 3 lamps at 24 euros each, 2 chairs at 61 euros each, shipping 9 euros."

TASKS: tuple[Task, ...] = (
    # arithmetic: the calculator is the reliable way
    Task("arithmetic", "Use the calculator: what is 17 * 23 + 4?", r"\b395\b"),
    Task("arithmetic", "Use the calculator: what is 1234 + 5678?", r"\b6,?912\b"),
    Task("arithmetic", "Use the calculator: what is 144 / 12?", r"\b12\b"),
    Task("arithmetic", "Use the calculator: what is 2 ** 10?", r"\b1,?024\b"),
    Task("arithmetic", "Use the calculator: what is 987 - 654?", r"\b333\b"),
    Task("arithmetic", "Use the calculator: what is 45 * 45?", r"\b2,?025\b"),
    Task("arithmetic", "Use the calculator: what is (100 - 37) * 3?", r"\b189\b"),
    Task("arithmetic", "Use the calculator: what is 7 * 8 * 9?", r"\b504\b"),
    Task("arithmetic", "Use the calculator: what is 3600 / 48?", r"\b75\b"),
    Task("arithmetic", "Use the calculator: what is 19 * 21?", r"\b399\b"),
    Task("arithmetic", f"{_ORDER} What is the order's total in euros?", r"\b203\b"),
    Task("arithmetic", "A train travels 240 km in 3 hours. What is its speed in km/h?", r"\b80\b"),
    # reading: the answer is in the text
    Task("reading", f"{_PASSAGE} In which year did the bridge open?", r"\b1931\b"),
    Task("reading", f"{_PASSAGE} How long is the bridge, in metres?", r"\b412\b"),
    Task("reading", f"{_PASSAGE} Who designed the bridge?", r"solberg"),
    Task("reading", f"{_PASSAGE} What colour was the bridge painted in 2004?", r"green"),
    Task("reading", f"{_PASSAGE} What else did the designer build?", r"vang"),
    Task("reading", f"{_PASSAGE} Why was the bridge repaired in 1978?", r"flood"),
    Task("reading", f"{_MEMO} On which day is the review now?", r"thursday"),
    Task("reading", f"{_MEMO} In which room is the review?", r"\bb12\b"),
    Task("reading", f"{_MEMO} What is the contact's extension?", r"\b4471\b"),
    Task("reading", f"{_MEMO} Who is the contact?", r"priya"),
    Task("reading", f"{_ORDER} How many chairs were ordered?", r"\b(2|two)\b"),
    Task("reading", f"{_ORDER} What is the order number?", r"\b5531\b"),
    # format: say exactly what was asked for
    Task("format", "Answer with the single word YES or NO: is 10 greater than 3?", r"\byes\b"),
    Task("format", "Reply with only the capital letters of: 'New York City'.", r"\bNYC\b"),
    Task("format", "Write the word 'raytroupe' in upper case, and nothing else.", r"RAYTROUPE"),
    Task(
        "format",
        'Return a JSON object {"name": ..., "age": ...} for: Maria is 34 years old.',
        r'"age"\s*:\s*34',
    ),
    Task("format", "List the numbers from 1 to 5, separated by commas.", r"1,\s*2,\s*3,\s*4,\s*5"),
    Task("format", "Which is larger, 0.8 or 0.75? Answer with the number only.", r"\b0\.8\b"),
    Task(
        "format",
        "Sort these words alphabetically and give them comma-separated: pear, apple, fig.",
        r"apple,\s*fig,\s*pear",
    ),
    Task("format", "What is the opposite of 'cold'? One word.", r"\bhot\b"),
)
