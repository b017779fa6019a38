"""The documentation's links lead somewhere: each relative link names a file of the repository
and, with a ``#fragment``, a heading of that file (GitHub's anchors: lower case, punctuation
dropped, spaces as dashes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in _HEADING.findall(text)}


def _links(path: Path) -> list[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_exist(doc):
    if doc.parent == ROOT:  # the README and the changelog link; a page of docs/ may not
        assert _links(doc), f"{doc} links to nothing"
    for link in _links(doc):
        path, _, fragment = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        assert target.exists(), f"{doc.name}: {link} names no file"
        if fragment and target.suffix == ".md":
            assert fragment in _anchors(target), f"{doc.name}: {link} names no heading"


def test_the_readme_links_the_docs_and_the_examples():
    links = set(_links(ROOT / "README.md"))
    for wanted in (
        "CHANGELOG.md",
        "SECURITY.md",
        "docs/configuration.md",
        "docs/troubleshooting.md",
        "docs/reference/api.md",
        "examples/custom_tools.py",
        "examples/typed_output.py",
        "examples/approvals.py",
        "examples/mcp_tools.py",
        "examples/real_provider.py",
    ):
        assert wanted in links, wanted
