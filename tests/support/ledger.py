"""A side-effecting function tool for the reliability suite: it appends one line to a file.

Offered by the session's tool sandboxes as ``journal_append`` (``side_effects=True``), so each
call runs at most once per idempotency key. Every run leaves a line, so a test counts how
often a call really ran. Stdlib only: the sandbox processes import it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TOOL_NAME", "TOOL_TARGET", "append_line", "runs_by_token"]

TOOL_NAME = "journal_append"
TOOL_TARGET = "tests.support.ledger:append_line"


def append_line(ledger: str, token: str) -> str:
    """Append ``token`` as one line to the file ``ledger``; return what was recorded."""
    path = Path(ledger)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(f"{token} {os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())
    return f"recorded {token}"


def runs_by_token(ledger: Path) -> dict[str, int]:
    """How many times each token was appended to ``ledger`` (empty if it does not exist)."""
    if not ledger.exists():
        return {}
    counts: dict[str, int] = {}
    for line in ledger.read_text(encoding="utf-8").splitlines():
        token = line.split(" ", 1)[0]
        if token:
            counts[token] = counts.get(token, 0) + 1
    return counts
