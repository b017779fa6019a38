"""The skill registry: immutable versions, history, rollback, persistence, concurrent edits."""

import asyncio
import itertools

import pytest
from wiring import run

from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.skills.desk import SkillDesk
from raytroupe.actors.skills.registry import SkillRegistry, SkillStore
from raytroupe.protocols import ConfigError, Conflict, SkillNotFound, TeamNotFound
from raytroupe.protocols.skill import SkillSpec


def _skill(name="summarize", version="1", instructions="Summarize.", **fields):
    return SkillSpec(
        name=name,
        version=version,
        description=f"{name} things",
        execution_mode=fields.pop("execution_mode", "direct"),
        prompt={"instructions": instructions},
        **fields,
    )


def _clock():
    ticks = itertools.count(1000)
    return lambda: float(next(ticks))


def test_apply_makes_a_version_current_and_keeps_the_others():
    registry = SkillRegistry(clock=_clock())
    assert registry.apply(_skill(version="1"), source="a.yaml") is True
    assert registry.apply(_skill(version="2", instructions="Shorter.")) is True
    assert registry.get("summarize").version == "2"
    assert registry.get("summarize", "1").prompt.instructions == "Summarize."
    info = registry.info("summarize")
    assert (info.version, info.versions, info.source) == ("2", ("1", "2"), "api")
    assert [e.action for e in registry.history("summarize")] == ["applied", "applied"]


def test_a_version_is_immutable_and_reapplying_it_unchanged_changes_nothing():
    registry = SkillRegistry(clock=_clock())
    registry.apply(_skill(version="1"))
    assert registry.apply(_skill(version="1")) is False
    assert len(registry.history()) == 1
    with pytest.raises(Conflict, match="versions are immutable") as caught:
        registry.apply(_skill(version="1", instructions="Changed."))
    assert caught.value.detail == {"skill": "summarize", "version": "1"}
    assert registry.get("summarize").prompt.instructions == "Summarize."


def test_rollback_goes_to_the_version_before_and_to_a_named_one():
    registry = SkillRegistry(clock=_clock())
    for v in ("1", "2", "3"):
        registry.apply(_skill(version=v, instructions=f"v{v}"))
    assert registry.rollback("summarize").version == "2"
    assert registry.get("summarize").version == "2"
    assert registry.rollback("summarize", "3").version == "3"
    assert registry.rollback("summarize").version == "2"  # the one before 3, as it was used
    registry.apply(_skill(version="1", instructions="v1"))  # an old version applied again
    assert registry.get("summarize").version == "1"
    actions = [(e.action, e.version) for e in registry.history("summarize")]
    assert actions == [
        ("applied", "1"), ("applied", "2"), ("applied", "3"), ("rolled_back", "2"),
        ("rolled_back", "3"), ("rolled_back", "2"), ("applied", "1"),
    ]  # fmt: skip
    with pytest.raises(SkillNotFound, match="no version '9'"):
        registry.rollback("summarize", "9")


def test_rollback_without_an_earlier_version_and_unknown_skills():
    registry = SkillRegistry(clock=_clock())
    registry.apply(_skill())
    with pytest.raises(ConfigError, match="no earlier version"):
        registry.rollback("summarize")
    with pytest.raises(SkillNotFound, match="no skill is registered as 'other'"):
        registry.get("other")
    with pytest.raises(SkillNotFound):
        registry.delete("other")


def test_delete_removes_every_version_and_is_recorded():
    registry = SkillRegistry(clock=_clock())
    registry.apply(_skill(version="1"))
    registry.apply(_skill(version="2"))
    info = registry.delete("summarize")
    assert info.versions == ("1", "2")
    assert registry.names() == []
    assert registry.history("summarize")[-1].action == "deleted"
    assert registry.apply(_skill(version="1", instructions="A new life.")) is True


def test_rejected_files_are_reported_until_fixed():
    registry = SkillRegistry(clock=_clock())
    registry.reject("skills/a.yaml", ["skills/a.yaml:3: version: Field required"], name="a")
    (problem,) = registry.problems()
    assert problem.problems == ("skills/a.yaml:3: version: Field required",)
    assert registry.history()[-1].action == "rejected"
    registry.apply(_skill(name="a"), source="skills/a.yaml")
    assert registry.problems() == []


def test_versions_heads_and_history_survive_a_restart(tmp_path):
    journal = Journal(tmp_path / "journal.sqlite")
    registry = SkillRegistry(SkillStore(journal.db), clock=_clock())
    registry.apply(_skill(version="1"), source="skills/s.yaml")
    registry.apply(_skill(version="2", instructions="Two."))
    registry.rollback("summarize")
    registry.apply(_skill(name="gone"))
    registry.delete("gone")
    journal.close()

    again = Journal(tmp_path / "journal.sqlite")
    restored = SkillRegistry(SkillStore(again.db), clock=_clock())
    assert restored.names() == ["summarize"]
    assert restored.get("summarize").version == "1"
    assert restored.info("summarize").versions == ("1", "2")
    assert [e.action for e in restored.history()] == [
        "applied", "applied", "rolled_back", "applied", "deleted"
    ]  # fmt: skip
    assert restored.rollback("summarize").version == "2"  # activations were restored too
    restored.apply(_skill(version="3"))
    assert len(restored.history()) == 7
    again.close()


class _Provisioner:
    def __init__(self, tools=("calculator",)):
        self.tools = set(tools)
        self.provisioned = []
        self.gate = None

    async def tool_names(self):
        return self.tools

    async def provision(self, team):
        if self.gate is not None:
            await self.gate.wait()
        self.provisioned.append(team)


def _desk(provisioner, teams=()):
    def team(name):
        if name not in teams:
            raise TeamNotFound(f"no team is registered as {name!r}", team=name)
        return name

    return SkillDesk(SkillsConfig(), None, provisioner, team)


