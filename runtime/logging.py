"""Structured logging, configured once per process (see :mod:`raytroupe.actors.telemetry.logs`)."""

from __future__ import annotations

from raytroupe.actors.spawn import configure_logging, configure_worker_logging

__all__ = ["configure_logging", "configure_worker_logging"]
