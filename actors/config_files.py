"""Moved to :mod:`raytroupe.protocols.config.files`; the names stay importable from here."""

from raytroupe.protocols.config.files import read_yaml, validated

__all__ = ["read_yaml", "validated"]
