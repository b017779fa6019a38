"""Knowledge bases: a tenant's documents, cut into passages, embedded and searched in Chroma.

One Chroma collection per (tenant, knowledge base), named from hashes of both
(``collection_name``), so that one tenant can never reach another's passages; the base's
name and creation time live in the collection's metadata, so ``bases`` survives restarts.
Each passage's metadata holds its document's source, its position and section, the hash of
what was ingested and the time (:mod:`raytroupe.actors.memory.passages`).

A base made by an ingest for one of the tenant's end users (``user``) is that user's: a job of
another user, or of none, does not find it (its search is ``KnowledgeNotFound``, as for a base
that does not exist), nor can another user's ingest add to it; the tenant itself (its API
calls, the driver) reaches every base.

Re-ingesting a source replaces its passages without a half-done state: the new passages
are written first (under new ids), then the old ones deleted, so that a failure leaves the
old version searchable. A document whose hash is unchanged is skipped. Writes to one base
are serialized; searches are not, and searches arriving together share one Chroma call
(:mod:`raytroupe.actors.memory.batched_query`).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from raytroupe.actors.memory import passages
from raytroupe.actors.memory.batched_query import BatchedQueries
from raytroupe.actors.memory.documents import Chunk, ChunkingConfig, chunk_document, document_hash
from raytroupe.protocols import Forbidden, InvalidInput, KnowledgeNotFound, QuotaExceeded
from raytroupe.protocols.knowledge import (
    DocumentInfo,
    IngestedDocument,
    IngestReport,
    KnowledgeBaseInfo,
    KnowledgeDocument,
    Passages,
    check_kb_name,
)
from raytroupe.protocols.memory import EVERY_USER

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from raytroupe.actors.memory.embeddings import EmbeddingKind

__all__ = [
    "KNOWLEDGE_PREFIX",
    "MAX_K",
    "KnowledgeBases",
    "collection_name",
    "is_knowledge_collection",
    "owner",
]

KNOWLEDGE_PREFIX: Final = "kb_"
"""Names of knowledge collections start with it (memories' with ``t_``)."""

_PAGE: Final = 5000  # records per Chroma read when listing a base's documents
MAX_K: Final = 50
"""The most passages one search returns."""


def _digest(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def _tenant_prefix(tenant: str) -> str:
    return f"{KNOWLEDGE_PREFIX}{_digest(tenant, 24)}_"


def collection_name(tenant: str, kb: str) -> str:
    """The Chroma collection of ``tenant``'s knowledge base ``kb``."""
    return _tenant_prefix(tenant) + _digest(kb, 16)


def is_knowledge_collection(name: str) -> bool:
    """Whether a Chroma collection holds a knowledge base (not memories)."""
    return name.startswith(KNOWLEDGE_PREFIX)


class KnowledgeBases:
    """Every tenant's knowledge bases in one Chroma client.

    A plain class; the memory actor owns one, as it owns the Chroma path.

    Args:
        client: Chroma (a ``PersistentClient`` or an ``HttpClient``).
        embedding: "minilm" (offline MiniLM, the default) or "hashing" (lexical, fast). A
            base keeps the function it was created with.
        chunking: how documents are cut into passages, and the size limits.
        clock: UNIX time, for ``ingested_at`` and ``created_at``.
        max_bases: the knowledge bases one tenant may hold.
        max_passages: the passages one tenant may hold, in all its bases.
    """

    def __init__(
        self,
        client: ClientAPI,
        *,
        embedding: EmbeddingKind = "minilm",
        chunking: ChunkingConfig | None = None,
        clock: Callable[[], float] = time.time,
        max_bases: int = 32,
        max_passages: int = 50_000,
    ) -> None:
        from raytroupe.actors.memory.embeddings import embedding_function  # noqa: PLC0415 - Chroma

        self._client = client
        self._ef = embedding_function(embedding)
        self._chunking = chunking or ChunkingConfig()
        self._clock = clock
        self._collections: dict[str, Collection] = {}
        self._opening = asyncio.Lock()
        self._writing: dict[str, asyncio.Lock] = {}
        self._tenants: dict[str, asyncio.Lock] = {}  # a tenant's ingests, one at a time
        self._max_bases = max_bases
        self._max_passages = max_passages
        self._queries = BatchedQueries()

    # -- writes -----------------------------------------------------------------------------

    async def ingest(
        self,
        tenant: str,
        kb: str,
        documents: Sequence[KnowledgeDocument],
        user: str | None = None,
    ) -> IngestReport:
        """Add or replace ``documents`` in ``tenant``'s base ``kb`` (made if new).

        ``user``: the end user a new base is for; a base of another user (or the tenant's
        own, for a user's ingest) is refused.

        Every document is parsed before anything is written: one bad document fails the
        call and changes nothing. A document whose content (and type, metadata and chunking
        settings) is unchanged is skipped.

        Raises:
            InvalidInput: a bad base name, a source given twice, or a document that cannot
                be read (``detail['source']``).
            QuotaExceeded: a new base past the tenant's ``max_bases``, or passages past its
                ``max_passages`` (``detail['quota']``): nothing is written.
            Forbidden: the base is another end user's, or the tenant's and ``user`` is set.
        """
        check_kb_name(kb)
        sources = [d.source for d in documents]
        twice = sorted(s for s, n in Counter(sources).items() if n > 1)
        if twice:
            raise InvalidInput(f"sources given more than once: {twice[:5]}", sources=twice[:5])
        if not documents:
            return IngestReport(kb=kb)
        prepared = await asyncio.to_thread(self._prepare, documents)
        tenant_lock = self._tenants.setdefault(tenant, asyncio.Lock())
        async with tenant_lock, self._lock(tenant, kb):
            collection = await self._open(tenant, kb, create=False)
            stored = {}
            if collection is not None:
                if owner(collection) != user:
                    whose = "the tenant's" if owner(collection) is None else "another user's"
                    raise Forbidden(f"knowledge base {kb!r} is {whose}", field="user", kb=kb)
                stored = await asyncio.to_thread(passages.stored, collection, sources)
            await self._check_quota(tenant, kb, new=collection is None, stored=stored,
                                    prepared=prepared, sources=sources)  # fmt: skip
            collection = await self._existing(tenant, kb, create=True, user=user)
            reports = []
            for document, (digest, chunks) in zip(documents, prepared, strict=True):
                hashes, old_ids = stored.get(document.source, (set(), []))
                unchanged = hashes == {digest} and len(old_ids) == len(chunks)
                if not unchanged:
                    await asyncio.to_thread(
                        passages.replace,
                        collection,
                        document,
                        digest,
                        chunks,
                        old_ids,
                        clock=self._clock,
                        embed=self._ef,
                    )
                reports.append(
                    IngestedDocument(
                        source=document.source,
                        chunks=len(chunks),
                        replaced=bool(old_ids) and not unchanged,
                        unchanged=unchanged,
                    )
                )
        return IngestReport(kb=kb, documents=tuple(reports))

    async def delete_document(self, tenant: str, kb: str, source: str) -> int:
        """Remove the document ``source`` from ``kb``; how many passages went (0: none).

        Raises:
            KnowledgeNotFound: no knowledge base ``kb`` (``detail['kb']``).
        """
        async with self._lock(tenant, kb):
            collection = await self._existing(tenant, kb)
            found = await asyncio.to_thread(collection.get, where={"source": source}, include=[])
            ids = list(found["ids"])
            await asyncio.to_thread(passages.delete, collection, ids)
        return len(ids)

    async def drop(self, tenant: str, kb: str) -> bool:
        """Delete ``tenant``'s base ``kb`` and all its passages; False if there was none."""
        import chromadb.errors  # noqa: PLC0415 - Chroma is imported only by the memory actor

        check_kb_name(kb)
        name = collection_name(tenant, kb)
        async with self._lock(tenant, kb):
            self._collections.pop(name, None)
            try:
                await asyncio.to_thread(self._client.delete_collection, name)
            except chromadb.errors.NotFoundError:
                return False
        return True

    # -- reads ------------------------------------------------------------------------------

    async def search(
        self, tenant: str, kb: str, query: str, k: int = 5, viewer: str | None = EVERY_USER
    ) -> Passages:
        """The ``k`` passages of ``kb`` closest to ``query``, best first.

        Run inline, not in a thread (as memory queries): searches that arrive together are
        embedded and searched in one Chroma call. ``viewer``: the end user of the job that
        searches (None: a job of no user); another user's base is not there for it.

        Raises:
            InvalidInput: a blank query, or ``k`` out of 1..50.
            KnowledgeNotFound: no knowledge base ``kb`` (that ``viewer`` may search).
        """
        if not query.strip() or not 1 <= k <= MAX_K:
            raise InvalidInput(f"a search needs a query and k in 1..{MAX_K}", kb=kb, k=k)
        collection = await self._existing(tenant, kb)
        if viewer != EVERY_USER and owner(collection) not in (None, viewer):
            raise KnowledgeNotFound(f"no knowledge base named {kb!r}", kb=kb)
        ids, texts, metadatas, distances = await self._queries.query(collection, query, k)
        found = tuple(
            passages.passage(text or "", dict(meta or {}), float(distance))
            for _, text, meta, distance in zip(ids, texts, metadatas, distances, strict=True)
        )
        return Passages(kb=kb, passages=found)

    async def documents(self, tenant: str, kb: str) -> list[DocumentInfo]:
        """The documents in ``kb``, by source.

        Raises:
            KnowledgeNotFound: no knowledge base ``kb``.
        """
        collection = await self._existing(tenant, kb)
        newest: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            page = await asyncio.to_thread(
                collection.get, include=["metadatas"], limit=_PAGE, offset=offset
            )
            for meta in page["metadatas"] or []:
                seen = newest.get(str(meta["source"]))
                if seen is None or _number(meta["ingested_at"]) > _number(seen["ingested_at"]):
                    newest[str(meta["source"])] = dict(meta)
            if len(page["ids"]) < _PAGE:
                break
            offset += _PAGE
        return [
            DocumentInfo(
                source=source,
                media_type=str(meta["media_type"]),
                chunks=int(_number(meta["chunks"])),
                hash=str(meta["hash"]),
                ingested_at=_number(meta["ingested_at"]),
            )
            for source, meta in sorted(newest.items())
        ]

    async def bases(self, tenant: str, user: str | None = None) -> list[KnowledgeBaseInfo]:
        """``tenant``'s knowledge bases (``user``'s only, if given), by name."""
        infos = [
            KnowledgeBaseInfo(
                name=str(meta["kb"]),
                chunks=chunks,
                created_at=_number(meta.get("created_at", 0.0)),
                user=owner(collection),
            )
            for collection, chunks in await self._held(tenant)
            if (meta := collection.metadata or {}) and user in (None, owner(collection))
        ]
        return sorted(infos, key=lambda info: info.name)

    # -- internals ----------------------------------------------------------------------------

    async def _check_quota(
        self,
        tenant: str,
        kb: str,
        *,
        new: bool,
        stored: dict[str, tuple[set[str], list[str]]],
        prepared: list[tuple[str, list[Chunk]]],
        sources: list[str],
    ) -> None:
        """Refuse an ingest that would take ``tenant`` past its quotas (under its lock)."""
        held = await self._held(tenant)
        if new and len(held) >= self._max_bases:
            raise QuotaExceeded(
                f"the tenant holds {len(held)} knowledge bases, as many as it may: drop one "
                "to make another",
                quota="knowledge_bases",
                limit=self._max_bases,
            )
        replaced = sum(len(stored.get(source, (set(), []))[1]) for source in sources)
        now = sum(chunks for _, chunks in held)
        after = now - replaced + sum(len(chunks) for _, chunks in prepared)
        if after > self._max_passages and after > now:  # what adds nothing is never refused
            raise QuotaExceeded(
                f"this would make {after} passages in the tenant's knowledge bases, past its "
                f"{self._max_passages}: delete documents to make room",
                quota="passages",
                limit=self._max_passages,
                kb=kb,
            )

    async def _held(self, tenant: str) -> list[tuple[Collection, int]]:
        """``tenant``'s knowledge bases' collections, each with its passage count."""
        prefix = _tenant_prefix(tenant)
        listed = await asyncio.to_thread(self._client.list_collections)
        mine = [c for c in listed if c.name.startswith(prefix) and "kb" in (c.metadata or {})]
        counts = await asyncio.gather(*(asyncio.to_thread(c.count) for c in mine))
        return list(zip(mine, counts, strict=True))

    def _prepare(self, documents: Sequence[KnowledgeDocument]) -> list[tuple[str, list[Chunk]]]:
        return [
            (document_hash(d, self._chunking), chunk_document(d, self._chunking)) for d in documents
        ]

    def _lock(self, tenant: str, kb: str) -> asyncio.Lock:
        return self._writing.setdefault(collection_name(tenant, kb), asyncio.Lock())

    async def _existing(
        self, tenant: str, kb: str, *, create: bool = False, user: str | None = None
    ) -> Collection:
        collection = await self._open(tenant, kb, create=create, user=user)
        if collection is None:
            raise KnowledgeNotFound(f"no knowledge base named {kb!r}", kb=kb)
        return collection

    async def _open(
        self, tenant: str, kb: str, *, create: bool, user: str | None = None
    ) -> Collection | None:
        import chromadb.errors  # noqa: PLC0415 - Chroma is imported only by the memory actor

        check_kb_name(kb)
        name = collection_name(tenant, kb)
        if name in self._collections:
            return self._collections[name]
        async with self._opening:  # opened once: two threads opening at once broke Chroma
            if name in self._collections:
                return self._collections[name]
            try:
                self._collections[name] = await asyncio.to_thread(
                    self._client.get_collection, name=name, embedding_function=self._ef
                )
            except chromadb.errors.NotFoundError:
                if not create:
                    return None
                metadata = {"hnsw:space": "cosine", "kb": kb, "created_at": self._clock()}
                if user is not None:
                    metadata["user"] = user
                self._collections[name] = await asyncio.to_thread(
                    self._client.get_or_create_collection,
                    name=name,
                    embedding_function=self._ef,
                    metadata=metadata,
                )
        return self._collections[name]


def owner(collection: Collection) -> str | None:
    """The end user a base is for (None: the tenant's own)."""
    user = (collection.metadata or {}).get("user")
    return None if user is None else str(user)


def _number(value: object) -> float:
    """A number Chroma kept in metadata (typed there as any metadata value)."""
    return float(value) if isinstance(value, int | float | str) else 0.0
