"""Sessions: conversations whose jobs see the turns before them.

A session is its tenant's, an admin's key's too: another tenant's session is
``SessionNotFound``, as if there were none. A job joins one with ``session_id`` on submit.
The driver's :meth:`~raytroupe.runtime.driver.Runtime.session` is a handle on one (its
``info()`` answers :func:`session`), through which jobs are submitted into it.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, Field

from raytroupe.protocols.job_context import EndUser
from raytroupe.protocols.sessions import (
    HISTORY_TOKENS,
    MAX_HISTORY_TOKENS,
    MIN_HISTORY_TOKENS,
    SessionId,
    SessionInfo,
)
from raytroupe.runtime.operations.declare import At, WireName, operation

__all__ = ["create_session", "delete_session", "session", "sessions"]

TAG: Final = "sessions"


def _no_nul(title: str) -> str:
    if "\x00" in title:  # PostgreSQL keeps no NUL in text
        raise ValueError("a title cannot hold a NUL character (U+0000)")
    return title


Title = Annotated[str, Field(max_length=200), AfterValidator(_no_nul)]
HistoryTokens = Annotated[
    int,
    Field(
        ge=MIN_HISTORY_TOKENS,
        le=MAX_HISTORY_TOKENS,
        description="Tokens of history each of its jobs is shown, at most.",
    ),
]


@operation("POST", "/v1/sessions", cli="sessions new", status=201)
async def create_session(
    at: At,
    session_id: Annotated[SessionId | None, WireName("id")] = None,
    *,
    title: Title = "",
    history_tokens: HistoryTokens = HISTORY_TOKENS,
    user: EndUser | None = None,
) -> SessionInfo:
    """Start a session of the caller's tenant (or go on with the one it has of that id).

    ``session_id`` (``id`` in the JSON body) defaults to a fresh one; ``title`` and
    ``history_tokens`` apply to a new session; ``user``, the tenant's end user a new session
    is for: only that user's jobs join it (a job naming no user is taken as that user's).

    Raises:
        Forbidden: the tenant's session of that id is another end user's.
    """
    return await at.system.create_session(
        at.tenant, session_id, title=title, history_tokens=history_tokens, user=user
    )


@operation("GET", "/v1/sessions", cli="sessions list")
async def sessions(
    at: At, limit: Annotated[int, Field(ge=1, le=1000)] = 100, user: EndUser | None = None
) -> list[SessionInfo]:
    """The tenant's sessions, the most recently used first (without their turns).

    ``user``: the sessions of that end user of the tenant only.
    """
    return await at.system.sessions(tenant=at.tenant, limit=limit, user=user)


@operation("GET", "/v1/sessions/{session_id}", cli="sessions show")
async def session(at: At, session_id: SessionId) -> SessionInfo:
    """The session: its turns (task, status, answer), and the summary of the oldest.

    Raises:
        SessionNotFound: the tenant has no session of that id.
    """
    return await at.system.session(session_id, tenant=at.tenant)


@operation("DELETE", "/v1/sessions/{session_id}", cli="sessions delete")
async def delete_session(at: At, session_id: SessionId) -> None:
    """Forget the session (its jobs stay).

    Raises:
        SessionNotFound: the tenant has no session of that id.
    """
    await at.system.delete_session(session_id, tenant=at.tenant)
