"""Teams from YAML or Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import ValidationError

from protocols import ConfigError, TeamSpec

__all__ = ["Team"]


class Team(TeamSpec):
    """A team of agents; see :class:`protocols.TeamSpec` for the fields."""

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "team") -> Self:
        """Validate a mapping (e.g. parsed YAML).

        Raises:
            ConfigError: the data is not a valid team; ``detail['problems']`` lists why.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: a team must be a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            problems = [
                f"{'.'.join(str(p) for p in err['loc']) or '<team>'}: {err['msg']}"
                for err in e.errors(include_url=False)
            ]
            raise ConfigError(
                f"{source}: invalid team: {'; '.join(problems)}", problems=problems
            ) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Read a team file.

        Raises:
            ConfigError: the file is missing, unreadable, not YAML, or not a valid team.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read team file {str(path)!r}: {e.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        return cls.from_dict(data, source=str(path))

    def spec(self) -> TeamSpec:
        """The plain protocol model of the team, as it travels to the orchestrator."""
        return TeamSpec.model_validate(self.model_dump())
