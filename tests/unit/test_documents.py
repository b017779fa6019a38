"""Documents to passages: each format, sections, overlap, limits and hostile input."""

import base64
import importlib.util
import itertools
import json
import re
import zlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from raytroupe.actors.memory.documents import ChunkingConfig, chunk_document, document_hash
from raytroupe.protocols import InvalidInput
from raytroupe.protocols.knowledge import KnowledgeDocument, check_kb_name

DATA = Path(__file__).resolve().parents[1] / "data" / "knowledge"
_spec = importlib.util.spec_from_file_location("make_pdfs", DATA / "make_pdfs.py")
make_pdfs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_pdfs)

SMALL = ChunkingConfig(target_words=40, overlap_words=8)


def doc(content, media_type="text/plain", source="doc", **fields):
    return KnowledgeDocument(source=source, media_type=media_type, content=content, **fields)


def raw(data, media_type="application/pdf", source="doc.pdf"):
    b64 = base64.b64encode(data).decode()
    return KnowledgeDocument(source=source, media_type=media_type, data_b64=b64)


def chunks(document, config=None):
    return chunk_document(document, config or ChunkingConfig())


def sentences(n, topic="step"):
    return " ".join(f"Sentence {i} describes {topic} number {i} in plain words." for i in range(n))


def pdf_with_content(content: bytes) -> bytes:
    """A one-page PDF whose page content is ``content``, deflated."""
    stream = zlib.compress(content, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 5 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 6\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size 6 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


# -- plain text and overlap -------------------------------------------------------------


def test_plain_text_keeps_paragraphs_and_numbers_passages_in_order():
    text = "First paragraph,\nsoft wrapped.\n\nSecond paragraph.\n\n\n- a list item\n- another"
    found = chunks(doc(text))
    assert [c.position for c in found] == list(range(len(found)))
    assert (
        found[0].text
        == "First paragraph, soft wrapped.\n\nSecond paragraph.\n\n- a list item\n- another"
    )
    assert found[0].section == ""


def test_consecutive_passages_of_a_section_overlap_and_miss_nothing():
    config = ChunkingConfig(target_words=40, overlap_words=12)  # a 10-word sentence fits
    found = chunks(doc(sentences(40)), config)
    assert len(found) > 3
    for c in found:
        assert 0 < len(c.text.split()) <= config.target_words
    for before, after in itertools.pairwise(found):
        shared = set(re.findall(r"Sentence \d+ ", before.text)) & set(
            re.findall(r"Sentence \d+ ", after.text)
        )
        assert shared, (before.text, after.text)
    everything = " ".join(c.text for c in found)
    for i in range(40):
        assert f"Sentence {i} describes step number {i} in plain words." in everything


def test_without_overlap_no_sentence_is_repeated():
    found = chunks(doc(sentences(40)), ChunkingConfig(target_words=40, overlap_words=0))
    said = [s for c in found for s in re.findall(r"Sentence \d+ ", c.text)]
    assert len(said) == len(set(said)) == 40


def test_a_sentence_longer_than_a_passage_is_cut_and_still_overlaps():
    words = [f"w{i}" for i in range(130)]
    found = chunks(doc(" ".join(words)), SMALL)
    assert all(len(c.text.split()) <= SMALL.target_words for c in found)
    assert set(" ".join(c.text for c in found).split()) == set(words)
    assert found[0].text.split()[-1] in found[1].text.split()


def test_text_without_spaces_is_cut_by_characters():
    found = chunks(doc("字" * 5000), SMALL)
    assert len(found) > 1
    assert all(len(c.text) <= SMALL.target_words * 8 for c in found)


# -- Markdown ---------------------------------------------------------------------------

MARKDOWN = """Preface line before any heading.

# Guide

Intro to the [guide](https://example.com/guide).

## Install
{install}

```python
# not a heading: inside a fence
def main():
    return 1
```

### Linux
- apt install it
- run it

Setext Title
============

Under the setext heading.

Second Level
------------

Last words.
"""


def test_markdown_sections_follow_the_heading_path():
    text = MARKDOWN.format(install=sentences(3, "installing"))
    found = chunks(doc(text, "text/markdown"))
    by_section = {c.section: c.text for c in found}
    assert list(by_section) == [
        "",
        "Guide",
        "Guide > Install",
        "Guide > Install > Linux",
        "Setext Title",
        "Setext Title > Second Level",
    ]
    assert by_section["Guide"] == "Intro to the guide."  # links keep only their text
    assert by_section["Guide > Install > Linux"] == "- apt install it\n- run it"
    assert "# not a heading: inside a fence" in by_section["Guide > Install"]


def test_a_code_fence_that_fits_is_never_cut():
    text = MARKDOWN.format(install=sentences(12, "installing"))
    found = [c for c in chunks(doc(text, "text/markdown"), SMALL) if "def main" in c.text]
    assert len(found) == 1
    assert (
        "```python\n# not a heading: inside a fence\ndef main():\n    return 1\n```"
        in found[0].text
    )


# -- HTML -------------------------------------------------------------------------------


def test_html_drops_scripts_styles_and_navigation_and_decodes_entities():
    page = """<html><head><title>T</title><script>steal("cookies")</script>
    <style>p { color: red }</style></head><body>
    <nav><a href="/">Home</a> Menu</nav><!-- a comment -->
    <h1>Fares &amp; tickets</h1><p>Adults pay &pound;7.40 &ndash; children half.</p>
    <noscript>Enable scripts</noscript>
    <h2>Table</h2><table><tr><td>Bicycle</td><td>free</td></tr></table>
    <ul><li>one</li><li>two</li></ul><pre>  keep
    spacing</pre><svg><text>drawn text</text></svg>
    </body></html>"""
    found = chunks(doc(page, "text/html"))
    text = "\n".join(c.text for c in found)
    for hidden in ("steal", "cookies", "color", "Home", "Menu", "comment", "Enable", "drawn"):
        assert hidden not in text
    assert found[0].section == "Fares & tickets"
    assert found[0].text == "Adults pay £7.40 \u2013 children half."
    assert found[1].section == "Fares & tickets > Table"
    assert "Bicycle | free" in found[1].text
    assert "- one\n\n- two" in found[1].text
    assert "  keep\n    spacing" in found[1].text


def test_html_with_a_head_never_closed_still_shows_its_body():
    found = chunks(doc("<html><head><title>x</title><body><p>Visible text.</p>", "text/html"))
    assert [c.text for c in found] == ["Visible text."]


# -- PDF --------------------------------------------------------------------------------


def test_pdf_pages_are_sections():
    data = (DATA / "beekeeping_course.pdf").read_bytes()
    found = chunks(raw(data))
    assert {c.section for c in found} == {"page 1", "page 2"}
    text = " ".join(c.text for c in found)
    assert "two thousand eggs a day" in " ".join(text.split())


def test_the_committed_pdfs_are_what_the_script_writes():
    assert (DATA / "beekeeping_course.pdf").read_bytes() == make_pdfs.pdf(make_pdfs.BEEKEEPING)
    assert (DATA / "water_quality_2024.pdf").read_bytes() == make_pdfs.pdf(make_pdfs.WATER)


@pytest.mark.parametrize(
    "data",
    [b"not a pdf at all", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", make_pdfs.pdf("# T\n\nx")[:150]],
    ids=["garbage", "truncated", "cut"],
)
def test_a_corrupt_pdf_is_invalid_input_naming_its_source(data):
    with pytest.raises(InvalidInput, match=r"'broken\.pdf' is not a readable PDF") as caught:
        chunks(raw(data, source="broken.pdf"))
    assert caught.value.detail["source"] == "broken.pdf"


def test_a_pdf_decompression_bomb_is_refused():
    bomb = pdf_with_content(b" " * 50_000_000)  # ~50 KB that inflate to 50 MB
    assert len(bomb) < 100_000
    with pytest.raises(InvalidInput, match=r"'bomb\.pdf' is not a readable PDF .*Limit reached"):
        chunks(raw(bomb, source="bomb.pdf"))


def test_a_pdf_whose_content_outgrows_the_document_limit_is_refused():
    text = b"BT /F1 12 Tf (" + b"lorem ipsum dolor " * 20_000 + b") Tj ET"  # 360 KB inflated
    small = pdf_with_content(text)
    assert len(small) < 10_000
    assert chunks(raw(small))  # fine under the default limit
    with pytest.raises(InvalidInput, match="bytes of page content"):
        chunks(raw(small), ChunkingConfig(max_document_bytes=100_000))


def test_a_pdf_without_text_has_no_passages():
    with pytest.raises(InvalidInput, match="has no text"):
        chunks(raw(pdf_with_content(b"0 0 m 100 100 l S")))


# -- JSON -------------------------------------------------------------------------------


def test_json_keeps_small_objects_whole_under_their_path():
    data = {
        "name": "Hollins Ridge",
        "instruments": [
            {"id": f"dome-{i}", "aperture_mm": 100 + i, "use": sentences(2, f"dome {i}")}
            for i in range(3)
        ],
        "odd key": {"text": sentences(8, "history")},
    }
    found = chunks(doc(json.dumps(data), "application/json"), ChunkingConfig(target_words=60))
    by_section = {c.section: c.text for c in found}
    assert by_section["$"] == "name: Hollins Ridge"
    assert by_section["$.instruments[1]"].startswith("id: dome-1\naperture_mm: 101\nuse: ")
    assert '$["odd key"].text' in by_section


def test_deep_json_within_limits_is_kept_as_text_below_the_depth_limit():
    value: object = "the innermost words"
    for i in range(60):
        value = {f"level{i}": value, "pad": sentences(4, f"level {i}")}
    found = chunks(doc(json.dumps(value), "application/json"), ChunkingConfig(max_json_depth=5))
    assert max(c.section.count(".") for c in found) <= 5
    assert "the innermost words" in " ".join(c.text for c in found)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not valid JSON"), ("[" * 100_000 + "]" * 100_000, "nested too deeply")],
    ids=["invalid", "too-deep"],
)
def test_bad_json_is_invalid_input(content, message):
    with pytest.raises(InvalidInput, match=message):
        chunks(doc(content, "application/json", source="bad.json"))


# -- limits and garbage -----------------------------------------------------------------


def test_documents_over_the_size_limit_are_refused():
    config = ChunkingConfig(max_document_bytes=1000)
    with pytest.raises(InvalidInput, match=r"'big\.txt' is 1001 bytes; the limit is 1000"):
        chunks(doc("x" * 1001, source="big.txt"), config)
    with pytest.raises(InvalidInput, match="is 1001 bytes"):
        chunks(raw(b"x" * 1001, "text/plain", "big.txt"), config)


def test_documents_over_the_passage_limit_are_refused():
    with pytest.raises(InvalidInput, match="more than 3 passages"):
        chunks(doc(sentences(40)), ChunkingConfig(target_words=40, overlap_words=8, max_chunks=3))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8 text"),
        (b"text with a NUL\x00 inside", "looks binary"),
        (bytes(range(1, 9)) * 100, "looks binary"),
    ],
    ids=["png", "nul", "control-characters"],
)
def test_binary_in_a_text_type_is_refused(data, message):
    with pytest.raises(InvalidInput, match=message) as caught:
        chunks(raw(data, "text/markdown", "blob.md"))
    assert caught.value.detail == {"source": "blob.md"}


