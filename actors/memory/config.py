"""Moved to :mod:`raytroupe.protocols.config.memory`; the name stays importable from here."""

from raytroupe.protocols.config.memory import MemoryConfig

__all__ = ["MemoryConfig"]
