"""Knowledge bases: documents a tenant ingests, the passages a search finds in them.

A knowledge base belongs to one tenant and has a name of ``KB_NAME_PATTERN`` (lowercase, safe
in URLs and paths). A document is named by its ``source`` (a path or title the tenant chooses);
ingesting the same source again replaces its passages, unless its content is unchanged.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from raytroupe.protocols.errors import InvalidInput

__all__ = [
    "KB_NAME_PATTERN",
    "MAX_DOCUMENT_BYTES",
    "DocumentInfo",
    "IngestReport",
    "IngestedDocument",
    "KnowledgeBaseInfo",
    "KnowledgeBaseName",
    "KnowledgeDocument",
    "KnowledgeQuery",
    "KnowledgeSource",
    "MediaType",
    "Passage",
    "Passages",
    "check_kb_name",
]

KB_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,62}$"
"""Names of knowledge bases: 1-63 lowercase letters, digits, ``_`` and ``-``."""
_KB_NAME: Final = re.compile(KB_NAME_PATTERN)

MAX_DOCUMENT_BYTES: Final = 8 * 1024 * 1024
"""The largest document accepted (its bytes: UTF-8 text, or the decoded PDF)."""
_MAX_B64_CHARS: Final = (MAX_DOCUMENT_BYTES + 2) // 3 * 4
_MAX_SOURCE_CHARS: Final = 512
_MAX_METADATA_KEYS: Final = 16
_MAX_METADATA_CHARS: Final = 1000
_METADATA_KEY: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

KnowledgeBaseName = Annotated[str, StringConstraints(pattern=KB_NAME_PATTERN)]
"""A knowledge base's name (see ``KB_NAME_PATTERN``)."""

KnowledgeSource = Annotated[
    str, StringConstraints(min_length=1, max_length=_MAX_SOURCE_CHARS, strip_whitespace=False)
]
"""A document's name within its knowledge base: a path, a URL or a title."""

MediaType = Literal[
    "text/plain", "text/markdown", "text/html", "application/pdf", "application/json"
]
"""The formats a knowledge base reads."""

MetadataValue = str | int | float | bool


