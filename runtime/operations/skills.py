"""Skills: list, read one, its history, roll back, optimise, promote, delete; lessons.

Reading a skill is for every caller (a tenant sees the skills its policy lets it run);
changing skills is for admins, as for teams. Lessons (what reflection learned from jobs of a
skill) are the caller's tenant's, an admin's key's too.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from raytroupe.protocols import (
    Budget,
    LessonNotFound,
    MemoryHit,
    SkillEvent,
    SkillInfo,
    SkillSpec,
)
from raytroupe.protocols.evals import EvalSuite, OptimisationReport
from raytroupe.protocols.http import SkillListing
from raytroupe.runtime.operations.declare import At, operation

__all__ = [
    "delete_lesson",
    "delete_skill",
    "lessons",
    "optimise_skill",
    "promote_skill",
    "rollback_skill",
    "skill",
    "skill_history",
    "skills",
]

TAG: Final = "skills"

Version = Annotated[str, Field(min_length=1, max_length=16)]
LessonId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


@operation("GET", "/v1/skills", cli="skills list")
async def skills(at: At) -> SkillListing:
    """Skills the caller may run; for an admin also the skill files that failed to load."""
    found = await at.system.skills(tenant=at.scope)
    problems = await at.system.skill_problems() if at.admin else []
    return SkillListing(skills=found, problems=problems)


@operation("GET", "/v1/skills/{name}", cli="skills show")
async def skill(at: At, name: str, version: Version | None = None) -> SkillSpec:
    """A skill's current version, or ``version`` of it.

    Raises:
        SkillNotFound: no such skill or version (or not one the caller may run).
    """
    return await at.system.skill(name, version, tenant=at.scope)


@operation("GET", "/v1/skill-history", cli="skills history", admin=True)
async def skill_history(at: At, name: str | None = None) -> list[SkillEvent]:
    """What happened to skills (``name``'s, or every one's), oldest first.

    Versions applied, rolled back to, promoted and deleted, and skill files rejected.
    """
    return await at.system.skill_history(name)


@operation("POST", "/v1/skills/{name}/rollback", cli="skills rollback", admin=True)
async def rollback_skill(at: At, name: str, version: Version | None = None) -> SkillSpec:
    """Make an earlier version current again (default: the one before); that version.

    New jobs get it; running jobs keep theirs.

    Raises:
        SkillNotFound: no such skill or version.
        Conflict: the skill has no version before the current one.
    """
    return await at.system.rollback_skill(name, version, source=at.source)


@operation("POST", "/v1/skills/{name}/promote", cli="skills promote", admin=True)
async def promote_skill(at: At, name: str, version: Version) -> SkillSpec:
    """Make a registered version (an optimiser's proposal) the current one; that version.

    Raises:
        SkillNotFound: no such skill or version.
    """
    return await at.system.evolution.promote_skill(name, version, source=at.source)


@operation(
    "POST", "/v1/skills/{name}/optimise", cli="skills optimise", admin=True, long_running=True
)
async def optimise_skill(
    at: At,
    name: str,
    suite: EvalSuite,
    *,
    variants: Annotated[int, Field(ge=1, le=5)] = 3,
    model: Annotated[str, Field(min_length=1, max_length=128)] = "default",
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4,
    budget: Budget | None = None,
    promote: bool = False,
) -> OptimisationReport:
    """Have a model propose better prompts for skill ``name``; prove each on ``suite``.

    The current version runs on the suite; the optimiser model (the alias ``model``) proposes
    ``variants`` prompts from its failures and the skill's lessons; each is registered as a
    version (not current), run on the suite and compared with the current one.
    ``report.best`` is the best that beats it (higher mean, paired test p < 0.05);
    ``promote`` makes it current, else :func:`promote_skill` does when a person decides.
    Waits for every run: minutes with a real model.

    Raises:
        SkillNotFound: no such skill.
        ModelError: the optimiser's answer holds no usable proposal.
    """
    return await at.system.evolution.optimise_skill(
        name, suite, variants=variants, model=model, concurrency=concurrency,
        budget=budget, promote=promote,
    )  # fmt: skip


@operation("DELETE", "/v1/skills/{name}", cli="skills delete", admin=True)
async def delete_skill(at: At, name: str) -> SkillInfo:
    """Unregister a skill and every version of it (running jobs keep theirs); what it was.

    Raises:
        SkillNotFound: no such skill.
    """
    return await at.system.delete_skill(name, source=at.source)


@operation("GET", "/v1/skills/{name}/lessons", cli="skills lessons")
async def lessons(at: At, name: str) -> list[MemoryHit]:
    """What reflection learned from the caller's tenant's jobs of the skill, newest first.

    Raises:
        SkillNotFound: no such skill (or not one the caller may run).
    """
    await at.system.skill(name, tenant=at.scope)
    return await at.system.memory.lessons(name, tenant=at.tenant)


@operation("DELETE", "/v1/skills/{name}/lessons/{lesson_id}", cli="skills forget")
async def delete_lesson(at: At, name: str, lesson_id: LessonId) -> MemoryHit:
    """Forget one lesson (of the caller's tenant) so that no later job recalls it; what it was.

    Raises:
        LessonNotFound: the tenant has no lesson of that id for the skill.
    """
    gone = await at.system.memory.delete_lesson(name, lesson_id, tenant=at.tenant)
    if gone is None:
        raise LessonNotFound(f"skill {name!r} has no lesson {lesson_id!r}", lesson=lesson_id)
    return gone
