"""``/v1/knowledge``: a tenant's knowledge bases, their documents, and searching them.

Every route is the caller's tenant's, admins included: another tenant's knowledge base is
not there for it (an empty one, or 404). Documents come as JSON (text in ``content``, PDFs
and uploads as base64 in ``data_b64``); ingesting a source again replaces it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from raytroupe.deployments.access import Caller
from raytroupe.deployments.documents import body_of, document
from raytroupe.protocols import KnowledgeNotFound
from raytroupe.protocols.http import DocumentsBody, SearchBody
from raytroupe.protocols.knowledge import (
    KB_NAME_PATTERN,
    DocumentInfo,
    IngestReport,
    KnowledgeBaseInfo,
    Passages,
)
from raytroupe.runtime.client import SystemClient

__all__ = ["knowledge_routes"]

KnowledgeBase = Annotated[str, Path(pattern=KB_NAME_PATTERN, description="Its name.")]


def knowledge_routes(client: SystemClient) -> APIRouter:
    """The ``/v1/knowledge`` routes."""
    routes = APIRouter(prefix="/v1/knowledge", tags=["knowledge"])

    @routes.get("", response_model=list[KnowledgeBaseInfo])
    async def list_knowledge_bases(who: Caller) -> list[KnowledgeBaseInfo]:
        """The tenant's knowledge bases."""
        return await client.knowledge_bases(who.tenant)

    @routes.post(
        "/{kb}/documents", response_model=IngestReport, openapi_extra=body_of(DocumentsBody)
    )
    async def ingest_documents(
        kb: KnowledgeBase, who: Caller, body: Annotated[DocumentsBody, document(DocumentsBody)]
    ) -> IngestReport:
        """Chunk, embed and store documents (the knowledge base is made if new).

        A document whose source is stored already replaces it; an unchanged one is skipped.
        A document that does not parse is refused with its source named, and nothing of the
        request is stored.
        """
        return await client.ingest(who.tenant, kb, body.documents)

    @routes.get("/{kb}/documents", response_model=list[DocumentInfo])
    async def list_documents(kb: KnowledgeBase, who: Caller) -> list[DocumentInfo]:
        """The knowledge base's documents."""
        return await client.knowledge_documents(who.tenant, kb)

    @routes.delete("/{kb}/documents", status_code=204)
    async def delete_document(
        kb: KnowledgeBase,
        who: Caller,
        source: Annotated[str, Query(min_length=1, max_length=1000)],
    ) -> Response:
        """Remove a document (``?source=``) and its passages; 404 if there is none."""
        if not await client.knowledge_delete(who.tenant, kb, source):
            raise KnowledgeNotFound(f"knowledge base {kb!r} has no document {source!r}", kb=kb)
        return Response(status_code=204)

    @routes.post("/{kb}/search", response_model=Passages)
    async def search_knowledge_base(kb: KnowledgeBase, body: SearchBody, who: Caller) -> Passages:
        """The passages closest to the query, best first, each with its source and place."""
        return await client.knowledge_search(who.tenant, kb, body.query, body.k)

    @routes.delete("/{kb}", status_code=204)
    async def delete_knowledge_base(kb: KnowledgeBase, who: Caller) -> Response:
        """Remove the knowledge base and all its documents; 404 if there is none."""
        if not await client.knowledge_drop(who.tenant, kb):
            raise KnowledgeNotFound(f"there is no knowledge base {kb!r}", kb=kb)
        return Response(status_code=204)

    return routes
