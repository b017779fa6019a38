"""The skill registry: immutable versions, the current one per skill, history and rollback.

A version, once registered, never changes: applying the same name and version with other
content is a :class:`~raytroupe.protocols.Conflict` (bump the version), and applying it again as it
was makes it current again. Jobs take the current version when they start and keep it;
they hold the :class:`SkillSpec` itself, so nothing the registry does later reaches them.

The registry is a plain class; with a :class:`SkillStore` every change is written through
to the state store first (what a restarted orchestrator loads), in memory only without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from raytroupe.actors.state import Database, Migration, migrate, upsert
from raytroupe.protocols import ConfigError, Conflict, SkillNotFound
from raytroupe.protocols.skill import SkillEvent, SkillInfo, SkillProblemInfo, SkillSpec

__all__ = ["SkillRegistry", "SkillStore"]

_ACTIVATIONS = ("applied", "rolled_back", "promoted")

MAX_EVENTS = 1000
"""History entries kept in memory (the store keeps them all)."""

_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS skill_versions (name TEXT NOT NULL, version TEXT NOT NULL, "
        "spec TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (name, version))",
        "CREATE TABLE IF NOT EXISTS skill_heads (name TEXT PRIMARY KEY, version TEXT NOT NULL, "
        "source TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS skill_events (seq INTEGER NOT NULL, event TEXT NOT NULL, "
        "PRIMARY KEY (seq))",
    ),
)


class SkillStore:
    """Skill versions, heads and history in a state database (the journal's)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "skills", _MIGRATIONS)

    def put_version(self, spec: SkillSpec, at: float) -> None:
        """Record a new version (an existing one is never rewritten)."""
        self._db.execute(
            "INSERT INTO skill_versions (name, version, spec, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name, version) DO NOTHING",
            (spec.name, spec.version, spec.model_dump_json(), at),
        )

    def set_head(self, name: str, version: str, source: str, at: float) -> None:
        """Make ``version`` the current one of ``name``."""
        self._db.execute(
            upsert("skill_heads", ("name", "version", "source", "updated_at"), key=("name",)),
            (name, version, source, at),
        )

    def drop(self, name: str) -> None:
        """Forget ``name`` and every version of it."""
        with self._db.transaction() as tx:
            tx.execute("DELETE FROM skill_heads WHERE name = ?", (name,))
            tx.execute("DELETE FROM skill_versions WHERE name = ?", (name,))

    def add_event(self, seq: int, event: SkillEvent) -> None:
        """Append to the history."""
        self._db.execute(
            "INSERT INTO skill_events (seq, event) VALUES (?, ?) ON CONFLICT (seq) DO NOTHING",
            (seq, event.model_dump_json()),
        )

    def load(self) -> tuple[list[SkillSpec], dict[str, tuple[str, str, float]], list[SkillEvent]]:
        """(every version oldest first, heads by name, the last events) as stored."""
        versions = [
            SkillSpec.model_validate_json(spec)
            for (spec,) in self._db.execute(
                "SELECT spec FROM skill_versions ORDER BY created_at, name, version"
            )
        ]
        heads = {
            name: (version, source, float(at))
            for name, version, source, at in self._db.execute(
                "SELECT name, version, source, updated_at FROM skill_heads"
            )
        }
        events = [
            SkillEvent.model_validate_json(e)
            for (e,) in self._db.execute(
                "SELECT event FROM skill_events ORDER BY seq DESC LIMIT ?", (MAX_EVENTS,)
            )
        ]
        return versions, heads, events[::-1]

    def last_seq(self) -> int:
        """The number of the last history entry (0: none)."""
        rows = self._db.execute("SELECT MAX(seq) FROM skill_events")
        return int(rows[0][0] or 0) if rows else 0


@dataclass
class _Skill:
    versions: dict[str, SkillSpec] = field(default_factory=dict)  # in order of registration
    current: str = ""
    source: str = ""
    updated_at: float = 0.0
    activations: list[str] = field(default_factory=list)  # versions made current, in order


class SkillRegistry:
    """Named skills with their versions (see the module docstring).

    Args:
        store: where changes are written (None: memory only).
        clock: UNIX time, injectable for tests.
    """

    def __init__(
        self, store: SkillStore | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._clock = clock
        self._skills: dict[str, _Skill] = {}
        self._events: list[SkillEvent] = []
        self._seq = 0
        self._problems: dict[str, SkillProblemInfo] = {}
        if store is not None:
            self._load(store)

    def _load(self, store: SkillStore) -> None:
        versions, heads, events = store.load()
        for spec in versions:
            self._skills.setdefault(spec.name, _Skill()).versions[spec.version] = spec
        for name, (version, source, at) in heads.items():
            skill = self._skills.get(name)
            if skill is not None and version in skill.versions:
                skill.current, skill.source, skill.updated_at = version, source, at
        self._skills = {n: s for n, s in self._skills.items() if s.current}
        for event in events:
            skill = self._skills.get(event.name)
            if skill is not None and event.action in _ACTIVATIONS and event.version:
                skill.activations.append(event.version)
        self._events = events
        self._seq = store.last_seq()

    # -- reading ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Registered skills, by name."""
        return sorted(self._skills)

    def get(self, name: str, version: str | None = None) -> SkillSpec:
        """The current version of ``name`` (or ``version`` of it).

        Raises:
            SkillNotFound: no such skill or version (``detail['skill']``).
        """
        skill = self._skills.get(name)
        if skill is None:
            raise SkillNotFound(f"no skill is registered as {name!r}", skill=name)
        wanted = version or skill.current
        try:
            return skill.versions[wanted]
        except KeyError:
            raise SkillNotFound(
                f"skill {name!r} has no version {wanted!r} (versions: {', '.join(skill.versions)})",
                skill=name,
                version=wanted,
            ) from None

    def current(self) -> list[SkillSpec]:
        """The current version of every skill, by name."""
        return [self._skills[n].versions[self._skills[n].current] for n in self.names()]

    def info(self, name: str) -> SkillInfo:
        """What is registered under ``name``.

        Raises:
            SkillNotFound: no such skill.
        """
        spec = self.get(name)
        skill = self._skills[name]
        return SkillInfo(
            name=name,
            version=skill.current,
            versions=tuple(skill.versions),
            description=spec.description,
            execution_mode=spec.execution_mode,
            source=skill.source,
            updated_at=skill.updated_at,
        )

    def history(self, name: str | None = None) -> list[SkillEvent]:
        """What happened, oldest first (of one skill, or of all)."""
        return [e for e in self._events if name is None or e.name == name]

    def problems(self) -> list[SkillProblemInfo]:
        """Skill files that could not be loaded, as last seen."""
        return sorted(self._problems.values(), key=lambda p: p.file)

    # -- changing -----------------------------------------------------------------------

    def check(self, spec: SkillSpec) -> bool:
        """True if ``spec`` would add a version, False if it is one already registered.

        Raises:
            Conflict: that version is registered with other content.
        """
        skill = self._skills.get(spec.name)
        known = skill.versions.get(spec.version) if skill else None
        if known is None:
            return True
        if known != spec:
            raise Conflict(
                f"skill {spec.name!r} version {spec.version!r} is already registered with "
                "other content: versions are immutable, give the change a new version",
                skill=spec.name,
                version=spec.version,
            )
        return False

    def apply(self, spec: SkillSpec, *, source: str = "api") -> bool:
        """Register ``spec`` (if new) and make it the current version; True if it is new.

        Raises:
            Conflict: that version is registered with other content.
        """
        new = self.check(spec)
        skill = self._skills.get(spec.name) or _Skill()
        if not new and skill.current == spec.version:
            return False  # as it is: nothing happens, nothing is recorded
        now = self._clock()
        if new and self._store is not None:
            self._store.put_version(spec, now)
        self._activate(skill, spec.name, spec.version, source, now, "applied")
        skill.versions.setdefault(spec.version, spec)
        self._skills[spec.name] = skill
        if source in self._problems:
            del self._problems[source]
        return new

    def propose(self, spec: SkillSpec, *, source: str = "optimiser") -> bool:
        """Register ``spec`` as a version of an existing skill without making it current.

        Raises:
            SkillNotFound: no such skill.
            Conflict: that version is registered with other content.
        """
        skill = self._skills.get(spec.name)
        if skill is None:
            raise SkillNotFound(f"no skill is registered as {spec.name!r}", skill=spec.name)
        new = self.check(spec)
        if new:
            now = self._clock()
            if self._store is not None:
                self._store.put_version(spec, now)
            skill.versions[spec.version] = spec
            self._record(SkillEvent(name=spec.name, version=spec.version, action="proposed",
                                    at=now, source=source))  # fmt: skip
        return new

    def promote(self, name: str, version: str, *, source: str = "api") -> SkillSpec:
        """Make a registered version (a proposal, usually) the current one.

        Raises:
            SkillNotFound: no such skill or version.
        """
        target = self.get(name, version)
        skill = self._skills[name]
        if version != skill.current:
            self._activate(skill, name, version, source, self._clock(), "promoted")
        return target

    def rollback(self, name: str, version: str | None = None, *, source: str = "api") -> SkillSpec:
        """Make ``version`` (default: the version current before this one) current again.

        Raises:
            SkillNotFound: no such skill or version.
            ConfigError: no earlier version to go back to.
        """
        skill = self._skills.get(name)
        if skill is None:
            raise SkillNotFound(f"no skill is registered as {name!r}", skill=name)
        if version is None:
            earlier = [v for v in skill.activations if v != skill.current]
            if not earlier:
                raise ConfigError(
                    f"skill {name!r} has no earlier version to roll back to", skill=name
                )
            version = earlier[-1]
        target = self.get(name, version)
        if version != skill.current:
            self._activate(skill, name, version, source, self._clock(), "rolled_back")
        return target

    def delete(self, name: str, *, source: str = "api") -> SkillInfo:
        """Unregister ``name`` and every version of it; return what it was.

        Raises:
            SkillNotFound: no such skill.
        """
        info = self.info(name)
        if self._store is not None:
            self._store.drop(name)
        del self._skills[name]
        self._record(SkillEvent(name=name, version=None, action="deleted",
                                at=self._clock(), source=source))  # fmt: skip
        return info

    def reject(self, file: str, problems: Iterable[str], name: str | None = None) -> None:
        """Record that ``file`` could not be loaded (its skill keeps its version)."""
        problems = tuple(problems)
        now = self._clock()
        self._problems[file] = SkillProblemInfo(file=file, problems=problems, at=now)
        self._record(SkillEvent(name=name or file, action="rejected", at=now, source=file,
                                problems=problems))  # fmt: skip

    def forget_problem(self, file: str) -> None:
        """``file`` is gone or fixed: stop reporting it."""
        self._problems.pop(file, None)

    def _activate(  # noqa: PLR0917 - private, called twice
        self,
        skill: _Skill,
        name: str,
        version: str,
        source: str,
        at: float,
        action: Literal["applied", "rolled_back", "promoted"],
    ) -> None:
        if self._store is not None:
            self._store.set_head(name, version, source, at)
        skill.current, skill.source, skill.updated_at = version, source, at
        skill.activations.append(version)
        self._record(SkillEvent(name=name, version=version, action=action,
                                at=at, source=source))  # fmt: skip

    def _record(self, event: SkillEvent) -> None:
        self._seq += 1
        if self._store is not None:
            self._store.add_event(self._seq, event)
        self._events.append(event)
        del self._events[:-MAX_EVENTS]
