"""Structured logging, configured once per process.

A driver configures it (``raytroupe.runtime.connect``, the CLI) for people to read; every raytroupe
actor configures it as it starts (see :func:`raytroupe.actors.lifecycle.with_lifecycle`), as JSON
lines on stderr, which Ray keeps in the worker's log file. Not a Ray ``worker_process_setup_hook``:
a job-wide ``runtime_env`` keeps Ray from handing the job the workers it started ahead, which cost a
cold start about a second on two cores.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

__all__ = ["configure_logging", "configure_worker_logging"]

_configured = False


def configure_logging(level: str | None = None, *, json: bool = False) -> None:
    """Configure structlog for this process (later calls change nothing).

    ``level`` defaults to ``$TROUPE_LOG_LEVEL`` or ``info``. Lines carry the bound context
    (``job_id``, ``msg_id``, ``agent`` ...), a timestamp and the level.
    """
    global _configured  # noqa: PLW0603 - one flag guards the one process-wide configuration
    if _configured:
        return
    name = (level or os.environ.get("TROUPE_LOG_LEVEL", "info")).upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    _configured = True


def configure_worker_logging() -> None:
    """An actor process's logging: JSON lines on stderr (a driver's own setup wins)."""
    configure_logging(json=True)
