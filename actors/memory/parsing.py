"""Documents to sections: the structure of text, Markdown, HTML, PDF and JSON.

Each parser turns a document into ``Section`` s (a heading path, JSON path or page, and its
blocks: paragraphs, lists, code) for :mod:`raytroupe.actors.memory.documents` to cut into passages.
Pure functions, no I/O. Every limit is enforced here or by the caller, so that hostile input
(deep nesting, a decompression bomb, scripts in HTML) is refused or neutralized with an
``InvalidInput`` naming the source, never a crash.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Final

from raytroupe.protocols import InvalidInput

__all__ = [
    "Block",
    "Section",
    "html_sections",
    "json_sections",
    "markdown_sections",
    "pdf_sections",
    "text_sections",
]


@dataclass(frozen=True, slots=True)
class Block:
    """A paragraph, a list or a code block; ``whole`` blocks are not split where they fit."""

    text: str
    whole: bool = False


@dataclass(slots=True)
class Section:
    """Blocks under one heading path, JSON path or page ("" for none)."""

    path: str
    blocks: list[Block] = field(default_factory=list)


class _Outline:
    """Sections as headings open them: a heading of level n closes those of level >= n."""

    def __init__(self) -> None:
        self.sections = [Section("")]
        self._headings: list[tuple[int, str]] = []

    def heading(self, level: int, title: str) -> None:
        title = " ".join(title.split())
        if not title:
            return
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, title))
        self.sections.append(Section(" > ".join(t for _, t in self._headings)))

    def add(self, text: str, *, whole: bool = False) -> None:
        if text.strip():
            self.sections[-1].blocks.append(Block(text.strip("\n"), whole=whole))

    def done(self) -> list[Section]:
        return [s for s in self.sections if s.blocks]


# --------------------------------------------------------------------------- text, Markdown

_BLANK_LINES: Final = re.compile(r"\n[ \t]*\n+")
_LIST_ITEM: Final = re.compile(r"^\s*(?:[-*+•]|\d{1,9}[.)])\s+")
_ATX: Final = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT: Final = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_RULE: Final = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LINK: Final = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")


def _prose(lines: list[str]) -> str:
    """Soft-wrapped lines joined; list items and table rows keep lines of their own."""
    out: list[str] = []
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if not out or _LIST_ITEM.match(line) or line.startswith("|"):
            out.append(line)
        else:
            out[-1] += " " + line
    return "\n".join(out)


def text_sections(text: str) -> list[Section]:
    """Plain text: paragraphs separated by blank lines, one section without a path."""
    outline = _Outline()
    for paragraph in _BLANK_LINES.split(text):
        outline.add(_prose(paragraph.split("\n")))
    return outline.done()


def markdown_sections(text: str) -> list[Section]:
    """Markdown: ATX and setext headings give the section path; code fences stay whole."""
    outline = _Outline()
    paragraph: list[str] = []

    def flush() -> None:
        outline.add(_LINK.sub(r"\1", _prose(paragraph)))
        paragraph.clear()

    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            i = _fenced(lines, i, fence.group(1), outline)
            continue
        heading = _ATX.match(line)
        if heading:
            flush()
            outline.heading(len(heading.group(1)), heading.group(2) or "")
        elif len(paragraph) == 1 and _SETEXT.match(line) and not _LIST_ITEM.match(paragraph[0]):
            outline.heading(1 if line.strip().startswith("=") else 2, paragraph.pop())
        elif not line.strip() or (not paragraph and _RULE.match(line)):
            flush()
        else:
            paragraph.append(line)
        i += 1
    flush()
    return outline.done()


def _fenced(lines: list[str], start: int, marker: str, outline: _Outline) -> int:
    """Add the code block opening at ``start``; the index of the line after it.

    The block ends at its closing fence, or at the end of the document.
    """
    body = [lines[start]]
    i = start + 1
    while i < len(lines):
        body.append(lines[i])
        i += 1
        closing = lines[i - 1].strip()
        if closing.startswith(marker) and not closing.strip(marker[0]):
            break
    outline.add("\n".join(body), whole=True)
    return i


# --------------------------------------------------------------------------- HTML

_SKIPPED: Final = frozenset(
    {"script", "style", "nav", "noscript", "template", "svg", "math", "iframe", "object",
     "head", "canvas", "select", "button"}
)  # fmt: skip
_BLOCKS: Final = frozenset(
    {"p", "div", "li", "ul", "ol", "section", "article", "main", "header", "footer", "aside",
     "blockquote", "table", "thead", "tbody", "tr", "dl", "dt", "dd", "figure", "figcaption",
     "form", "fieldset", "details", "summary", "address", "hr", "body", "caption"}
)  # fmt: skip
_HEADINGS: Final = {f"h{n}": n for n in range(1, 7)}


class _HTMLText(HTMLParser):
    """Text of the visible, structural part of a page: scripts, styles and navigation go."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)  # entities decoded in the text
        self.outline = _Outline()
        self._skipping: list[str] = []
        self._text: list[str] = []
        self._heading: int | None = None
        self._pre = 0

    def handle_starttag(self, tag: str, _attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._skipping.clear()  # a <head> never closed does not hide the page
        if tag in _SKIPPED:
            self._skipping.append(tag)
        if self._skipping:
            return
        if tag in _HEADINGS:
            self._flush()
            self._heading = _HEADINGS[tag]
        elif tag == "pre":
            self._flush()
            self._pre += 1
        elif tag in _BLOCKS:
            self._flush()
            if tag == "li":
                self._text.append("- ")
        elif tag == "br":
            self._text.append("\n")
        elif tag in {"td", "th"} and "".join(self._text).strip():
            self._text.append(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _SKIPPED:  # <svg/> opens nothing to skip
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._skipping:
            while self._skipping.pop() != tag:
                pass
            return
        if self._skipping:
            return
        if tag in _HEADINGS and self._heading is not None:
            self.outline.heading(self._heading, "".join(self._text))
            self._text.clear()
            self._heading = None
        elif tag == "pre" and self._pre:
            self._pre -= 1
            self.outline.add("".join(self._text), whole=True)
            self._text.clear()
        elif tag in _BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self._text.append(data)

    def _flush(self) -> None:
        if self._heading is not None or self._pre:
            return  # a block inside a heading or <pre> belongs to it
        lines = (" ".join(line.split()) for line in "".join(self._text).split("\n"))
        self.outline.add("\n".join(line for line in lines if line))
        self._text.clear()

    def done(self) -> list[Section]:
        self._heading, self._pre = None, 0
        self._flush()
        return self.outline.done()


def html_sections(text: str) -> list[Section]:
    """HTML: headings h1-h6 give the section path, block elements the paragraphs."""
    parser = _HTMLText()
    parser.feed(text)
    parser.close()
    return parser.done()


# --------------------------------------------------------------------------- PDF

_HYPHENATED: Final = re.compile(r"(\w-)\n(?=[a-z])")  # a line broken after a hyphen
_PDF_LIMITS: Final[dict[str, int]] = {
    # far below pypdf's defaults (75 MB a stream): parsing content is pure Python, ~1 MB/s
    "zlib_maximum_output_length": 4_000_000,
    "lzw_maximum_output_length": 4_000_000,
    "run_length_maximum_output_length": 4_000_000,
    "brotli_maximum_output_length": 4_000_000,
    "array_based_stream_maximum_output_length": 4_000_000,
    "stream_decoding_work_maximum_length": 16_000_000,
    "stream_parsing_work_maximum_count": 250_000,
    "xform_maximum_invocations_per_extraction": 200,
    "page_tree_maximum_entries": 20_000,
}


def pdf_sections(data: bytes, source: str, *, max_pages: int, max_bytes: int) -> list[Section]:
    """PDF text, one section per page ("page N"), decoded under tight limits.

    Besides pypdf's limits per stream (lowered here), the pages' decoded content together
    may not exceed ``max_bytes``: a small file can inflate to far more, and parsing it is
    slow (pure Python), so a decompression bomb is refused before its text is extracted.

    Raises:
        InvalidInput: not a readable PDF, encrypted, too many pages, or too much content.
    """
    import pypdf  # noqa: PLC0415 - only PDF ingestion needs it

    with pypdf.apply_configuration(None, **_PDF_LIMITS):
        try:
            return _pdf_pages(pypdf.PdfReader(io.BytesIO(data)), source, max_pages, max_bytes)
        except InvalidInput:
            raise
        except Exception as exc:  # noqa: BLE001 - pypdf raises many types on corrupt files
            raise InvalidInput(
                f"{source!r} is not a readable PDF ({type(exc).__name__}: {exc})"[:500],
                source=source,
            ) from None


def _pdf_pages(reader: Any, source: str, max_pages: int, max_bytes: int) -> list[Section]:
    if reader.is_encrypted:
        raise InvalidInput(f"{source!r} is an encrypted PDF", source=source)
    if len(reader.pages) > max_pages:
        raise InvalidInput(f"{source!r} has more than {max_pages} pages", source=source)
    sections, total = [], 0
    for number, page in enumerate(reader.pages, start=1):
        contents = page.get_contents()
        total += len(contents.get_data()) if contents is not None else 0
        if total > max_bytes:
            raise InvalidInput(
                f"{source!r} has more than {max_bytes} bytes of page content", source=source
            )
        text = _HYPHENATED.sub(r"\1", page.extract_text() or "")
        section = Section(f"page {number}")
        for paragraph in _BLANK_LINES.split(text):
            if paragraph.strip():
                section.blocks.append(Block(" ".join(paragraph.split())))
        sections.append(section)
    return [s for s in sections if s.blocks]


# --------------------------------------------------------------------------- JSON

_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_sections(text: str, source: str, *, budget: int, max_depth: int) -> list[Section]:
    """JSON: values that fit ``budget`` words stay whole, each under its JSON path.

    A container too big for one passage is walked: its small scalar members are grouped
    as ``key: value`` lines under its own path, bigger members get theirs. Below
    ``max_depth`` a value is kept as JSON text.

    Raises:
        InvalidInput: not valid JSON, or nested too deeply to parse.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidInput(f"{source!r}: JSON nested too deeply", source=source) from None
    except ValueError as exc:
        raise InvalidInput(f"{source!r} is not valid JSON: {exc}", source=source) from None
    out: list[Section] = []
    _walk(value, "$", 0, out, _Limits(budget, max_depth))
    return out


@dataclass(frozen=True, slots=True)
class _Limits:
    budget: int  # words of a value kept whole
    depth: int  # deeper values are kept as JSON text


def _walk(value: Any, path: str, depth: int, out: list[Section], limits: _Limits) -> None:
    budget, limit = limits.budget, limits.depth
    if depth >= limit:
        out.append(Section(path, [Block(json.dumps(value, ensure_ascii=False))]))
        return
    if _cost(value, budget, depth, limit) >= 0:
        out.append(Section(path, [Block(_render(value), whole=isinstance(value, dict | list))]))
        return
    if not isinstance(value, dict | list):
        out.append(Section(path, [Block(_inline(value))]))  # a long string: prose
        return
    members = value.items() if isinstance(value, dict) else enumerate(value)
    group: list[str] = []
    for key, child in members:
        fits = _cost(child, budget, depth + 1, limit) >= 0
        small = fits and _cost(child, budget // 4, depth + 1, limit) >= 0
        if small or (fits and not isinstance(child, dict | list)):
            group.append(_line(key, child))
            continue
        if group:
            out.append(Section(path, [Block("\n".join(group))]))
            group = []
        _walk(child, _child_path(path, key), depth + 1, out, limits)
    if group:
        out.append(Section(path, [Block("\n".join(group))]))


def _cost(value: Any, budget: int, depth: int, limit: int) -> int:
    """``budget`` less the words of ``value``; negative (early) once it does not fit."""
    if depth > limit:
        return -1
    if isinstance(value, str):
        return budget - max(1, len(value.split()), len(value) // 8)
    if not isinstance(value, dict | list):
        return budget - 1
    budget -= 1
    for key, child in value.items() if isinstance(value, dict) else enumerate(value):
        budget -= 1 + len(key) // 16 if isinstance(key, str) else 0
        budget = _cost(child, budget, depth + 1, limit)
        if budget < 0:
            break
    return budget


def _inline(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _line(key: object, value: Any) -> str:
    return f"- {_inline(value)}" if isinstance(key, int) else f"{key}: {_inline(value)}"


def _render(value: Any) -> str:
    if isinstance(value, dict):
        return "\n".join(_line(k, v) for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(_line(i, v) for i, v in enumerate(value))
    return _inline(value)


def _child_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    name = str(key)
    return f"{path}.{name}" if _IDENTIFIER.match(name) else f"{path}[{json.dumps(name)}]"
