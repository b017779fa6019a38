"""A job's scratchpad (working memory): notes its agents share while it runs.

Agents write notes with the ``note`` tool and read them with ``read_notes``; every agent of
the job also sees them in its prompt. Notes live in Chroma beside the tenant's memories (a
collection of their own per tenant), so they survive the memory actor restarting or moving
to another node with a Chroma server; each carries its job's id, and every read and delete
names the job and the tenant. When the job ends they are dropped, or kept as long-term
memories when its team says so; notes of a job that never ended expire.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from raytroupe.protocols import InvalidInput
from raytroupe.protocols.memory import MAX_NOTES, Note

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

__all__ = ["NOTES_PREFIX", "Scratchpads", "notes_collection", "shown"]

NOTES_PREFIX: Final = "n_"
"""The name of every scratchpad collection starts so (and no memory collection's does)."""

NOTE_TTL_S: Final = 7 * 86_400.0
"""Notes of a job that never ended are forgotten after this long."""

COUNTED_JOBS: Final = 10_000
"""Jobs whose note counts are kept in memory (the most recently used): an agent's every
model call shows its job's notes, and most jobs write none, which is then known without
asking Chroma."""


def notes_collection(tenant: str) -> str:
    """The name of ``tenant``'s scratchpad collection."""
    return NOTES_PREFIX + hashlib.sha256(tenant.encode()).hexdigest()[:24]


class Scratchpads:
    """The notes of every job, per tenant.

    Args:
        collection: the Chroma collection of a name (made on first use).
        clock: UNIX time.
    """

    def __init__(
        self, collection: Callable[[str], Awaitable[Collection]], clock: Callable[[], float]
    ) -> None:
        self._collection = collection
        self._clock = clock
        self._writing: dict[tuple[str, str], asyncio.Lock] = {}
        # notes per job, as this process wrote or read them; a job not here is asked of Chroma
        self._counts: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        self._changes = 0  # notes added or dropped, by any job: a read overtaken is not counted

    async def note(self, tenant: str, job_id: str, agent: str, text: str) -> Note:
        """Add a note to the job's scratchpad.

        Raises:
            InvalidInput: the scratchpad holds :data:`MAX_NOTES` notes already.
        """
        collection = await self._collection(notes_collection(tenant))
        lock = self._writing.setdefault((tenant, job_id), asyncio.Lock())
        async with lock:  # the count and the add of one job's notes, one writer at a time
            held = self._counted(tenant, job_id)
            if held is None or held >= MAX_NOTES:  # a count too high is checked in Chroma
                found = await asyncio.to_thread(
                    collection.get, where={"job_id": job_id}, include=[]
                )
                held = len(found["ids"])
            if held >= MAX_NOTES:
                raise InvalidInput(
                    f"the job's scratchpad is full ({MAX_NOTES} notes): read it and write "
                    "what matters into your answer"
                )
            note = Note(id=uuid.uuid4().hex, text=text, agent=agent, created_at=self._clock())
            metadata: dict[str, Any] = {
                "job_id": job_id,
                "agent": agent,
                "created_at": note.created_at,
                "expires_at": note.created_at + NOTE_TTL_S,
                "importance": 1.0,
            }
            await asyncio.to_thread(
                collection.add, ids=[note.id], documents=[text], metadatas=[metadata]
            )
            self._changes += 1
            self._count(tenant, job_id, held + 1)
        return note

    async def notes(self, tenant: str, job_id: str, limit: int = MAX_NOTES) -> list[Note]:
        """The job's notes, oldest first (the newest ``limit`` of them)."""
        if self._counted(tenant, job_id) == 0:
            return []
        collection = await self._collection(notes_collection(tenant))
        changes = self._changes
        found = await asyncio.to_thread(
            collection.get, where={"job_id": job_id}, include=["documents", "metadatas"]
        )
        notes = [
            Note(
                id=note_id,
                text=text or "",
                agent=str(meta.get("agent", "")),
                created_at=float(str(meta.get("created_at", 0.0))),
            )
            for note_id, text, meta in zip(
                found["ids"], found["documents"] or [], found["metadatas"] or [], strict=True
            )
        ]
        notes.sort(key=lambda n: (n.created_at, n.id))
        if changes == self._changes:  # no note came or went while Chroma was read
            self._count(tenant, job_id, len(notes))
        return notes[-limit:]

    async def end(self, tenant: str, job_id: str) -> list[Note]:
        """Drop the job's notes; the notes dropped."""
        notes = await self.notes(tenant, job_id)
        if notes:
            collection = await self._collection(notes_collection(tenant))
            await asyncio.to_thread(collection.delete, ids=[n.id for n in notes])
        self._changes += 1
        self._writing.pop((tenant, job_id), None)
        self._counts.pop((tenant, job_id), None)
        return notes

    def recount(self) -> None:
        """Forget the counts kept (notes were removed behind this object: they expired)."""
        self._counts.clear()

    def _counted(self, tenant: str, job_id: str) -> int | None:
        count = self._counts.get((tenant, job_id))
        if count is not None:
            self._counts.move_to_end((tenant, job_id))
        return count

    def _count(self, tenant: str, job_id: str, count: int) -> None:
        self._counts[tenant, job_id] = count
        self._counts.move_to_end((tenant, job_id))
        while len(self._counts) > COUNTED_JOBS:
            self._counts.popitem(last=False)


def shown(notes: list[Note], budget_chars: int = 4000) -> str:
    """The notes as a prompt shows them: the newest that fit in ``budget_chars``."""
    lines: list[str] = []
    used = 0
    for note in reversed(notes):
        line = f"- ({note.agent or 'an agent'}) {note.text}"
        if used + len(line) > budget_chars and lines:
            break
        lines.insert(0, line)
        used += len(line)
    return "\n".join(lines)
