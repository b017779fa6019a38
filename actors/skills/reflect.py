"""Reflection: lessons a model writes after a skill's jobs, recalled by the skill's next jobs.

After a job of a skill whose :class:`~raytroupe.protocols.skill.ReflectionPolicy` says so (on
failure, on a low quality score, always; sampled by a hash of the job id), a reflector
model (purpose ``reflect``) reads the request, the answer, the gate's problems and the
error, and writes one short lesson. It is stored in long-term memory for the job's tenant,
tagged ``lesson`` and ``skill:<name>``. Before a direct or react job of the skill starts,
the lessons closest to its request (at most ``recall``) join its prompt.
"""

from __future__ import annotations

import hashlib
from typing import Final

from raytroupe.protocols import ChatMessage, JobResult, LLMRequest, MemoryQuery, MemoryWrite
from raytroupe.protocols.prompts import LESSONS_HEADING
from raytroupe.protocols.quality import QualityReport
from raytroupe.protocols.skill import LESSON, SkillSpec, lesson_tags

__all__ = [
    "LESSON",
    "LESSONS_HEADING",
    "lesson_tags",
    "lesson_write",
    "lessons_query",
    "reflect_request",
    "reflection_due",
]

MAX_LESSON_CHARS: Final = 600
_REFLECTOR: Final = (
    "You review a finished job of a skill. In one or two sentences, write the lesson to keep "
    "for next time: what went wrong (or right) and what to do differently. Write only the "
    "lesson."
)
_SAMPLE_BUCKETS: Final = 10_000


def reflection_due(skill: SkillSpec, result: JobResult, report: QualityReport | None) -> bool:
    """Whether the policy asks for a lesson about this job."""
    policy = skill.reflection
    failed = result.status == "failed"
    due = {
        "never": False,
        "failure": failed,
        "low_score": failed or (report is not None and report.score < policy.below),
        "always": result.status != "cancelled",
    }[policy.when]
    if not due or policy.sample >= 1.0:
        return due
    digest = int(hashlib.sha256(result.job_id.encode()).hexdigest()[:8], 16)
    return digest % _SAMPLE_BUCKETS < policy.sample * _SAMPLE_BUCKETS


def reflect_request(
    skill: SkillSpec, request: str, result: JobResult, report: QualityReport | None
) -> LLMRequest:
    """The reflector's request: the job, as the skill saw it, and how it ended."""
    problems = "; ".join(report.problems) if report is not None else ""
    error = result.error.message if result.error is not None else ""
    text = (
        f"Skill: {skill.name} ({skill.description})\n\nRequest:\n{request[:4000]}\n\n"
        f"Answer:\n{result.answer[:4000]}\n\nOutcome: {result.status}"
        + (f"\nProblems: {problems}" if problems else "")
        + (f"\nError: {error}" if error else "")
    )
    return LLMRequest(
        model=skill.reflection.model,
        purpose="reflect",
        messages=(
            ChatMessage(role="system", content=_REFLECTOR),
            ChatMessage(role="user", content=text),
        ),
        temperature=0.0,
        max_tokens=200,
    )


def lesson_write(skill: SkillSpec, job_id: str, lesson: str) -> MemoryWrite:
    """The memory a lesson is kept as (for the job's tenant: the envelope says whose)."""
    return MemoryWrite(
        text=lesson.strip()[:MAX_LESSON_CHARS],
        importance=0.9,
        tags=lesson_tags(skill.name),
        metadata={"skill": skill.name, "version": skill.version, "job_id": job_id},
    )


def lessons_query(skill: SkillSpec, request: str) -> MemoryQuery | None:
    """The query for the lessons a job of ``skill`` recalls (None: it recalls none)."""
    if skill.reflection.recall == 0:
        return None
    return MemoryQuery(query=request[:2000], k=skill.reflection.recall,
                       tags=lesson_tags(skill.name))  # fmt: skip
