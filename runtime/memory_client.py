"""The memory store's calls: long-term memories, knowledge bases, and skills' lessons.

Every call is one tenant's: another tenant's memories and knowledge bases are not there for it.
:attr:`raytroupe.runtime.client.SystemClient.memory` is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raytroupe.protocols import MemoryHit, MemoryHits, MemoryQuery, MemoryWrite
from raytroupe.protocols.knowledge import (
    DocumentInfo,
    IngestReport,
    KnowledgeBaseInfo,
    KnowledgeDocument,
    Passages,
)
from raytroupe.protocols.memory import EVERY_USER
from raytroupe.runtime.ray_calls import call

__all__ = ["MemoryClient"]


class MemoryClient:
    """Typed calls to the memory store actor."""

    def __init__(self, memory: Any) -> None:
        self._memory = memory

    async def remember(self, tenant: str, memory: MemoryWrite, user: str | None = None) -> str:
        """Store a long-term memory of ``tenant`` (private to its end ``user``); its id."""
        result: str = await call(self._memory.write.remote(tenant, memory, user))
        return result

    async def recall(
        self, tenant: str, query: MemoryQuery, user: str | None = None
    ) -> list[MemoryHit]:
        """``tenant``'s memories most relevant to ``query``, best first.

        ``user``: as a job of that end user sees them (theirs and the tenant's); None: all.
        """
        viewer = EVERY_USER if user is None else user
        hits: MemoryHits = await call(self._memory.query.remote(tenant, query, viewer))
        return list(hits.hits)

    async def ingest(
        self,
        tenant: str,
        kb: str,
        documents: Sequence[KnowledgeDocument],
        user: str | None = None,
    ) -> IngestReport:
        """Add documents to ``tenant``'s knowledge base ``kb`` (made if new, ``user``'s if given).

        Each replaces the document of its source, if any (and is skipped if unchanged).
        """
        ref = self._memory.ingest.remote(tenant, kb, list(documents), user)
        report: IngestReport = await call(ref)
        return report

    async def knowledge_search(self, tenant: str, kb: str, query: str, k: int = 5) -> Passages:
        """The passages of ``tenant``'s knowledge base ``kb`` closest to ``query``."""
        found: Passages = await call(self._memory.knowledge_search.remote(tenant, kb, query, k))
        return found

    async def knowledge_documents(self, tenant: str, kb: str) -> list[DocumentInfo]:
        """The documents of ``tenant``'s knowledge base ``kb``."""
        found: list[DocumentInfo] = await call(self._memory.knowledge_documents.remote(tenant, kb))
        return found

    async def knowledge_delete(self, tenant: str, kb: str, source: str) -> int:
        """Remove a document (its passages) from ``tenant``'s knowledge base; how many went."""
        removed: int = await call(self._memory.knowledge_delete.remote(tenant, kb, source))
        return removed

    async def knowledge_drop(self, tenant: str, kb: str) -> bool:
        """Remove ``tenant``'s knowledge base ``kb`` and everything in it; whether it was."""
        dropped: bool = await call(self._memory.knowledge_drop.remote(tenant, kb))
        return dropped

    async def knowledge_bases(
        self, tenant: str, user: str | None = None
    ) -> list[KnowledgeBaseInfo]:
        """``tenant``'s knowledge bases (``user``'s only, if given)."""
        ref = self._memory.knowledge_bases.remote(tenant, user)
        found: list[KnowledgeBaseInfo] = await call(ref)
        return found

    async def lessons(self, skill: str, *, tenant: str) -> list[MemoryHit]:
        """The lessons reflection wrote for ``skill`` in ``tenant``'s memory, newest first."""
        from raytroupe.protocols.skill import lesson_tags  # noqa: PLC0415 - skills only

        ref = self._memory.listed.remote(tenant, tags=lesson_tags(skill), limit=1000)
        result: list[MemoryHit] = await call(ref)
        return result

    async def delete_lesson(self, skill: str, lesson_id: str, *, tenant: str) -> MemoryHit | None:
        """Delete one of ``skill``'s lessons in ``tenant``'s memory; what it was (None: none)."""
        from raytroupe.protocols.skill import lesson_tags  # noqa: PLC0415 - skills only

        tags = lesson_tags(skill)
        found: list[MemoryHit] = await call(
            self._memory.listed.remote(tenant, tags=tags, ids=[lesson_id], limit=1)
        )
        deleted: int = await call(self._memory.delete.remote(tenant, ids=[lesson_id], tags=tags))
        return found[0] if found and deleted > 0 else None
