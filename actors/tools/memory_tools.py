"""Tools the memory actor answers: the job's scratchpad, and the tenant's knowledge bases.

``note`` and ``read_notes`` share a scratchpad among the agents of one job (every agent of
the job also sees the notes in its prompt); ``knowledge_search`` finds passages in one of the
tenant's knowledge bases, each with the citation an answer should give. The job and the
tenant come from the envelope the call came in, never from the model's arguments: an agent
reaches only its own job's notes and its own tenant's knowledge.
"""

from __future__ import annotations

from typing import assert_never

from raytroupe.actors.endpoint import RouterClient, expected
from raytroupe.actors.tools.builtins import ToolContext
from raytroupe.protocols import (
    ErrorPayload,
    Notes,
    NotesQuery,
    NoteWrite,
    ToolDef,
    ToolError,
    unscoped,
)
from raytroupe.protocols.knowledge import KB_NAME_PATTERN, KnowledgeQuery, Passages
from raytroupe.protocols.llm import ToolArguments
from raytroupe.protocols.memory import MAX_NOTES

__all__ = ["KNOWLEDGE_SEARCH", "NOTE", "READ_NOTES", "MemoryTools"]

NOTE = ToolDef(
    name="note",
    description="Write a note on this job's shared scratchpad: a finding, a decision or a "
    "to-do the other agents of the job should know. Every agent of the job sees the notes.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 4000}},
        "required": ["text"],
        "additionalProperties": False,
    },
    timeout_s=30.0,
    tags=("memory",),
)

READ_NOTES = ToolDef(
    name="read_notes",
    description="Read this job's shared scratchpad: every note its agents wrote, oldest first.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    timeout_s=30.0,
    tags=("memory",),
)


KNOWLEDGE_SEARCH = ToolDef(
    name="knowledge_search",
    description="Search one of your knowledge bases for passages about a query. Each passage "
    "comes with its source and position; cite the ones you use as [source#position].",
    parameters={
        "type": "object",
        "properties": {
            "kb": {"type": "string", "pattern": KB_NAME_PATTERN,
                   "description": "The knowledge base's name."},
            "query": {"type": "string", "minLength": 1, "maxLength": 2000},
            "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        },
        "required": ["kb", "query"],
        "additionalProperties": False,
    },
    timeout_s=60.0,
    tags=("memory", "knowledge"),
)  # fmt: skip


class MemoryTools:
    """The runners of ``note``, ``read_notes`` and ``knowledge_search`` for one sandbox.

    Args:
        router: how the sandbox reaches the memory actor.
        sender: the sandbox's address (the requests' sender).
    """

    def __init__(self, router: RouterClient, sender: str) -> None:
        self._router = router
        self._sender = sender

    async def note(self, arguments: ToolArguments, ctx: ToolContext) -> object:
        """Add a note; the scratchpad's size after it."""
        tenant = ctx.envelope.tenant if ctx.envelope else ""
        write = NoteWrite(text=str(arguments["text"]), agent=unscoped(ctx.agent, tenant))
        notes = await self._ask(write, ctx)
        return {"written": True, "notes": len(notes.notes)}

    async def read_notes(self, _arguments: ToolArguments, ctx: ToolContext) -> object:
        """Every note of the job, oldest first."""
        notes = await self._ask(NotesQuery(limit=MAX_NOTES), ctx)
        return [{"agent": n.agent, "note": n.text} for n in notes.notes]

    async def knowledge_search(self, arguments: ToolArguments, ctx: ToolContext) -> object:
        """The passages closest to the query, best first, each with its citation."""
        query = KnowledgeQuery(
            kb=str(arguments["kb"]), query=str(arguments["query"]), k=int(arguments.get("k", 5))
        )
        cause = ctx.envelope
        if cause is None:
            raise ToolError("knowledge_search needs the envelope of the call")
        reply = await self._router.request(
            cause.derive(sender=self._sender, recipient="memory", payload=query)
        )
        match expected(reply, Passages, unexpected=ToolError):
            case Passages() as found:
                return [
                    {"cite": f"[{p.source}#{p.position}]", "section": p.section,
                     "score": round(p.score, 3), "text": p.text}
                    for p in found.passages
                ]  # fmt: skip
            case ErrorPayload() as error:
                raise ToolError(f"knowledge_search: {error.message}")
            case unexpected:
                assert_never(unexpected)

    async def _ask(self, payload: NoteWrite | NotesQuery, ctx: ToolContext) -> Notes:
        """The memory actor's answer, for the call's job and tenant.

        Raises:
            ToolError: the call has no job, or the memory actor refused or failed it.
        """
        cause = ctx.envelope
        if cause is None or cause.job_id is None:
            raise ToolError("the scratchpad is a job's: this call is not part of a job")
        reply = await self._router.request(
            cause.derive(sender=self._sender, recipient="memory", payload=payload)
        )
        match expected(reply, Notes, unexpected=ToolError):
            case Notes() as notes:
                return notes
            case ErrorPayload() as error:
                raise ToolError(f"the scratchpad: {error.message}")
            case unexpected:
                assert_never(unexpected)
