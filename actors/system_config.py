"""Moved to :mod:`raytroupe.protocols.config.system`; the names stay importable from here."""

from raytroupe.protocols.config.system import (
    OTEL_FLAG_DEPRECATED,
    PlacementConfig,
    ScaleConfig,
    StateConfig,
    SystemConfig,
    TracingConfig,
)

__all__ = [
    "OTEL_FLAG_DEPRECATED",
    "PlacementConfig",
    "ScaleConfig",
    "StateConfig",
    "SystemConfig",
    "TracingConfig",
]
