"""mkdocs hook: links from the docs to files of the repository outside ``docs/``.

On GitHub a page's ``[text](../examples/approvals.py)`` opens the file; a site built from
``docs/`` has no such file, and ``mkdocs build --strict`` would fail on the link. This hook
adds each linked file to the site under ``_repo/`` (as the repository holds it: a Markdown
file such as ``CHANGELOG.md`` becomes a page, whose own links are followed the same way) and
points the links there. A link to a file that does not exist fails the build.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

PREFIX = "_repo/"
_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
_FENCE = re.compile(r"(^```.*?^```)", re.MULTILINE | re.DOTALL)


def _repo_path(site_uri: str) -> str:
    """Where a site file's source is, as a path of the repository."""
    return site_uri[len(PREFIX) :] if site_uri.startswith(PREFIX) else f"docs/{site_uri}"


def _site_uri(repo_path: str) -> str:
    return repo_path[len("docs/") :] if repo_path.startswith("docs/") else PREFIX + repo_path


def _target(site_uri: str, link: str, root: Path) -> str | None:
    """The repository path a relative link of a page names; None for a URL or an anchor."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith("/"):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(_repo_path(site_uri)), link))
    if joined.startswith("../"):
        raise PluginError(f"{_repo_path(site_uri)}: {link} leaves the repository")
    if not (root / joined).exists():
        raise PluginError(f"{_repo_path(site_uri)}: {link} names no file of the repository")
    return joined


def _links(markdown: str) -> list[str]:
    return [m.group(2) for m in _LINK.finditer(_FENCE.sub("", markdown))]


def on_files(files: Files, config: Any) -> Files:
    """Add every repository file the pages link, and those its Markdown files link in turn."""
    root = Path(config["docs_dir"]).parent
    queue = [f.src_uri for f in files if f.src_uri.endswith(".md")]
    seen = set(queue)
    while queue:
        site_uri = queue.pop()
        markdown = (root / _repo_path(site_uri)).read_text(encoding="utf-8")
        for link in _links(markdown):
            target = _target(site_uri, link, root)
            if target is None or target.startswith("docs/") or _site_uri(target) in seen:
                continue
            if not (root / target).is_file():
                raise PluginError(f"{_repo_path(site_uri)}: {link} is a folder; link a file")
            seen.add(_site_uri(target))
            files.append(File.generated(config, _site_uri(target), abs_src_path=str(root / target)))
            if target.endswith(".md"):
                queue.append(_site_uri(target))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    """The page, its links out of ``docs/`` pointed at the copies :func:`on_files` added."""
    root = Path(config["docs_dir"]).parent
    here = page.file.src_uri

    def rewrite(m: re.Match[str]) -> str:
        target = _target(here, m.group(2), root)
        if target is None:
            return m.group(0)
        relative = posixpath.relpath(_site_uri(target), posixpath.dirname(here) or ".")
        return f"{m.group(1)}{relative}{m.group(3) or ''}{m.group(4)}"

    parts = _FENCE.split(markdown)
    return "".join(p if p.startswith("```") else _LINK.sub(rewrite, p) for p in parts)
