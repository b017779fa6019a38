"""Listing skills and their lessons, declared once: the same on the HTTP API, its clients, the
driver and a tenant's view. A tenant lists what its policy lets it run and never sees the
skill files that failed to load; lessons are always the caller's tenant's. Against a real
Ray: tests/integration/test_evals_ray.py (lessons) and test_skills.py (listing)."""

from __future__ import annotations

import pytest
from surfaces import ADMIN, USER, Driver, over_http

from raytroupe.protocols import InvalidInput, LessonNotFound, MemoryHit, SkillNotFound
from raytroupe.protocols.http import SkillListing
from raytroupe.protocols.skill import SkillInfo, SkillProblemInfo
from raytroupe.runtime.driver import Runtime

LESSON = "0123456789abcdef0123456789abcdef"


def _info(name):
    return SkillInfo(
        name=name, version="1", versions=("1",), description="d", execution_mode="direct",
        source="x", updated_at=1.0,
    )  # fmt: skip


def _lesson(tenant):
    return MemoryHit(
        id=LESSON, text=f"a lesson of {tenant}", tags=("lesson",), created_at=1.0, score=1.0,
        similarity=1.0, importance=0.5,
    )  # fmt: skip


class Registry:
    """The desk's skill calls and the memory store's lesson calls, recorded."""

    @property
    def memory(self):  # the memory store's calls: recorded by the same object
        return self

    def __init__(self):
        self.calls = []
        self.lessons_of = {"acme": [_lesson("acme")], "globex": [_lesson("globex")]}

    async def skills(self, *, tenant=None):
        self.calls.append(("skills", tenant))
        return [_info("mine")] if tenant else [_info("mine"), _info("theirs")]

    async def skill_problems(self):
        self.calls.append(("skill_problems",))
        return [SkillProblemInfo(file="bad.yaml", problems=("line 1: nope",), at=1.0)]

    async def skill(self, name, version=None, *, tenant=None):
        self.calls.append(("skill", name, version, tenant))
        if tenant is not None and name != "mine":
            raise SkillNotFound(f"no skill {name!r}", skill=name)

    async def lessons(self, skill, *, tenant):
        self.calls.append(("lessons", skill, tenant))
        return list(self.lessons_of.get(tenant, []))

    async def delete_lesson(self, skill, lesson_id, *, tenant):
        self.calls.append(("delete_lesson", skill, lesson_id, tenant))
        kept = self.lessons_of.get(tenant, [])
        gone = next((h for h in kept if h.id == lesson_id), None)
        if gone is not None:
            kept.remove(gone)
        return gone


def test_an_admin_lists_every_skill_and_the_broken_files_a_tenant_only_its_own():
    async def listing(client):
        return await client.skills()

    for key, admin in ((ADMIN, True), (USER, False)):
        registry = Registry()
        over = over_http(registry, key, listing)
        assert over == Driver(registry, admin=admin).skills()
        names = [s.name for s in over.skills]
        assert names == (["mine", "theirs"] if admin else ["mine"])
        assert [p.file for p in over.problems] == (["bad.yaml"] if admin else [])
        assert (("skill_problems",) in registry.calls) is admin


def test_lessons_are_the_callers_tenants_and_forgetting_one_answers_what_it_was():
    async def session(client):
        found = await client.lessons("mine")
        gone = await client.delete_lesson("mine", LESSON)
        with pytest.raises(LessonNotFound):
            await client.delete_lesson("mine", LESSON)
        with pytest.raises(SkillNotFound):  # a skill the tenant may not run: no lessons shown
            await client.lessons("theirs")
        return found, gone

    registry = Registry()
    found, gone = over_http(registry, USER, session)
    assert [h.text for h in found] == ["a lesson of acme"]
    assert gone.text == "a lesson of acme"
    assert registry.lessons_of["globex"] == [_lesson("globex")]  # another tenant's: untouched
    assert {c[-1] for c in registry.calls if c[0] in {"lessons", "delete_lesson"}} == {"acme"}

    admin = Driver(Registry(), admin=True, tenant="globex")
    assert [h.text for h in admin.lessons("theirs")] == ["a lesson of globex"]


@pytest.mark.parametrize("lesson_id", ["../x", "ABCDEF0123456789abcdef0123456789", "1" * 33])
def test_a_lesson_id_that_is_no_lesson_id_is_refused_before_memory_hears(lesson_id):
    registry = Registry()
    with pytest.raises(InvalidInput):
        Driver(registry, admin=True).delete_lesson("mine", lesson_id)

    async def over(client):
        with pytest.raises(InvalidInput):
            await client.delete_lesson("mine", lesson_id)

    over_http(registry, ADMIN, over)
    assert registry.calls == []


def test_the_drivers_old_forms_still_work_and_warn():
    registry = Registry()

    class Old(Driver):
        lessons = Runtime.__dict__["lessons"]
        delete_lesson = Runtime.__dict__["delete_lesson"]

    old = Old(registry, admin=True, tenant="default")
    with pytest.warns(DeprecationWarning, match=r"as_tenant\(tenant\)\.lessons"):
        assert [h.text for h in old.lessons("mine", tenant="globex")] == ["a lesson of globex"]
    with pytest.warns(DeprecationWarning, match="will raise LessonNotFound"):
        assert old.delete_lesson("mine", LESSON) is False  # "default" has no lesson
    listing = SkillListing(skills=[_info("a"), _info("b")])
    with pytest.warns(DeprecationWarning, match=r"use \.skills"):
        assert [s.name for s in listing] == ["a", "b"]
    with pytest.warns(DeprecationWarning, match=r"use \.skills"):
        assert (len(listing), listing[1].name) == (2, "b")
