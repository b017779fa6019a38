"""What an agent remembers: memories recalled into a subtask's prompt, results written back.

Memory is an aid: when the memory actor is missing or fails, the agent goes on without it.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from actors.endpoint import RouterClient
from protocols import (
    AgentMessage,
    AgentSpec,
    ChatMessage,
    ErrorPayload,
    MemoryHits,
    MemoryQuery,
    MemoryWrite,
    TaskRequest,
)

__all__ = ["recall", "remember"]

log = structlog.get_logger("raytroupe.agent")


async def recall(
    router: RouterClient,
    cause: AgentMessage,
    spec: AgentSpec,
    request: TaskRequest,
    messages: Sequence[ChatMessage],
) -> tuple[ChatMessage, ...]:
    """Memories relevant to the subtask and its latest turn, as one system message.

    Memory is an aid: if the memory actor is missing or fails, the loop goes on without.
    """
    policy = spec.memory
    if not policy.recall or policy.recall_tokens == 0:
        return ()
    latest = messages[-1].text if len(messages) > 2 else ""  # noqa: PLR2004 - system, user
    query = MemoryQuery(
        query=f"{request.instructions}\n{latest}"[:2000],
        k=policy.recall_k,
        min_score=policy.min_score,
    )
    reply = await router.request(cause.derive(sender=spec.name, recipient="memory", payload=query))
    if not isinstance(reply.payload, MemoryHits) or not reply.payload.hits:
        return ()
    lines, budget = [], policy.recall_tokens
    for hit in reply.payload.hits:
        cost = len(hit.text.split())
        if cost > budget:
            break
        lines.append(f"- {hit.text}")
        budget -= cost
    if not lines:
        return ()
    return (ChatMessage(role="system", content="Relevant memories:\n" + "\n".join(lines)),)


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
        agent=spec.name,
    )
    reply = await router.request(cause.derive(sender=spec.name, recipient="memory", payload=memory))
    if isinstance(reply.payload, ErrorPayload):
        log.warning("memory_write_failed", agent=spec.name, code=reply.payload.code.value)
