"""The front desk's skills: the registry, its directory, and what a skill job runs.

:class:`SkillDesk` is what the front desk (actor ``desk``) keeps of skills:

- **applying** a skill checks it can work before anything is stored: a ``team:<name>``
  skill's team must be registered; a react skill's required tools must exist (optional
  ones that do not are left out) and its agent is provisioned (spawned, given its tools);
- **the directory** (``SkillsConfig.directory``) is loaded at start and, with ``watch``,
  watched: a changed file is applied as a new version for new jobs (running jobs keep theirs:
  they hold their :class:`SkillSpec`); a broken file is reported (``problems``) and its skill
  keeps the version it had; a removed file leaves its skill registered (delete it through
  the API);
- **resolving** ``name`` or ``name@version`` for a job, as a tenant's policy allows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import structlog

from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.skills.files import SKILL_SUFFIXES, read_skill
from raytroupe.actors.skills.registry import SkillRegistry, SkillStore
from raytroupe.actors.skills.run import skill_team
from raytroupe.protocols import ConfigError, Forbidden, TeamSpec, TenantPolicy, TroupeError
from raytroupe.protocols.skill import SkillSpec

__all__ = ["SkillDesk", "SkillProvisioner"]

log = structlog.get_logger("raytroupe.skills")


class SkillProvisioner(Protocol):
    """What the desk needs of the cluster: the tools there are, and agents made ready."""

    async def tool_names(self) -> set[str]:
        """Every tool the sandboxes offer."""
        ...

    async def provision(self, team: TeamSpec) -> None:
        """Make the team's agents ready."""
        ...


class SkillDesk:
    """Skills as the front desk keeps them (see the module docstring).

    Args:
        config: the directory and routing settings.
        store: where versions and history are kept (None: in memory only).
        provisioner: checks tools and readies react skills' agents.
        team: the registered team of a name (raising ``TeamNotFound``).
    """

    def __init__(
        self,
        config: SkillsConfig,
        store: SkillStore | None,
        provisioner: SkillProvisioner,
        team: Callable[[str], TeamSpec],
    ) -> None:
        self.config = config
        self.registry = SkillRegistry(store)
        self._provisioner = provisioner
        self._team = team
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        self._stamps: dict[Path, tuple[int, int] | None] = {}

    # -- applying -----------------------------------------------------------------------

    async def apply(self, spec: SkillSpec, *, source: str = "api") -> bool:
        """Check ``spec`` can run, then make it the current version; True if it is new.

        Raises:
            Conflict: that version is registered with other content.
            TeamNotFound: a ``team:<name>`` skill's team is not registered.
            ConfigError: a required tool does not exist, or its agent cannot be provisioned.
        """
        async with self._lock:
            return await self._apply(spec, source)

    async def _apply(self, spec: SkillSpec, source: str) -> bool:
        self.registry.check(spec)
        spec = await self.runnable(spec)
        new = self.registry.apply(spec, source=source)
        log.info("skill_applied", skill=spec.name, version=spec.version, source=source, new=new)
        return new

    async def runnable(self, spec: SkillSpec) -> SkillSpec:
        """``spec`` as it can run here: optional tools that do not exist left out.

        Raises:
            TeamNotFound, ConfigError: as :meth:`apply`.
        """
        if spec.team is not None:
            self._team(spec.team)
            return spec
        if spec.execution_mode != "react":
            return spec
        if spec.tools:
            known = await self._provisioner.tool_names()
            missing = sorted(t.name for t in spec.tools if t.required and t.name not in known)
            if missing:
                raise ConfigError(
                    f"skill {spec.name!r} needs tools that are not configured: "
                    f"{', '.join(missing)} (known: {', '.join(sorted(known))})",
                    skill=spec.name,
                    tools=missing,
                )
            kept = tuple(t for t in spec.tools if t.name in known)
            if kept != spec.tools:
                dropped = sorted(t.name for t in spec.tools if t.name not in known)
                log.warning("skill_optional_tools_missing", skill=spec.name, tools=dropped)
                spec = spec.model_copy(update={"tools": kept})
        await self._provisioner.provision(skill_team(spec))
        return spec

    # -- resolving ------------------------------------------------------------------------

    def resolve(self, ref: str, policy_name: str, policy: TenantPolicy | None) -> SkillSpec:
        """The skill ``ref`` (``name`` or ``name@version``) names, as the policy allows.

        Raises:
            SkillNotFound: no such skill or version.
            Forbidden: the tenant's policy does not list the skill.
        """
        name, _, version = ref.partition("@")
        if policy is not None and policy.skills is not None and name not in policy.skills:
            raise Forbidden(
                f"policy {policy_name!r} does not allow skill {name!r}",
                field="skill",
                policy=policy_name,
            )
        return self.registry.get(name, version or None)

    def visible(self, policy: TenantPolicy | None) -> list[SkillSpec]:
        """The current skills a tenant with ``policy`` may run (None: an admin, all).

        A team skill needs its team allowed too: listing it would offer what submitting
        it refuses.
        """
        if policy is None:
            return self.registry.current()
        return [
            s
            for s in self.registry.current()
            if (policy.skills is None or s.name in policy.skills)
            and (s.team is None or policy.teams is None or s.team in policy.teams)
        ]

    # -- the directory ------------------------------------------------------------------

    async def start(self) -> None:
        """Load the directory, then watch it (as configured)."""
        directory = self.config.directory
        if directory is None:
            return
        if not directory.is_dir():
            log.warning("skills_directory_missing", directory=str(directory))
            return
        for path in sorted(p for p in directory.iterdir() if p.suffix in SKILL_SUFFIXES):
            await self.load_file(path)
        if self.config.watch:
            self._watcher = asyncio.get_running_loop().create_task(self._watch(directory))

    async def load_file(self, path: Path) -> SkillSpec | None:
        """Apply the skill in ``path``; a problem is recorded, never raised."""
        source = str(path)
        self._stamps[path] = _stamp(path)
        try:
            spec = await asyncio.to_thread(read_skill, path)
            await self.apply(spec, source=source)
        except TroupeError as exc:
            problems = exc.detail.get("problems") or [exc.message]
            self.registry.reject(source, [str(p) for p in problems], name=path.stem)
            log.warning("skill_file_rejected", file=source, problems=problems)
            return None
        return spec

    def _changed(self, directory: Path) -> set[Path]:
        """Skill files new or changed since they were last loaded, and those removed."""
        found = {p for p in directory.iterdir() if p.suffix in SKILL_SUFFIXES}
        changed = {p for p in found if self._stamps.get(p) != _stamp(p)}
        return changed | (set(self._stamps) - found)

    async def _watch(self, directory: Path) -> None:
        """Reload what changes, as watchfiles reports it and as a stat scan each second finds.

        The scan closes the gap between the first load and the watcher being ready (a file
        changed then would go unseen) and covers file systems that send no events.
        """
        import watchfiles  # noqa: PLC0415 - only a watched directory needs it

        async for changes in watchfiles.awatch(
            directory, stop_event=self._stop, recursive=False, debounce=200, step=50,
            rust_timeout=1000, yield_on_timeout=True,
        ):  # fmt: skip
            named = {Path(name) for _, name in changes if Path(name).suffix in SKILL_SUFFIXES}
            for path in sorted(named | self._changed(directory)):
                if path.is_file():
                    await self.load_file(path)
                else:
                    self._stamps.pop(path, None)
                    self.registry.forget_problem(str(path))
                    log.info("skill_file_removed", file=str(path))

    async def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher


def _stamp(path: Path) -> tuple[int, int] | None:
    """(modification time in ns, size) of a file, None if it is gone."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
