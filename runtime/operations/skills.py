"""Skills: list, read one, its history, roll back, optimise, promote, delete; lessons.

Reading a skill is for every caller (a tenant sees the skills its policy lets it run);
changing skills is for admins, as for teams. Lessons (what reflection learned from jobs of a
skill) are the caller's tenant's, an admin's key's too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols import (
    Budget,
    InvalidInput,
    LessonNotFound,
    MemoryHit,
    SkillEvent,
    SkillInfo,
    SkillSpec,
)
from raytroupe.protocols.evals import EvalSuite, OptimisationReport
from raytroupe.protocols.http import SkillApplied, SkillListing
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = [
    "SKILL_FILES",
    "apply_skill",
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


def _skill_file(*, markdown: bool) -> Callable[[bytes], SkillSpec]:
    def read(raw: bytes) -> SkillSpec:
        from raytroupe.protocols.skill_files import (  # noqa: PLC0415 - skill files only
            MAX_SKILL_BYTES,
            parse_skill,
        )

        if len(raw) > MAX_SKILL_BYTES:
            raise InvalidInput(f"a skill is at most {MAX_SKILL_BYTES} bytes", field="body")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("the body is not UTF-8", field="body") from None
        return parse_skill(text, "<request body>", markdown=markdown)

    return read


SKILL_FILES: Final[Mapping[str, Callable[[bytes], SkillSpec]]] = {
    **dict.fromkeys(
        ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"),
        _skill_file(markdown=False),
    ),
    "text/markdown": _skill_file(markdown=True),
}
"""A skill sent as its file, by content type: its problems come back with their lines."""


@operation(
    "PUT", "/v1/skills/{skill.name}", cli="skills apply", admin=True, status=201,
    readers=SKILL_FILES,
)  # fmt: skip
async def apply_skill(at: At, skill: SkillSpec | Mapping[str, Any]) -> SkillApplied:
    """Register a skill version and make it current (HTTP: 201 if new, 200 if registered).

    Over HTTP the body is the skill as JSON, or its file (``Content-Type:
    application/yaml``, or ``text/markdown`` for a Markdown skill).

    Raises:
        ConfigError: not a valid skill (a file's problems with their lines), a tool it needs
            is missing, or its agent cannot start.
        Conflict: that version is registered with other content (versions are immutable).
        TeamNotFound: a ``team:<name>`` skill names no registered team.
    """
    spec = given(SkillSpec, skill)
    created = await at.system.put_skill(spec, source=at.source)
    at.reply.created = created
    return SkillApplied(name=spec.name, version=spec.version, created=created)


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
