"""Moved to :mod:`raytroupe.protocols.config.skills`; the names stay importable from here."""

from raytroupe.protocols.config.skills import RoutingConfig, SkillsConfig

__all__ = ["RoutingConfig", "SkillsConfig"]
