"""Episodic memory: successful jobs kept as episodes, the most similar shown to new jobs.

An episode is what a job that succeeded did: its request, its plan (each subtask's role and
instructions), the tools its agents called, its answer and its quality score. It is kept as
a long-term memory of the job's tenant, tagged ``episode`` and ``team:<name>`` (or
``skill:<name>``), when the team's or skill's :class:`~raytroupe.protocols.EpisodePolicy` says so. A
new job of that team or skill is offered the episodes closest to its request as the
``examples`` of its context (:class:`~raytroupe.protocols.job_context.JobContext`); the front
desk recalls them when it admits the job, so they are journaled with it and a resumed job
sees the same ones.
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
from raytroupe.protocols.job_context import Example

__all__ = [
    "episode_tags",
    "episode_write",
    "examples_of",
    "examples_query",
    "policy_of",
    "recalled_examples",
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
        text=request.strip()[:4000] or result.answer[:4000],
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


def examples_of(hits: tuple[MemoryHit, ...]) -> tuple[Example, ...]:
    """The episodes recalled, as the examples a job is offered."""
    return tuple(
        Example(
            request=hit.text,
            plan=str(hit.metadata.get("plan") or ""),
            tools=str(hit.metadata.get("tools") or ""),
            answer=str(hit.metadata.get("answer") or ""),
        )
        for hit in hits
    )


async def recalled_examples(
    router: RouterClient,
    job_id: str,
    request: str,
    *,
    tenant: str,
    team: TeamSpec,
    skill: SkillSpec | None,
    user: str | None = None,
) -> tuple[Example, ...]:
    """The episodes the job's team or skill offers for ``request`` (what was asked).

    A job of an end ``user`` is offered that user's and the tenant's episodes, never another
    user's. Memory is an aid: when the memory actor cannot answer, the job goes on without.
    """
    policy, owner = policy_of(team, skill)
    query = examples_query(policy, owner, request)
    if query is None:
        return ()
    try:
        message = AgentMessage(
            sender="orchestrator", recipient="memory", tenant=tenant, job_id=job_id,
            user=user, payload=query,
        )  # fmt: skip
        reply = await router.request(message)
    except TroupeError as exc:
        log.warning("episodes_not_recalled", job_id=job_id, code=exc.code.value)
        return ()
    if not isinstance(reply.payload, MemoryHits):
        return ()
    return examples_of(reply.payload.hits)
