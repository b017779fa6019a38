"""Where durable state is kept, as configured: the PostgreSQL URL's checks, and its redaction.

The stores themselves (SQLite, PostgreSQL) are ``raytroupe.actors.state``'s.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from raytroupe.protocols.errors import ConfigError

__all__ = ["checked_state_url", "is_postgres", "redact_url", "state_url"]


def state_url(value: str) -> str:
    """``value`` if it names a PostgreSQL database (``postgresql://[user@]host[:port]/name``).

    Raises:
        ValueError: it does not (pydantic turns this into the config error of its field).
    """
    parts = urlsplit(value)
    if not is_postgres(value) or not parts.hostname or parts.path.strip("/") == "":
        raise ValueError(
            f"{redact_url(value)!r} is not a PostgreSQL URL like "
            "'postgresql://user@host:5432/name' (leave it out for SQLite files)"
        )
    return value


def checked_state_url(value: str, *, field: str, said_as: str | None = None) -> str:
    """:func:`state_url`, for a value from outside pydantic (a flag, a variable, an argument).

    Raises:
        ConfigError: not a PostgreSQL URL; the message starts with ``said_as`` (what the user
            wrote it as), ``detail['field']`` is ``field``.
    """
    try:
        return state_url(value)
    except ValueError as exc:
        raise ConfigError(f"{said_as}: {exc}" if said_as else str(exc), field=field) from None


def is_postgres(location: str | Path) -> bool:
    """Whether ``location`` names a PostgreSQL server rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def redact_url(location: str | Path) -> str:
    """``location`` fit for logs and errors: a URL's password replaced by ``***``."""
    text = str(location)
    parts = urlsplit(text)
    if "@" not in parts.netloc or parts.password is None:
        return text
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
