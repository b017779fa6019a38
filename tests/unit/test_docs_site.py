"""The documentation site builds with ``mkdocs build --strict``, and strict means something.

The README is the repository's landing page; everything else is ``docs/``, built by
mkdocs-material with an API reference from the docstrings (mkdocstrings). ``--strict`` turns
every warning into a failure: a link to a missing page or heading, a page left out of the
navigation, a snippet of the README that is gone. Links out of ``docs/`` to the repository's
files are checked by the site's hook (``docs/hooks/repo_links.py``).
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _build(project: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=project,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _nav_pages(nav: list) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_the_site_builds_strict_with_every_page_and_the_api_reference(tmp_path):
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    pages = _nav_pages(config["nav"])
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert set(pages) == on_disk  # every page is in the navigation, and only those
    for page in pages:
        built = tmp_path / "site" / page.removesuffix(".md").removesuffix("index") / "index.html"
        assert built.is_file(), page
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for name in ("connecting.connect", "driver.Runtime.submit", "handle.JobHandle.result"):
        assert f'id="raytroupe.runtime.{name}"' in api, name  # rendered from the docstrings
    # the README's commands reach the site through snippets, as the README writes them
    home = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "site" / "index.html").read_text()))
    assert "--compile-bytecode --python .venv -e . && .venv/bin/python examples/" in home
    assert "--8<--" not in home


def test_a_link_to_a_missing_heading_fails_the_strict_build(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {"docs", "site", ".git"}:
            (project / entry.name).symlink_to(entry)
    docs = project / "docs"
    docs.mkdir()
    for page in (ROOT / "docs").iterdir():
        (docs / page.name).symlink_to(page)
    (docs / "tools.md").unlink()
    text = (ROOT / "docs" / "tools.md").read_text()
    (docs / "tools.md").write_text(text + "\nSee [the sandbox](memory.md#no-such-heading).\n")
    done = _build(project, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-heading" in done.stderr


def _hook():  # the site's hook, loaded as mkdocs loads it: by its path
    spec = importlib.util.spec_from_file_location("repo_links", ROOT / "docs/hooks/repo_links.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_links_out_of_the_docs_must_name_a_file_of_the_repository():
    hook = _hook()
    assert hook._target("cli.md", "../examples/approvals.py", ROOT) == "examples/approvals.py"
    assert hook._target("reference/api.md", "../../SECURITY.md", ROOT) == "SECURITY.md"
    assert hook._target("_repo/README.md", "docs/cli.md", ROOT) == "docs/cli.md"
    assert hook._target("cli.md", "https://www.ray.io/", ROOT) is None
    from mkdocs.exceptions import PluginError  # noqa: PLC0415 - a dev-only package

    with pytest.raises(PluginError, match="names no file"):
        hook._target("cli.md", "../examples/no_such_example.py", ROOT)
    with pytest.raises(PluginError, match="leaves the repository"):
        hook._target("cli.md", "../../../etc/passwd", ROOT)


def test_the_readme_is_a_landing_page_that_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= 300, len(lines)
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0] == "## Set up and run (fresh machine, Python >= 3.11)"
    links = set(re.findall(r"\]\((docs/[^)#\s]+)", readme))
    pages = {
        f"docs/{p.relative_to(ROOT / 'docs')}"
        for p in (ROOT / "docs").rglob("*.md")
        if p.name != "index.md"
    }
    assert pages <= links, sorted(pages - links)
