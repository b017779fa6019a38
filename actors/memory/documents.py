"""Documents to passages: decode, parse by structure, cut into overlapping chunks.

``chunk_document(document, config)`` is the one entry point: it checks the document's size,
decodes it (UTF-8 text, or PDF bytes), parses its structure (:mod:`raytroupe.actors.memory.parsing`)
and packs each section's sentences into chunks of about ``target_words`` words; consecutive
chunks of one section share about ``overlap_words`` words (whole sentences where they fit),
so that a fact cut at a boundary is still whole in one of them. Code blocks and small JSON
values stay whole where they fit. Sizes are in words, with long unspaced runs (CJK text,
base64) counted as one word per 8 characters.

Pure functions, no I/O; every failure is an ``InvalidInput`` naming the source.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Final, assert_never

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.actors.memory.parsing import (
    Block,
    Section,
    html_sections,
    json_sections,
    markdown_sections,
    pdf_sections,
    text_sections,
)
from raytroupe.protocols import InvalidInput
from raytroupe.protocols.knowledge import MAX_DOCUMENT_BYTES, KnowledgeDocument

__all__ = ["CHUNKER_VERSION", "Chunk", "ChunkingConfig", "chunk_document", "document_hash"]

CHUNKER_VERSION: Final = 1
"""Bumped when the same document and config would give other chunks (re-ingests it)."""

_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])")  # CJK stops: no space
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_CHARS_PER_WORD: Final = 8


class ChunkingConfig(BaseModel):
    """How documents are cut into passages, and the limits on what is accepted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_words: int = Field(
        default=200, ge=20, le=2000, description="Most words in a passage (about)."
    )
    overlap_words: int = Field(
        default=30, ge=0, description="Words consecutive passages of a section share (about)."
    )
    max_document_bytes: int = Field(
        default=MAX_DOCUMENT_BYTES, ge=1, le=MAX_DOCUMENT_BYTES, description="Larger is refused."
    )
    max_chunks: int = Field(
        default=5000, ge=1, le=100_000, description="A document giving more is refused."
    )
    max_json_depth: int = Field(
        default=32, ge=1, le=200, description="Deeper JSON values are kept as JSON text."
    )
    max_pdf_pages: int = Field(default=2000, ge=1, description="A PDF with more is refused.")

    @model_validator(mode="after")
    def _overlap_below_half(self) -> ChunkingConfig:
        if self.overlap_words * 2 > self.target_words:
            raise ValueError("overlap_words must be at most half of target_words")
        return self

    def fingerprint(self) -> str:
        """What ingestion compares to tell whether stored chunks are still current."""
        fields = self.model_dump(include={"target_words", "overlap_words", "max_json_depth"})
        return json.dumps({**fields, "v": CHUNKER_VERSION}, sort_keys=True)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage of a document: its text, section and index among the document's."""

    text: str
    section: str
    position: int


def document_hash(document: KnowledgeDocument, config: ChunkingConfig) -> str:
    """SHA-256 over what decides the chunks: bytes, type, metadata and chunking settings."""
    digest = hashlib.sha256()
    for part in (
        document.media_type.encode(),
        json.dumps(document.metadata, sort_keys=True).encode(),
        config.fingerprint().encode(),
    ):
        digest.update(len(part).to_bytes(8, "big") + part)
    digest.update(document.raw())
    return digest.hexdigest()


def chunk_document(document: KnowledgeDocument, config: ChunkingConfig) -> list[Chunk]:
    """The passages of ``document``, in order (at least one).

    Raises:
        InvalidInput: too large, not decodable, garbage for its type, without any text, or
            giving more than ``config.max_chunks`` passages (``detail['source']``).
    """
    sections = _sections(document, config)
    chunks: list[Chunk] = []
    for section in sections:
        for text in _pack(_units(section.blocks, config), config):
            if len(chunks) >= config.max_chunks:
                raise InvalidInput(
                    f"{document.source!r} gives more than {config.max_chunks} passages",
                    source=document.source,
                )
            chunks.append(Chunk(text=text, section=section.path, position=len(chunks)))
    if not chunks:
        raise InvalidInput(f"{document.source!r} has no text", source=document.source)
    return chunks


def _sections(document: KnowledgeDocument, config: ChunkingConfig) -> list[Section]:
    source, media_type = document.source, document.media_type
    if media_type == "application/pdf":
        data = document.raw()
        _check_size(source, len(data), config)
        # decoded page content is held to the limit on documents: ~1 s of parsing per MB
        most = config.max_document_bytes
        return pdf_sections(data, source, max_pages=config.max_pdf_pages, max_bytes=most)
    text = _text(document, config)
    match media_type:
        case "text/plain":
            return text_sections(text)
        case "text/markdown":
            return markdown_sections(text)
        case "text/html":
            return html_sections(text)
        case "application/json":
            return json_sections(
                text, source, budget=config.target_words, max_depth=config.max_json_depth
            )
        case _:
            assert_never(media_type)


