"""Files as knowledge-base documents: the format from the file's suffix, PDFs as base64."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from raytroupe.protocols import InvalidInput
from raytroupe.protocols.knowledge import MAX_DOCUMENT_BYTES, KnowledgeDocument, MediaType

__all__ = ["MEDIA_TYPES", "documents_from", "media_type_of"]

MEDIA_TYPES: Final[dict[str, MediaType]] = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".rst": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".json": "application/json",
}
"""The file suffixes a knowledge base reads, and their formats."""


def media_type_of(path: Path) -> MediaType:
    """The format of ``path``, from its suffix.

    Raises:
        InvalidInput: a suffix no knowledge base reads.
    """
    kind = MEDIA_TYPES.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(sorted(MEDIA_TYPES))
        raise InvalidInput(f"{path}: a knowledge base reads {known} files", source=str(path))
    return kind


def _files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        if path.is_dir():
            yield from sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MEDIA_TYPES
            )
        else:
            yield path


def documents_from(
    paths: Iterable[str | Path],
    *,
    base: str | Path | None = None,
    metadata: dict[str, str] | None = None,
) -> list[KnowledgeDocument]:
    """The documents of ``paths`` (files, or directories searched for readable files).

    Each document's source is its path as given (under a directory: the directory's path
    joined with the file's), or relative to ``base`` when it is under it; ingesting the
    same files again replaces them.

    Raises:
        InvalidInput: a file that does not exist, is too large, or has an unreadable suffix.
    """
    documents = []
    for path in _files(paths):
        kind = media_type_of(path)
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise InvalidInput(f"{path}: {exc.strerror or exc}", source=str(path)) from None
        if size > MAX_DOCUMENT_BYTES:
            raise InvalidInput(
                f"{path} is {size} bytes; a document is at most {MAX_DOCUMENT_BYTES}",
                source=str(path),
            )
        raw = path.read_bytes()
        if kind == "application/pdf":
            body = {"data_b64": base64.b64encode(raw).decode("ascii")}
        else:
            try:
                body = {"content": raw.decode("utf-8")}
            except UnicodeDecodeError:
                raise InvalidInput(f"{path} is not UTF-8 text", source=str(path)) from None
        documents.append(
            KnowledgeDocument.model_validate(
                {
                    "source": _source(path, base),
                    "media_type": kind,
                    "metadata": metadata or {},
                    **body,
                }
            )
        )
    return documents


def _source(path: Path, base: str | Path | None) -> str:
    if base is not None and path.is_relative_to(base):
        return str(path.relative_to(base))
    return str(path)
