"""Teams from YAML or Python."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from pydantic import PrivateAttr

from raytroupe.protocols import AgentSpec, ConfigError, TeamSpec
from raytroupe.protocols.config.files import read_yaml, validated
from raytroupe.runtime.tools import Tool, as_tool

__all__ = ["Team"]


class Team(TeamSpec):
    """A team of agents; see :class:`raytroupe.protocols.TeamSpec` for the fields.

    In Python a team also takes its own function tools (``@raytroupe.tool`` or plain
    functions): ``functions=[f, g]`` gives them to every agent of the team; a function in
    an agent's ``tools`` (an agent given as a mapping) gives it to that agent only. A driver
    ships them to the tool sandboxes when it submits or registers the team.
    """

    _tools: dict[str, Tool] = PrivateAttr(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        given = data.pop("functions", None) or ()
        shipped: dict[str, Tool] = {}
        if isinstance(given, Mapping):  # digests already (a copy of a team, a spec)
            data["functions"] = given
        else:
            team_wide = [_keep(shipped, f) for f in given]
            agents = data.get("agents")
            if isinstance(agents, list | tuple):  # anything else: pydantic says what is wrong
                data["agents"] = [_agent_tools(a, shipped, team_wide) for a in agents]
            data["functions"] = {name: t.digest for name, t in shipped.items()}
        super().__init__(**data)
        self._tools = shipped

    @property
    def shipped(self) -> list[Tool]:
        """The team's function tools, as the driver ships them."""
        return list(self._tools.values())

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


def _keep(shipped: dict[str, Tool], function: Callable[..., Any] | Tool) -> str:
    """Add ``function`` to the team's tools; its name.

    Raises:
        ConfigError: another function of the team has that name.
    """
    made = as_tool(function)
    other = shipped.setdefault(made.name, made)
    if other.digest != made.digest:
        raise ConfigError(f"two function tools of the team are named {made.name!r}", tool=made.name)
    return made.name


def _agent_tools(agent: Any, shipped: dict[str, Tool], team_wide: Sequence[str]) -> Any:
    """``agent`` with its function tools as names, and the team's own added."""
    if isinstance(agent, AgentSpec):
        tools = list(agent.tools)
    elif isinstance(agent, Mapping):
        tools = [t if isinstance(t, str) else _keep(shipped, t) for t in agent.get("tools", ())]
    else:
        return agent  # pydantic says what is wrong with it
    tools += [name for name in team_wide if name not in tools]
    if isinstance(agent, AgentSpec):
        return agent.model_copy(update={"tools": tuple(tools)})
    return {**agent, "tools": tools}