@pytest.mark.parametrize(
    ("content", "media_type"),
    [
        ("   \n\n  ", "text/plain"),
        ("<script>only()</script>", "text/html"),
        ("{}", "application/json"),
    ],
)
def test_a_document_without_text_is_refused(content, media_type):
    with pytest.raises(InvalidInput, match="has no text"):
        chunks(doc(content, media_type))


# -- the protocol -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"source": "a\nb", "media_type": "text/plain", "content": "x"},
        {"source": "a\x1b[31m", "media_type": "text/plain", "content": "x"},
        {"source": "   ", "media_type": "text/plain", "content": "x"},
        {"source": "x" * 513, "media_type": "text/plain", "content": "x"},
        {"source": "a", "media_type": "text/plain"},
        {"source": "a", "media_type": "text/plain", "content": "x", "data_b64": "eA=="},
        {"source": "a", "media_type": "application/pdf", "content": "%PDF"},
        {"source": "a", "media_type": "text/plain", "data_b64": "not base64!"},
        {"source": "a", "media_type": "image/png", "content": "x"},
        {"source": "a", "media_type": "text/plain", "content": "x", "metadata": {"1bad": 1}},
    ],
    ids=[
        "newline",
        "escape",
        "blank",
        "long",
        "no-body",
        "two-bodies",
        "pdf-text",
        "b64",
        "type",
        "metadata",
    ],
)
def test_bad_documents_fail_validation(fields):
    with pytest.raises(ValidationError):
        KnowledgeDocument(**fields)


def test_knowledge_base_names_are_strict():
    assert check_kb_name("hr-policies_2") == "hr-policies_2"
    for bad in ("", "Upper", "-dash", "a/b", "a" * 64, "dots.no"):
        with pytest.raises(InvalidInput):
            check_kb_name(bad)


def test_the_hash_changes_with_content_type_metadata_and_chunking():
    base = doc("Some text.")
    same = document_hash(base, ChunkingConfig())
    assert document_hash(doc("Some text."), ChunkingConfig()) == same
    assert document_hash(doc("Other text."), ChunkingConfig()) != same
    assert document_hash(doc("Some text.", "text/markdown"), ChunkingConfig()) != same
    assert document_hash(doc("Some text.", metadata={"v": 2}), ChunkingConfig()) != same
    assert document_hash(base, ChunkingConfig(target_words=100)) != same


def test_overlap_may_not_exceed_half_a_passage():
    with pytest.raises(ValidationError):
        ChunkingConfig(target_words=40, overlap_words=21)
