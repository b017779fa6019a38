"""SECURITY.md: every boundary in its table names tests, and every test it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"`((?:tests/[\w/]+/)?(test_\w+\.py))?(?:::(test_\w+))?`")


def _rows() -> list[tuple[str, str]]:
    text = (ROOT / "SECURITY.md").read_text()
    table = text.split("## Boundaries and their tests", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if re.match(r"^\| \d+ \|", line)]
    return [(row.split("|")[1].strip(), row.rsplit("|", 2)[-2]) for row in rows]


def _find(name: str) -> Path:
    found = sorted(ROOT.glob(f"tests/**/{name}"))
    assert len(found) == 1, (name, found)
    return found[0]


def test_every_boundary_names_tests_that_exist():
    rows = _rows()
    assert len(rows) >= 20
    numbers = [int(n) for n, _ in rows]
    assert numbers == list(range(1, len(rows) + 1))
    for number, cell in rows:
        references = REFERENCE.findall(cell)
        assert references, f"row {number} names no test"
        current: Path | None = None
        for path, name, test in references:
            if name:
                current = ROOT / path if path.startswith("tests/") else _find(name)
            assert current is not None, (number, path, name)
            assert current.exists(), (number, path, name)
            source = current.read_text()
            if test:
                assert re.search(rf"^def {test}\(", source, re.M), (number, current.name, test)
            else:
                assert re.search(r"^def test_", source, re.M), (number, current.name)