def check_kb_name(kb: str) -> str:
    """``kb`` if it is a valid knowledge base name.

    Raises:
        InvalidInput: it is not (``detail['kb']``).
    """
    if not isinstance(kb, str) or not _KB_NAME.match(kb):
        raise InvalidInput(
            f"{kb!r} is not a knowledge base name (1-63 of a-z, 0-9, '_' and '-', starting "
            "with a letter or digit)",
            kb=str(kb)[:100],
        )
    return kb


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class KnowledgeDocument(_Frozen):
    """One document to ingest: text in ``content``, or bytes (a PDF) in ``data_b64``.

    Text formats may also come as base64 of their UTF-8 bytes (a file upload). Whether the
    content parses (valid JSON, a readable PDF, no binary in text) is checked at ingestion.
    """

    source: KnowledgeSource = Field(
        description="The document's name within the knowledge base (a path, URL or title); "
        "ingesting the same source again replaces the document."
    )
    media_type: MediaType = Field(description="The document's format.")
    content: str | None = Field(
        default=None, max_length=MAX_DOCUMENT_BYTES, description="The text (text formats)."
    )
    data_b64: str | None = Field(
        default=None, max_length=_MAX_B64_CHARS, description="The bytes, base64-encoded."
    )
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict,
        description="Up to 16 values kept with every passage of the document.",
    )

    @field_validator("source")
    @classmethod
    def _printable(cls, source: str) -> str:
        if _CONTROL.search(source):
            raise ValueError("a source may not contain control characters")
        if not source.strip():
            raise ValueError("a source may not be blank")
        return source

    @field_validator("metadata")
    @classmethod
    def _small(cls, metadata: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
        if len(metadata) > _MAX_METADATA_KEYS:
            raise ValueError(f"at most {_MAX_METADATA_KEYS} metadata values")
        for key, value in metadata.items():
            if not _METADATA_KEY.match(key):
                raise ValueError(f"metadata key {key!r} must match {_METADATA_KEY.pattern}")
            if isinstance(value, str) and len(value) > _MAX_METADATA_CHARS:
                raise ValueError(
                    f"metadata value of {key!r} is longer than {_MAX_METADATA_CHARS} characters"
                )
        return metadata

    @model_validator(mode="after")
    def _one_body(self) -> KnowledgeDocument:
        if (self.content is None) == (self.data_b64 is None):
            raise ValueError("a document needs exactly one of content or data_b64")
        if self.media_type == "application/pdf" and self.data_b64 is None:
            raise ValueError("a PDF must come as data_b64")
        if self.data_b64 is not None:
            try:
                base64.b64decode(self.data_b64, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"data_b64 of {self.source!r} is not base64: {exc}") from None
        return self

    def raw(self) -> bytes:
        """The document's bytes (UTF-8 of ``content``, or the decoded ``data_b64``)."""
        if self.data_b64 is not None:
            return base64.b64decode(self.data_b64)
        return (self.content or "").encode("utf-8")


class IngestedDocument(_Frozen):
    """What ingestion did with one document."""

    source: str
    chunks: int = Field(ge=0, description="Passages the document has now.")
    replaced: bool = Field(description="An earlier version's passages were replaced.")
    unchanged: bool = Field(description="Same content as stored: nothing was written.")


class IngestReport(_Frozen):
    """The answer to an ingestion: one entry per document, in the order given."""

    kind: Literal["ingest_report"] = "ingest_report"
    kb: KnowledgeBaseName
    documents: tuple[IngestedDocument, ...] = ()

    @property
    def chunks(self) -> int:
        """Passages the ingested documents have now."""
        return sum(d.chunks for d in self.documents)


class KnowledgeQuery(_Frozen):
    """Search the envelope tenant's knowledge base ``kb`` for passages about ``query``."""

    kind: Literal["knowledge_query"] = "knowledge_query"
    kb: KnowledgeBaseName = Field(description="The knowledge base to search.")
    query: str = Field(min_length=1, max_length=20_000, description="What to look for.")
    k: int = Field(default=5, ge=1, le=50, description="How many passages to return.")


class Passage(_Frozen):
    """A piece of a document, where it comes from, and how well it matched."""

    text: str
    source: str = Field(description="The document it comes from.")
    position: int = Field(ge=0, description="Its index among the document's passages.")
    section: str = Field(
        default="", description="Heading path, JSON path or 'page N' (empty: none)."
    )
    score: float = Field(description="1 - cosine distance to the query (higher is closer).")
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict, description="The document's metadata."
    )

    def citation(self) -> str:
        """How an answer cites it: ``source#position`` and the section, if any."""
        where = f"{self.source}#{self.position}"
        return f"{where} ({self.section})" if self.section else where


class Passages(_Frozen):
    """The answer to a ``KnowledgeQuery``: the best passages first."""

    kind: Literal["passages"] = "passages"
    kb: KnowledgeBaseName
    passages: tuple[Passage, ...] = ()


class DocumentInfo(_Frozen):
    """A document stored in a knowledge base."""

    source: str
    media_type: str
    chunks: int = Field(ge=0, description="Its passages.")
    hash: str = Field(description="SHA-256 of what was ingested (content, type, metadata).")
    ingested_at: float = Field(description="UNIX time of its last ingestion.")


class KnowledgeBaseInfo(_Frozen):
    """One of a tenant's knowledge bases."""

    name: KnowledgeBaseName
    chunks: int = Field(ge=0, description="Passages in it, over all its documents.")
    created_at: float = Field(description="UNIX time it was created.")
    user: str | None = Field(
        default=None,
        description="The end user it is for: only their jobs search it (None: the tenant's).",
    )
