"""Moved to :mod:`raytroupe.protocols.skill_files`; the names stay importable from here."""

from raytroupe.protocols.skill_files import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_SKILL_BYTES,
    SKILL_SUFFIXES,
    SkillProblem,
    parse_skill,
    read_skill,
    yaml_line,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_SKILL_BYTES",
    "SKILL_SUFFIXES",
    "SkillProblem",
    "parse_skill",
    "read_skill",
    "yaml_line",
]
