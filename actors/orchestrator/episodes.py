"""Episodic memory: successful jobs kept as episodes, the most similar shown to new jobs.

An episode is what a job that succeeded did: its request, its plan (each subtask's role and
instructions), the tools its agents called, its answer and its quality score. It is kept as
a long-term memory of the job's tenant, tagged ``episode`` and ``team:<name>`` (or
``skill:<name>``), when the team's or skill's :class:`~raytroupe.protocols.EpisodePolicy` says so. A
new job of that team or skill is shown the episodes closest to its request after its task,
under :data:`~raytroupe.protocols.prompts.EXAMPLES_HEADING`; the front desk adds them when it admits
the job, so they are journaled with it and a resumed job sees the same ones.
"""

from __future__ import annotations

from typing import Final

import structlog

from raytroupe.actors.endpoint import RouterClient
from raytroupe.protocols import (
    AgentMessage,
    EpisodePolicy,
    JobResult,
    MemoryHit,
    MemoryHits,
    MemoryQuery,
    MemoryWrite,
    SkillSpec,
    TeamSpec,
    TroupeError,
)
from raytroupe.protocols.prompts import EXAMPLES_HEADING, request_of

__all__ = [
    "episode_tags",
    "episode_write",
    "examples_query",
    "policy_of",
    "shown_examples",
    "with_examples",
]

log = structlog.get_logger("raytroupe.orchestrator")

EPISODE: Final = "episode"
_FIELD_CHARS: Final = 1500
"""Characters of an episode's plan, tools or answer kept (each)."""


def policy_of(team: TeamSpec, skill: SkillSpec | None) -> tuple[EpisodePolicy, str]:
    """The job's episode policy and whose episodes they are (``team:x`` or ``skill:x``)."""
    if skill is not None:
        return skill.episodes, f"skill:{skill.name}"
    return team.episodes, f"team:{team.name}"


def episode_tags(owner: str) -> tuple[str, str]:
    """The tags of ``owner``'s episodes in memory."""
    return (EPISODE, owner)


def episode_write(
    result: JobResult, policy: EpisodePolicy, owner: str, request: str
) -> MemoryWrite | None:
    """The episode ``result`` is kept as, or None when the policy keeps none of it.

    ``request`` is what was asked (the task as the caller wrote it, without its context).
    """
    if not policy.keep or result.status != "succeeded" or not result.answer.strip():
        return None
    quality = result.output.quality if result.output is not None else None
    score = quality.score if quality is not None else 1.0
    if score < policy.min_score:
        return None
    plan = "; ".join(f"{s.role}: {s.instructions}" for s in result.subtasks)
    tools = ", ".join(
        str(span.attributes.get("tool")) for span in result.trace if span.kind == "tool_call"
    )
    return MemoryWrite(
        text=request_of(request).strip()[:4000] or result.answer[:4000],
        importance=score,
        tags=episode_tags(owner),
        metadata={
            "job_id": result.job_id,
            "plan": plan[:_FIELD_CHARS],
            "tools": tools[:_FIELD_CHARS],
            "answer": result.answer.strip()[:_FIELD_CHARS],
            "score": score,
        },
    )


def examples_query(policy: EpisodePolicy, owner: str, request: str) -> MemoryQuery | None:
    """The query for the episodes offered to a new job (None: it is offered none)."""
    if policy.examples == 0 or not request.strip():
        return None
    return MemoryQuery(query=request[:2000], k=policy.examples, tags=episode_tags(owner))


def shown_examples(task: str, hits: tuple[MemoryHit, ...]) -> str:
    """``task`` followed by the episodes, as the job is given them (``task`` if none)."""
    if not hits:
        return task
    lines = [task, "", EXAMPLES_HEADING]
    for n, hit in enumerate(hits, 1):
        meta = hit.metadata
        lines.append(f"[{n}] request: {_one_line(hit.text)}")
        if meta.get("plan"):
            lines.append(f"    plan: {_one_line(str(meta['plan']))}")
        if meta.get("tools"):
            lines.append(f"    tools called: {_one_line(str(meta['tools']))}")
        lines.append(f"    answer: {_one_line(str(meta.get('answer', '')))}")
    return "\n".join(lines)


async def with_examples(
    router: RouterClient,
    job_id: str,
    task: str,
    *,
    tenant: str,
    team: TeamSpec,
    skill: SkillSpec | None,
) -> str:
    """``task`` followed by the episodes its team or skill offers it (``task`` if none).

    Memory is an aid: when the memory actor cannot answer, the job goes on without.
    """
    policy, owner = policy_of(team, skill)
    query = examples_query(policy, owner, request_of(task))
    if query is None:
        return task
    try:
        message = AgentMessage(
            sender="orchestrator", recipient="memory", tenant=tenant, job_id=job_id, payload=query
        )
        reply = await router.request(message)
    except TroupeError as exc:
        log.warning("episodes_not_recalled", job_id=job_id, code=exc.code.value)
        return task
    if not isinstance(reply.payload, MemoryHits):
        return task
    return shown_examples(task, reply.payload.hits)


def _one_line(text: str) -> str:
    return " ".join(text.split())
