"""A document's passages in its knowledge base's Chroma collection: written, found, read back.

A passage's id is made of its source's hash, the document's hash and its position; its
metadata holds the source, the document's hash, the ingest time, the media type, the
passage count, its position and section, and the document's own metadata (keys prefixed
``m:``). Writes and reads go in batches below every backend's limit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from raytroupe.actors.memory.documents import Chunk
from raytroupe.protocols.knowledge import KnowledgeDocument, Passage

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Embeddable, EmbeddingFunction

__all__ = ["delete", "passage", "replace", "stored"]

_BATCH: Final = 1000  # records per Chroma write: below every backend's limit
_USER: Final = "m:"  # prefix of a document's own metadata keys among a passage's


def stored(collection: Collection, sources: list[str]) -> dict[str, tuple[set[str], list[str]]]:
    """The stored hashes and passage ids of each of ``sources`` that is stored.

    A source has one hash, unless a replacement broke off half-way.
    """
    stored: dict[str, tuple[set[str], list[str]]] = {}
    for start in range(0, len(sources), _BATCH):
        some = sources[start : start + _BATCH]
        where: dict[str, Any] = {"source": {"$in": some}}
        found = collection.get(where=where, include=["metadatas"])
        for chunk_id, meta in zip(found["ids"], found["metadatas"] or [], strict=True):
            hashes, ids = stored.setdefault(str(meta["source"]), (set(), []))
            hashes.add(str(meta["hash"]))
            ids.append(chunk_id)
    return stored


def replace(
    collection: Collection,
    document: KnowledgeDocument,
    digest: str,
    chunks: list[Chunk],
    old_ids: list[str],
    *,
    clock: Callable[[], float],
    embed: EmbeddingFunction[Embeddable],
) -> None:
    """Write the new passages, then delete the old ones (in a thread: it embeds)."""
    key = hashlib.sha256(document.source.encode()).hexdigest()[:16]
    ids = [f"{key}:{digest[:16]}:{c.position}" for c in chunks]
    common: dict[str, str | int | float | bool] = {
        "source": document.source,
        "hash": digest,
        "ingested_at": clock(),
        "media_type": document.media_type,
        "chunks": len(chunks),
        **{_USER + k: v for k, v in document.metadata.items()},
    }
    for start in range(0, len(chunks), _BATCH):
        part = chunks[start : start + _BATCH]
        collection.upsert(
            ids=ids[start : start + _BATCH],
            documents=[c.text for c in part],
            embeddings=embed([_embedded_text(c) for c in part]),
            metadatas=[{**common, "position": c.position, "section": c.section} for c in part],
        )
    current = set(ids)
    delete(collection, [i for i in old_ids if i not in current])


def delete(collection: Collection, ids: list[str]) -> None:
    """Delete the passages ``ids``, in batches."""
    for start in range(0, len(ids), _BATCH):
        collection.delete(ids=ids[start : start + _BATCH])


def passage(text: str, meta: dict[str, Any], distance: float) -> Passage:
    """A found passage, scored by its similarity."""
    return Passage(
        text=text,
        source=str(meta.get("source", "")),
        position=int(meta.get("position", 0)),
        section=str(meta.get("section", "")),
        score=1.0 - distance,
        metadata={k[len(_USER) :]: v for k, v in meta.items() if k.startswith(_USER)},
    )


def _embedded_text(chunk: Chunk) -> str:
    """What is embedded for a passage: its heading or JSON path gives it context."""
    if chunk.section and not chunk.section.startswith("page "):
        return f"{chunk.section}\n{chunk.text}"
    return chunk.text
