"""What an agent remembers: memories and the job's notes shown to it, results written back.

Memory is an aid: when the memory actor is missing or fails, the agent goes on without it.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.llm.tokens import count_tokens
from raytroupe.actors.memory.notes import shown
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    ChatMessage,
    ErrorPayload,
    MemoryHits,
    MemoryQuery,
    MemoryWrite,
    TaskRequest,
    unscoped,
)
from raytroupe.protocols.prompts import knowledge_text

__all__ = ["recall", "remember"]

log = structlog.get_logger("raytroupe.agent")


async def recall(
    router: RouterClient,
    cause: AgentMessage,
    spec: AgentSpec,
    request: TaskRequest,
    messages: Sequence[ChatMessage],
) -> tuple[ChatMessage, ...]:
    """What the agent is shown before a model call, as one system message.

    That is the memories and knowledge passages relevant to the subtask, and the job's
    scratchpad (no message when there is none of them). Memory is an aid: if the memory
    actor is missing or fails, the loop goes on without.
    """
    policy = spec.memory
    if not policy.recall:
        return ()
    latest = messages[-1].text if len(messages) > 2 else ""  # noqa: PLR2004 - system, user
    query = MemoryQuery(
        query=f"{request.instructions}\n{latest}"[:2000],
        k=policy.recall_k,
        min_score=policy.min_score,
        job_notes=cause.job_id is not None,
        knowledge=policy.knowledge,
        knowledge_k=policy.knowledge_k,
    )
    reply = await router.request(cause.derive(sender=spec.name, recipient="memory", payload=query))
    if not isinstance(reply.payload, MemoryHits):
        return ()
    parts = []
    lines, budget = [], policy.recall_tokens
    for hit in reply.payload.hits:
        cost = count_tokens(hit.text)
        if cost > budget:
            break
        lines.append(f"- {hit.text}")
        budget -= cost
    if lines:
        parts.append("Relevant memories:\n" + "\n".join(lines))
    if reply.payload.passages:
        parts.append(knowledge_text((p.source, p.position, p.text) for p in reply.payload.passages))
    if reply.payload.notes:
        parts.append(
            "Notes on this job's scratchpad, shared by its agents (add to it with the "
            "'note' tool, if you have it):\n" + shown(list(reply.payload.notes))
        )
    if not parts:
        return ()
    return (ChatMessage(role="system", content="\n\n".join(parts)),)


async def remember(
    router: RouterClient, cause: AgentMessage, spec: AgentSpec, request: TaskRequest, output: str
) -> None:
    """Store a successful subtask's result, if the agent's policy says so."""
    if not spec.memory.write_results or not output.strip():
        return
    memory = MemoryWrite(
        text=f"{request.instructions.strip()} -> {output.strip()}"[:20_000],
        importance=spec.memory.importance,
        tags=("result", spec.role),
        agent=unscoped(spec.name, cause.tenant),  # as its team's author named it
    )
    reply = await router.request(cause.derive(sender=spec.name, recipient="memory", payload=memory))
    if isinstance(reply.payload, ErrorPayload):
        log.warning("memory_write_failed", agent=spec.name, code=reply.payload.code.value)
