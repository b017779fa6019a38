"""Files as knowledge-base documents, and ingesting many of them a request's worth at a time.

A file's format comes from its suffix; PDFs travel as base64.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from raytroupe.protocols import InvalidInput
from raytroupe.protocols.http import MAX_DOCUMENTS
from raytroupe.protocols.knowledge import (
    MAX_DOCUMENT_BYTES,
    IngestedDocument,
    IngestReport,
    KnowledgeDocument,
    MediaType,
)
from raytroupe.runtime.operations import At
from raytroupe.runtime.operations import knowledge as knowledge_ops

__all__ = ["MEDIA_TYPES", "documents_from", "ingest_all", "media_type_of"]

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


def ingest_all(
    at: At,
    run: Callable[[Coroutine[Any, Any, IngestReport]], IngestReport],
    kb: str,
    given: Iterable[str | Path | KnowledgeDocument],
    *,
    base: str | Path | None = None,
    user: str | None = None,
) -> IngestReport:
    """Ingest documents and files (paths, as :func:`documents_from` reads them) into ``kb``.

    ``user``: the tenant's end user a new base is for (see the ``ingest`` operation).

    Every file is read (and refused) before anything is sent; then the ``ingest``
    operation runs for ``at`` (by ``run``) a request's worth (``MAX_DOCUMENTS``) at a time.
    The report holds what became of each document, in order. Nothing given is refused as a
    request of none is (``InvalidInput``).
    """
    given = list(given)
    documents = [d for d in given if isinstance(d, KnowledgeDocument)]
    paths = [d for d in given if not isinstance(d, KnowledgeDocument)]
    documents += documents_from(paths, base=base)
    op = knowledge_ops.ingest
    batches = [documents[i : i + MAX_DOCUMENTS] for i in range(0, len(documents), MAX_DOCUMENTS)]
    done: list[IngestedDocument] = []
    for batch in batches or [[]]:
        done.extend(run(op.run_for(at, op.bind(kb, batch, user=user))).documents)
    return IngestReport(kb=kb, documents=tuple(done))