def test_applying_checks_teams_and_tools_and_readies_a_react_skills_agent():
    async def main():
        provisioner = _Provisioner()
        desk = _desk(provisioner, teams=("research",))
        with pytest.raises(TeamNotFound):
            await desk.apply(_skill(execution_mode="team:nobody"))
        await desk.apply(_skill(name="brief", execution_mode="team:research"))
        react = _skill(name="maths", execution_mode="react",
                       tools=["calculator", {"name": "http_get", "required": False}])  # fmt: skip
        await desk.apply(react)
        kept = desk.registry.get("maths")
        assert [t.name for t in kept.tools] == ["calculator"]  # the missing optional one left out
        (team,) = provisioner.provisioned
        assert team.agents[0].name == "skill.maths.1"
        assert team.agents[0].tools == ("calculator",)
        with pytest.raises(ConfigError, match="needs tools that are not configured: shell"):
            await desk.apply(_skill(name="ops", execution_mode="react", tools=["shell"]))
        assert desk.registry.names() == ["brief", "maths"]

    run(main())


def test_concurrent_edits_of_one_skill_are_applied_one_at_a_time():
    async def main():
        provisioner = _Provisioner()
        provisioner.gate = asyncio.Event()
        desk = _desk(provisioner)
        same_version = [
            desk.apply(_skill(execution_mode="react", instructions=f"edit {n}")) for n in range(5)
        ]
        tasks = [asyncio.ensure_future(c) for c in same_version]
        await asyncio.sleep(0)
        provisioner.gate.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        applied = [r for r in results if r is True]
        conflicts = [r for r in results if isinstance(r, Conflict)]
        assert len(applied) == 1
        assert len(conflicts) == 4  # the same version with other content: refused, not merged
        assert len(desk.registry.history()) == 1

    run(main())


def test_a_tenant_policy_limits_the_skills_it_resolves():
    from raytroupe.protocols import Forbidden, TenantPolicy  # noqa: PLC0415

    desk = _desk(_Provisioner())
    desk.registry.apply(_skill(name="summarize"))
    desk.registry.apply(_skill(name="secret"))
    policy = TenantPolicy(skills=("summarize",))
    assert desk.resolve("summarize", "acme", policy).name == "summarize"
    assert desk.resolve("summarize@1", "acme", policy).version == "1"
    with pytest.raises(Forbidden, match="does not allow skill 'secret'"):
        desk.resolve("secret", "acme", policy)
    assert [s.name for s in desk.visible(policy)] == ["summarize"]
    assert [s.name for s in desk.visible(None)] == ["secret", "summarize"]


def _file(path, version, mode="direct"):
    tmp = path.with_suffix(".part")
    tmp.write_text(
        f"name: watched\nversion: '{version}'\ndescription: d\nexecution_mode: {mode}\n"
        "prompt: {instructions: Do it.}\n",
        encoding="utf-8",
    )
    tmp.replace(path)  # one rename: the watcher never reads half a file


def test_the_directory_is_loaded_then_watched(tmp_path):
    """A changed file is a new version; a broken one is reported and the old one stays."""
    (tmp_path / "notes.txt").write_text("not a skill")
    path = tmp_path / "watched.yaml"
    _file(path, "1")
    (tmp_path / "broken.md").write_text("no front matter\n")

    async def until(check):
        for _ in range(300):  # bounded: 30 s
            if check():
                return
            await asyncio.sleep(0.1)
        raise AssertionError("the watcher did not see the change")

    async def main():
        desk = SkillDesk(SkillsConfig(directory=tmp_path), None, _Provisioner(), lambda n: n)
        await desk.start()
        try:
            assert desk.registry.get("watched").version == "1"
            assert desk.registry.info("watched").source == str(path)
            (problem,) = desk.registry.problems()
            assert problem.file == str(tmp_path / "broken.md")
            assert problem.problems == (
                f"{tmp_path / 'broken.md'}:1: <file>: a Markdown skill starts with '---' "
                "front matter",
            )
            _file(path, "2")
            await until(lambda: desk.registry.get("watched").version == "2")
            _file(path, "3", mode="sideways")
            await until(lambda: any(p.file == str(path) for p in desk.registry.problems()))
            assert desk.registry.get("watched").version == "2"
            (tmp_path / "broken.md").unlink()
            await until(lambda: all(p.file != str(tmp_path / "broken.md")
                                    for p in desk.registry.problems()))  # fmt: skip
        finally:
            await desk.stop()

    run(main())


def test_a_proposed_version_is_registered_but_not_current_until_promoted(tmp_path):
    journal = Journal(tmp_path / "journal.sqlite")
    registry = SkillRegistry(SkillStore(journal.db), clock=_clock())
    registry.apply(_skill(version="1"))
    assert registry.propose(_skill(version="1.oab1", instructions="Better.")) is True
    assert registry.get("summarize").version == "1"
    assert registry.info("summarize").versions == ("1", "1.oab1")
    with pytest.raises(SkillNotFound):
        registry.propose(_skill(name="other"))
    with pytest.raises(Conflict):
        registry.propose(_skill(version="1.oab1", instructions="Different."))
    journal.close()
    again = Journal(tmp_path / "journal.sqlite")
    restored = SkillRegistry(SkillStore(again.db), clock=_clock())
    assert restored.get("summarize").version == "1"  # a proposal survives, still not current
    assert restored.promote("summarize", "1.oab1").prompt.instructions == "Better."
    assert restored.get("summarize").version == "1.oab1"
    assert [e.action for e in restored.history("summarize")] == ["applied", "proposed", "promoted"]
    assert restored.rollback("summarize").version == "1"  # promotion counts as an activation
    again.close()
