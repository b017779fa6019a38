"""Memory traffic: write a memory, query memories, the hits that come back."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.knowledge import Passage

__all__ = [
    "EVERY_USER",
    "MAX_NOTES",
    "EpisodePolicy",
    "MemoryHit",
    "MemoryHits",
    "MemoryPolicy",
    "MemoryQuery",
    "MemoryWrite",
    "Note",
    "NoteWrite",
    "Notes",
    "NotesQuery",
]

MAX_NOTES = 200
"""Notes one job's scratchpad holds, at most."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


EVERY_USER: Final = "*"
"""Whose memories a query sees: every end user's (the tenant itself, through the driver)."""


class MemoryWrite(_Frozen):
    """Store one long-term memory for the envelope's tenant."""

    kind: Literal["memory_write"] = "memory_write"
    text: str = Field(min_length=1, max_length=20_000)
    importance: float = Field(default=0.5, ge=0.0, le=1.0, description="0 trivial .. 1 vital.")
    tags: tuple[str, ...] = Field(default=(), description="For filtering.")
    agent: str | None = Field(default=None, description="Whose memory (None: the team's).")
    ttl_s: float | None = Field(default=None, gt=0.0, description="Forget after this long.")
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)


class MemoryQuery(_Frozen):
    """Find the memories of the envelope's tenant most relevant to ``query``."""

    kind: Literal["memory_query"] = "memory_query"
    query: str = Field(min_length=1, max_length=20_000)
    k: int = Field(default=5, ge=1, le=100)
    agent: str | None = Field(default=None, description="Only this agent's memories.")
    tags: tuple[str, ...] = Field(default=(), description="Only memories with all these tags.")
    min_score: float = Field(default=0.0, ge=0.0, le=1.0)
    job_notes: bool = Field(
        default=False, description="Also answer the envelope's job's scratchpad (its notes)."
    )
    knowledge: tuple[str, ...] = Field(
        default=(), max_length=8, description="Also answer passages of these knowledge bases."
    )
    knowledge_k: int = Field(default=4, ge=1, le=20, description="Passages, at most.")


class MemoryHit(_Frozen):
    """One recalled memory and why it ranked where it did."""

    id: str
    text: str
    score: float = Field(description="Similarity weighted by recency and importance.")
    similarity: float
    importance: float
    created_at: float
    agent: str | None = None
    tags: tuple[str, ...] = ()
    user: str | None = Field(
        default=None, description="The end user it is private to (None: the tenant's)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryHits(_Frozen):
    """The answer to a ``MemoryQuery``, best first."""

    kind: Literal["memory_hits"] = "memory_hits"
    hits: tuple[MemoryHit, ...] = ()
    notes: tuple[Note, ...] = Field(
        default=(), description="The job's scratchpad, oldest first (asked with job_notes)."
    )
    passages: tuple[Passage, ...] = Field(
        default=(), description="Knowledge passages, best first (asked with knowledge)."
    )


class Note(_Frozen):
    """One entry of a job's scratchpad, shared by the job's agents."""

    id: str
    text: str
    agent: str = Field(default="", description="Who wrote it.")
    created_at: float


class NoteWrite(_Frozen):
    """Add a note to the scratchpad of the envelope's job (and tenant)."""

    kind: Literal["note_write"] = "note_write"
    text: str = Field(min_length=1, max_length=4000)
    agent: str = Field(default="", max_length=200, description="Who writes it.")


class NotesQuery(_Frozen):
    """The scratchpad of the envelope's job (and tenant), oldest first."""

    kind: Literal["notes_query"] = "notes_query"
    limit: int = Field(default=MAX_NOTES, ge=1, le=MAX_NOTES)


class Notes(_Frozen):
    """A job's scratchpad, oldest first (the answer to ``NotesQuery`` and ``NoteWrite``)."""

    kind: Literal["notes"] = "notes"
    notes: tuple[Note, ...] = ()


class MemoryPolicy(_Frozen):
    """How an agent uses memory."""

    recall: bool = Field(default=True, description="Recall memories before each model call.")
    recall_k: int = Field(default=4, ge=1, le=50)
    recall_tokens: int = Field(
        default=300, ge=0, description="Budget for injected memories (whitespace tokens)."
    )
    min_score: float = Field(default=0.3, ge=0.0, le=1.0, description="Ignore weaker hits.")
    write_results: bool = Field(
        default=False, description="Store each subtask's result as a memory when it succeeds."
    )
    importance: float = Field(default=0.5, ge=0.0, le=1.0, description="Of written results.")
    knowledge: tuple[str, ...] = Field(
        default=(),
        max_length=8,
        description="Knowledge bases of the tenant whose passages closest to the subtask are "
        "shown before each model call, to be cited as [source#position].",
    )
    knowledge_k: int = Field(default=4, ge=1, le=20, description="Passages shown, at most.")


class EpisodePolicy(_Frozen):
    """Episodic memory: successful jobs kept, and the most similar offered to new ones.

    An episode is a job that succeeded: its request, plan, tool calls, answer and quality
    score, kept as a long-term memory of its tenant tagged ``episode`` and ``team:<name>``
    (or ``skill:<name>``). A new job of the same team or skill is shown the ``examples``
    episodes closest to its request after its task.
    """

    keep: bool = Field(default=False, description="Keep each successful job as an episode.")
    examples: int = Field(
        default=0, ge=0, le=10, description="Episodes offered to each new job (0: none)."
    )
    min_score: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Only answers scoring at least this are kept."
    )
