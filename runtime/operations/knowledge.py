"""Knowledge bases: list them, ingest documents, list and delete documents, search, drop.

Every operation is the caller's tenant's, admins included: another tenant's knowledge base is
not there for it (an empty one, or ``KnowledgeNotFound``). Documents come as
:class:`~raytroupe.protocols.knowledge.KnowledgeDocument` (text in ``content``, PDFs and
uploads as base64 in ``data_b64``); ingesting a source again replaces it.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from raytroupe.protocols import KnowledgeNotFound
from raytroupe.protocols.http import MAX_DOCUMENTS
from raytroupe.protocols.job_context import EndUser
from raytroupe.protocols.knowledge import (
    DocumentInfo,
    IngestReport,
    KnowledgeBaseInfo,
    KnowledgeBaseName,
    KnowledgeDocument,
    KnowledgeSource,
    Passages,
)
from raytroupe.runtime.operations.declare import At, operation

__all__ = [
    "delete_document",
    "documents",
    "drop_knowledge_base",
    "ingest",
    "knowledge_bases",
    "search",
]

TAG: Final = "knowledge"

Documents = Annotated[list[KnowledgeDocument], Field(min_length=1, max_length=MAX_DOCUMENTS)]
Query = Annotated[str, Field(min_length=1, max_length=20_000)]
HowMany = Annotated[int, Field(ge=1, le=50)]


@operation("GET", "/v1/knowledge", cli="kb list")
async def knowledge_bases(at: At, user: EndUser | None = None) -> list[KnowledgeBaseInfo]:
    """The tenant's knowledge bases (``user``: that end user's only)."""
    return await at.system.memory.knowledge_bases(at.tenant, user)


@operation("POST", "/v1/knowledge/{kb}/documents", cli="kb add")
async def ingest(
    at: At, kb: KnowledgeBaseName, documents: Documents, *, user: EndUser | None = None
) -> IngestReport:
    """Chunk, embed and store documents in knowledge base ``kb`` (made if new).

    A document whose source is stored already replaces it; an unchanged one is skipped.
    ``user``: the tenant's end user a new base is for: only that user's jobs search it (a
    job of another user, or of none, finds no such base); the tenant's own calls reach it.

    Raises:
        InvalidInput: a document that does not parse, named by its source (nothing of the
            request is stored).
        Forbidden: the base is another end user's, or the tenant's own and ``user`` is set.
    """
    return await at.system.memory.ingest(at.tenant, kb, documents, user)


@operation("GET", "/v1/knowledge/{kb}/documents", cli="kb list")
async def documents(at: At, kb: KnowledgeBaseName) -> list[DocumentInfo]:
    """The documents of knowledge base ``kb``."""
    return await at.system.memory.knowledge_documents(at.tenant, kb)


@operation("DELETE", "/v1/knowledge/{kb}/documents", cli="kb rm")
async def delete_document(at: At, kb: KnowledgeBaseName, source: KnowledgeSource) -> int:
    """Remove the document of ``source`` and its passages; how many passages went.

    Raises:
        KnowledgeNotFound: ``kb`` has no such document.
    """
    removed = await at.system.memory.knowledge_delete(at.tenant, kb, source)
    if not removed:
        raise KnowledgeNotFound(f"knowledge base {kb!r} has no document {source!r}", kb=kb)
    return removed


@operation("POST", "/v1/knowledge/{kb}/search", cli="kb search")
async def search(at: At, kb: KnowledgeBaseName, query: Query, *, k: HowMany = 5) -> Passages:
    """The ``k`` passages of ``kb`` closest to ``query``, best first, with source and place."""
    return await at.system.memory.knowledge_search(at.tenant, kb, query, k)


@operation("DELETE", "/v1/knowledge/{kb}", cli="kb rm")
async def drop_knowledge_base(at: At, kb: KnowledgeBaseName) -> KnowledgeBaseInfo:
    """Remove knowledge base ``kb`` and all its documents; what it was.

    Raises:
        KnowledgeNotFound: the tenant has no such knowledge base.
    """
    was = next((b for b in await at.system.memory.knowledge_bases(at.tenant) if b.name == kb), None)
    if was is None or not await at.system.memory.knowledge_drop(at.tenant, kb):
        raise KnowledgeNotFound(f"there is no knowledge base {kb!r}", kb=kb)
    return was
