"""The memory store actor: long-term memories, jobs' scratchpads and knowledge bases, in Chroma.

The actor is the single owner of its Chroma path (two processes writing one
``PersistentClient`` path silently lose vectors); clusters point it at a Chroma server
instead (``MemoryConfig.server``). Every tenant has its own collection, and every query and
deletion names its tenant, so one tenant never sees another's memories. How a memory is
kept, ranked and forgotten is :mod:`raytroupe.actors.memory.records`; the actor forgets
periodically and on demand.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, assert_never

import structlog

from raytroupe.actors.endpoint import TakesBatches, serve_envelope
from raytroupe.actors.memory import records
from raytroupe.actors.memory.batched_query import BatchedQueries
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.knowledge import KnowledgeBases, is_knowledge_collection
from raytroupe.actors.memory.notes import NOTES_PREFIX, Scratchpads
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import (
    Ack,
    AgentMessage,
    InvalidInput,
    JobEnded,
    MemoryHit,
    MemoryHits,
    MemoryQuery,
    MemoryWrite,
    Note,
    Notes,
    NotesQuery,
    NoteWrite,
    TroupeError,
)
from raytroupe.protocols.knowledge import (
    DocumentInfo,
    IngestReport,
    KnowledgeBaseInfo,
    KnowledgeDocument,
    KnowledgeQuery,
    Passage,
    Passages,
)
from raytroupe.protocols.memory import EVERY_USER

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = ["MemoryConfig", "MemoryStore"]

log = structlog.get_logger("raytroupe.memory")


def _collection_name(tenant: str) -> str:
    return "t_" + hashlib.sha256(tenant.encode()).hexdigest()[:24]


class MemoryStore(TakesBatches):
    """Memories. A plain class; Ray makes it the ``memory`` actor.

    Args:
        clock: UNIX time, injectable for tests of recency and forgetting.
    """

    def __init__(
        self,
        config: MemoryConfig | None = None,
        *,
        clock: Any = time.time,
    ) -> None:
        self._config = config or MemoryConfig()
        self._clock = clock
        self._collections: dict[str, Collection] = {}
        self._scratchpads = Scratchpads(self._collection_by_name, clock)
        self._forgetter: asyncio.Task[None] | None = None
        # each collection is made once: two first requests racing to make them in threads
        # broke Chroma's client ("RustBindingsAPI has no attribute bindings")
        self._opening = asyncio.Lock()
        self._searches = BatchedQueries()

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        config = self._config
        where = f"server {config.server}" if config.server else f"at {config.path}"
        return f"MemoryStore(Chroma {where}, embedding {config.embedding})"

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open Chroma (the directory, or the server) and start forgetting periodically."""
        self._client: ClientAPI = await self._open_chroma()
        config = self._config
        self._knowledge = KnowledgeBases(
            self._client,
            embedding=config.embedding,
            clock=self._clock,
            max_bases=config.knowledge_bases_per_tenant,
            max_passages=config.passages_per_tenant,
        )
        self._forgetter = asyncio.get_running_loop().create_task(self._forget_periodically())

    async def on_stop(self) -> None:
        """Stop forgetting periodically."""
        await self.close()

    # -- long-term ------------------------------------------------------------------------

    async def write(self, tenant: str, memory: MemoryWrite, user: str | None = None) -> str:
        """Store ``memory`` for ``tenant`` (private to its end ``user``, if given); its id."""
        (memory_id,) = await self.write_many(tenant, [memory], user)
        return memory_id

    async def write_many(
        self, tenant: str, memories: Sequence[MemoryWrite], user: str | None = None
    ) -> list[str]:
        """Store several memories for ``tenant`` in one batch; return their ids in order.

        ``user``: the tenant's end user they are private to (a job of that user wrote them).
        """
        now = self._clock()
        ids = [uuid.uuid4().hex for _ in memories]
        metadatas = [records.metadata(tenant, memory, now, user) for memory in memories]
        if memories:
            collection = await self._collection(tenant)
            await asyncio.to_thread(
                collection.add,
                ids=ids,
                documents=[m.text for m in memories],
                metadatas=metadatas,  # type: ignore[arg-type]
            )
        metrics.memory_op("write", len(ids))
        return ids

    async def query(
        self, tenant: str, query: MemoryQuery, viewer: str | None = EVERY_USER
    ) -> MemoryHits:
        """The ``k`` best memories of ``tenant`` for ``query``, best first.

        ``viewer``: whose memories a job may see (see :func:`records.where`): its end user's
        and the tenant's, or (a job of no user) the tenant's only; by default every one.
        """
        collection = await self._collection(tenant)
        where = records.where(query.agent, query.tags, viewer)
        now = self._clock()
        # room to re-rank by recency and importance
        found = await self._searches.query(collection, query.query, max(query.k * 2, 10), where)
        ranked = records.ranked(found, now, config=self._config)
        best = tuple(h for h in ranked if h.score >= query.min_score)[: query.k]
        metrics.memory_op("query", len(best))
        return MemoryHits(hits=best)

    async def delete(
        self,
        tenant: str,
        *,
        ids: Sequence[str] | None = None,
        agent: str | None = None,
        tags: Sequence[str] = (),
    ) -> int:
        """Delete memories of ``tenant`` by id, or by agent and/or tags; return how many."""
        if ids is None and agent is None and not tags:
            raise InvalidInput("delete needs ids, an agent or tags (to delete all, drop_tenant)")
        collection = await self._collection(tenant)
        where = records.where(agent, tuple(tags))
        found = await asyncio.to_thread(
            collection.get, ids=list(ids) if ids is not None else None, where=where, include=[]
        )
        doomed = list(found["ids"])
        if doomed:
            await asyncio.to_thread(collection.delete, ids=doomed)
        metrics.memory_op("delete", len(doomed))
        return len(doomed)

    async def listed(
        self,
        tenant: str,
        *,
        tags: Sequence[str] = (),
        ids: Sequence[str] | None = None,
        limit: int = 100,
    ) -> list[MemoryHit]:
        """``tenant``'s memories with all ``tags`` (of ``ids``, if given), newest first.

        At most ``limit`` of them.
        """
        collection = await self._collection(tenant)
        found = await asyncio.to_thread(
            collection.get,
            ids=list(ids) if ids is not None else None,
            where=records.where(None, tuple(tags)),
            limit=max(1, min(limit, 1000)),
            include=["documents", "metadatas"],
        )
        now = self._clock()
        hits = [
            records.hit(memory_id, text or "", dict(meta), 1.0, now, config=self._config)
            for memory_id, text, meta in zip(
                found["ids"], found["documents"] or [], found["metadatas"] or [], strict=True
            )
        ]
        return sorted(hits, key=lambda h: h.created_at, reverse=True)

    async def count(self, tenant: str) -> int:
        """How many memories ``tenant`` has."""
        return int(await asyncio.to_thread((await self._collection(tenant)).count))

    async def forget(self) -> int:
        """Remove expired memories and those whose importance decayed below the floor."""
        now, removed = self._clock(), 0
        client = self._client
        for listed in await asyncio.to_thread(client.list_collections):
            if is_knowledge_collection(listed.name):
                continue  # knowledge bases are never forgotten
            collection = await self._collection_by_name(listed.name)
            found = await asyncio.to_thread(collection.get, include=["metadatas"])
            doomed = [
                memory_id
                for memory_id, meta in zip(found["ids"], found["metadatas"] or [], strict=True)
                if records.forgettable(self._config, dict(meta), now)
            ]
            if doomed:
                await asyncio.to_thread(collection.delete, ids=doomed)
                removed += len(doomed)
                if listed.name.startswith(NOTES_PREFIX):
                    self._scratchpads.recount()
        if removed:
            log.info("forgot", memories=removed)
        metrics.memory_op("forget", removed)
        return removed

    # -- working memory: a job's scratchpad -------------------------------------------------

    async def note(self, tenant: str, job_id: str, text: str, *, agent: str = "") -> Note:
        """Add a note to the job's scratchpad (see :mod:`raytroupe.actors.memory.notes`).

        Raises:
            InvalidInput: the scratchpad is full.
        """
        return await self._scratchpads.note(tenant, job_id, agent, text)

    async def notes(self, tenant: str, job_id: str) -> list[Note]:
        """The job's scratchpad, oldest first."""
        return await self._scratchpads.notes(tenant, job_id)

    async def end_job(
        self, tenant: str, job_id: str, *, keep: bool = False, user: str | None = None
    ) -> int:
        """The job ended: drop its notes, or keep them as memories tagged ``note``; how many.

        Kept notes are private to the job's end ``user``, if it has one.
        """
        notes = await self._scratchpads.end(tenant, job_id)
        if keep and notes:
            await self.write_many(
                tenant,
                [
                    MemoryWrite(
                        text=n.text,
                        agent=n.agent or None,
                        tags=("note",),
                        metadata={"job_id": job_id},
                    )
                    for n in notes
                ],
                user,
            )
        return len(notes)

    async def _recalled(self, message: AgentMessage, query: MemoryQuery) -> MemoryHits:
        """What an agent is shown: memories, and (if asked) its job's notes and passages.

        Its job's end user's memories and the tenant's; never another end user's.
        """
        hits = await self.query(message.tenant, query, message.user)
        notes: list[Note] = []
        if query.job_notes and message.job_id is not None:
            notes = await self.notes(message.tenant, message.job_id)
        passages: list[Passage] = []
        for kb in query.knowledge:
            try:
                found = await self._knowledge.search(
                    message.tenant, kb, query.query, query.knowledge_k, message.user
                )
            except TroupeError as exc:  # a base not made yet: the others are still shown
                log.warning("knowledge_not_recalled", kb=kb, code=exc.code.value)
                continue
            passages.extend(found.passages)
        passages.sort(key=lambda p: p.score, reverse=True)
        update = {"notes": tuple(notes), "passages": tuple(passages[: query.knowledge_k])}
        return hits.model_copy(update=update)

    # -- knowledge bases ----------------------------------------------------------------------

    async def ingest(
        self,
        tenant: str,
        kb: str,
        documents: Sequence[KnowledgeDocument],
        user: str | None = None,
    ) -> IngestReport:
        """Add or replace documents in ``tenant``'s knowledge base ``kb``, made if new.

        ``user``: the end user a new base is for (only their jobs search it).

        Raises:
            InvalidInput: a bad name, or a document that cannot be read (nothing is written).
            Forbidden: the base is another end user's (or the tenant's, for a user).
        """
        return await self._knowledge.ingest(tenant, kb, documents, user)

    async def knowledge_search(
        self, tenant: str, kb: str, query: str, k: int = 5, viewer: str | None = EVERY_USER
    ) -> Passages:
        """The ``k`` passages of ``tenant``'s base ``kb`` closest to ``query``, best first.

        ``viewer``: the end user of the job that searches (another user's base is not there).
        """
        return await self._knowledge.search(tenant, kb, query, k, viewer)

    async def knowledge_documents(self, tenant: str, kb: str) -> list[DocumentInfo]:
        """The documents in ``tenant``'s base ``kb``."""
        return await self._knowledge.documents(tenant, kb)

    async def knowledge_delete(self, tenant: str, kb: str, source: str) -> int:
        """Remove a document from ``tenant``'s base ``kb``; how many passages went."""
        return await self._knowledge.delete_document(tenant, kb, source)

    async def knowledge_drop(self, tenant: str, kb: str) -> bool:
        """Delete ``tenant``'s base ``kb``; False if there was none."""
        return await self._knowledge.drop(tenant, kb)

    async def knowledge_bases(
        self, tenant: str, user: str | None = None
    ) -> list[KnowledgeBaseInfo]:
        """``tenant``'s knowledge bases (``user``'s only, if given)."""
        return await self._knowledge.bases(tenant, user)

    # -- envelopes --------------------------------------------------------------------------

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point (called by the router)."""
        return await serve_envelope(
            data,
            self._handle,
            me="memory",
            accepts=(MemoryQuery, MemoryWrite, JobEnded, NoteWrite, NotesQuery, KnowledgeQuery),
        )

    async def _handle(
        self,
        message: AgentMessage,
        payload: MemoryQuery | MemoryWrite | JobEnded | NoteWrite | NotesQuery | KnowledgeQuery,
    ) -> AgentMessage:
        match payload:
            case MemoryQuery() as query:
                return message.reply(await self._recalled(message, query), sender="memory")
            case MemoryWrite() as memory:
                memory_id = await self.write(message.tenant, memory, message.user)
                hit = MemoryHit(id=memory_id, text=memory.text, score=1.0, similarity=1.0,
                                importance=memory.importance, created_at=self._clock(),
                                agent=memory.agent, tags=memory.tags,
                                user=message.user)  # fmt: skip
                return message.reply(MemoryHits(hits=(hit,)), sender="memory")
            case JobEnded() as ended:
                if message.job_id is not None:
                    await self.end_job(message.tenant, message.job_id, keep=ended.keep_notes,
                                       user=message.user)  # fmt: skip
                return message.reply(Ack(), sender="memory")
            case NoteWrite() | NotesQuery():
                if message.job_id is None:
                    raise InvalidInput("a scratchpad is a job's: the envelope names no job")
                if isinstance(payload, NoteWrite):
                    await self.note(message.tenant, message.job_id, payload.text,
                                    agent=payload.agent)  # fmt: skip
                notes = await self.notes(message.tenant, message.job_id)
                limit = payload.limit if isinstance(payload, NotesQuery) else len(notes)
                return message.reply(Notes(notes=tuple(notes[-limit:])), sender="memory")
            case KnowledgeQuery() as search:
                passages = await self.knowledge_search(message.tenant, search.kb, search.query,
                                                       search.k, message.user)  # fmt: skip
                return message.reply(passages, sender="memory")
            case _:
                assert_never(payload)

    # -- internals ------------------------------------------------------------------------

    async def _open_chroma(self) -> ClientAPI:
        import chromadb  # noqa: PLC0415 - Chroma is imported only by the memory actor

        settings = chromadb.config.Settings(anonymized_telemetry=False, allow_reset=False)
        if self._config.server:
            host, _, port = self._config.server.rpartition(":")
            return chromadb.HttpClient(host=host, port=int(port), settings=settings)
        self._config.path.mkdir(parents=True, exist_ok=True)
        return await asyncio.to_thread(
            chromadb.PersistentClient, path=str(self._config.path), settings=settings
        )

    async def _collection(self, tenant: str) -> Collection:
        return await self._collection_by_name(_collection_name(tenant))

    async def _collection_by_name(self, name: str) -> Collection:
        if name not in self._collections:
            from raytroupe.actors.memory.embeddings import embedding_function  # noqa: PLC0415

            client = self._client
            async with self._opening:
                if name not in self._collections:
                    self._collections[name] = await asyncio.to_thread(
                        client.get_or_create_collection,
                        name=name,
                        embedding_function=embedding_function(self._config.embedding),
                        metadata={"hnsw:space": "cosine"},
                    )
        return self._collections[name]

    async def _forget_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._config.forget_interval_s)
            with contextlib.suppress(Exception):  # one bad round must not end the schedule
                await self.forget()

    async def close(self) -> None:
        """Stop the periodic forgetting."""
        if self._forgetter is not None:
            self._forgetter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._forgetter
