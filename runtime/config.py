"""Teams from YAML or Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from raytroupe.actors.config_files import read_yaml, validated
from raytroupe.protocols import TeamSpec

__all__ = ["Team"]


class Team(TeamSpec):
    """A team of agents; see :class:`protocols.TeamSpec` for the fields."""

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "team") -> Self:
        """Validate a mapping (e.g. parsed YAML).

        Raises:
            ConfigError: the data is not a valid team; ``detail['problems']`` lists why.
        """
        return validated(cls, data, source=source, what="team")

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Read a team file.

        Raises:
            ConfigError: the file is missing, unreadable, not YAML, or not a valid team.
        """
        return cls.from_dict(read_yaml(path, what="team"), source=str(path))

    def spec(self) -> TeamSpec:
        """The plain protocol model of the team, as it travels to the orchestrator."""
        return TeamSpec.model_validate(self.model_dump())