def _check_size(source: str, size: int, config: ChunkingConfig) -> None:
    if size > config.max_document_bytes:
        raise InvalidInput(
            f"{source!r} is {size} bytes; the limit is {config.max_document_bytes}",
            source=source, size=size, limit=config.max_document_bytes,
        )  # fmt: skip


def _text(document: KnowledgeDocument, config: ChunkingConfig) -> str:
    """The document's text: UTF-8, no binary, newlines and Unicode normalized."""
    source = document.source
    if document.content is not None:
        text = document.content
        _check_size(source, len(text.encode("utf-8", "surrogatepass")), config)
    else:
        data = document.raw()
        _check_size(source, len(data), config)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidInput(f"{source!r} is not UTF-8 text", source=source) from None
    sample = text[:65_536]
    if "\x00" in text or len(_CONTROL.findall(sample)) > len(sample) // 100:
        raise InvalidInput(f"{source!r} looks binary, not {document.media_type}", source=source)
    text = text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8", "replace").decode()
    return _CONTROL.sub(" ", unicodedata.normalize("NFC", text))


# --------------------------------------------------------------------------- packing


@dataclass(frozen=True, slots=True)
class _Unit:
    """A sentence, a line or a whole code block: what packing never cuts (if it fits)."""

    text: str
    words: int
    joint: str  # what joins it to the unit before it in a passage


def _size(text: str) -> int:
    return max(len(text.split()), len(text) // _CHARS_PER_WORD)


def _units(blocks: list[Block], config: ChunkingConfig) -> list[_Unit]:
    """Sentences (or lines, or whole code blocks) of ``blocks``, in order.

    A sentence longer than a passage is cut in runs short enough for the overlap to fit
    beside them.
    """
    target, piece = config.target_words, config.target_words - config.overlap_words
    units: list[_Unit] = []
    for block in blocks:
        if not block.text.strip():
            continue
        first = len(units)
        if block.whole and _size(block.text) <= target:
            units.append(_Unit(block.text, _size(block.text), "\n"))
        elif block.whole:  # code too long for one passage: cut between lines
            lines = block.text.split("\n")
            units += [_Unit(p, _size(p), "\n") for ln in lines for p in _pieces(ln, target, piece)]
        else:
            for line in block.text.split("\n"):
                for j, sentence in enumerate(s for s in _SENTENCE_END.split(line) if s.strip()):
                    joint = " " if j else "\n"
                    pieces = _pieces(sentence.strip(), target, piece)
                    units += [
                        _Unit(p, _size(p), joint if k == 0 else " ") for k, p in enumerate(pieces)
                    ]
        if len(units) > first:  # paragraphs are set apart by a blank line
            units[first] = _Unit(units[first].text, units[first].words, "\n\n")
    return units


def _pieces(text: str, limit: int, step: int) -> list[str]:
    """``text`` whole if it has at most ``limit`` words, else cut into runs of ``step``.

    Runs are of words, or of ``8 * step`` characters for text with few spaces.
    """
    if _size(text) <= limit:
        return [text] if text.strip() else []
    words = text.split()
    if len(text) // _CHARS_PER_WORD > len(words):
        chars = step * _CHARS_PER_WORD
        return [text[i : i + chars] for i in range(0, len(text), chars)]
    return [" ".join(words[i : i + step]) for i in range(0, len(words), step)]


def _pack(units: list[_Unit], config: ChunkingConfig) -> list[str]:
    """Units packed greedily into passages of at most ``target_words``, overlapping."""
    target, passages = config.target_words, []
    current: list[_Unit] = []
    words = 0
    for unit in units:
        if current and words + unit.words > target:
            passages.append(_join(current))
            current = _overlap(current, config.overlap_words)
            words = sum(u.words for u in current)
            if words + unit.words > target:
                current, words = [], 0
        current.append(unit)
        words += unit.words
    if current:
        passages.append(_join(current))
    return passages


def _overlap(units: list[_Unit], budget: int) -> list[_Unit]:
    """The end of a passage that starts the next one.

    Whole trailing sentences within ``budget`` words, else the last ``budget`` words of the
    last sentence; never the whole passage.
    """
    if budget <= 0:
        return []
    tail: list[_Unit] = []
    words = 0
    for unit in reversed(units[1:]):
        if words + unit.words > budget:
            break
        tail.insert(0, unit)
        words += unit.words
    if tail:
        return tail
    last = units[-1].text.split()[-budget:]
    return [_Unit(" ".join(last), len(last), " ")] if len(units[-1].text.split()) > 1 else []


def _join(units: list[_Unit]) -> str:
    return (units[0].text + "".join(u.joint + u.text for u in units[1:])).strip()
