"""Sessions: the jobs of one conversation, and the history each new job is shown.

A session belongs to one tenant. Each job submitted in it sees the session's earlier turns
(its tasks and their answers), the oldest of them summarized once they outgrow the history's
token budget; the job's own answer joins the history when it succeeds.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from raytroupe.protocols.job_context import EndUser, checked_id

__all__ = [
    "HISTORY_TOKENS",
    "MAX_HISTORY_TOKENS",
    "MIN_HISTORY_TOKENS",
    "SESSION_ID",
    "SessionId",
    "SessionInfo",
    "SessionTurn",
    "checked_session_id",
]

SESSION_ID: Final = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
"""A session id: chosen by the caller (an OpenAI ``user``, a chat's id) or made for it."""

HISTORY_TOKENS: Final = 2000
"""Tokens of history a job of a session is shown by default (summary and turns together)."""

MIN_HISTORY_TOKENS: Final = 200
MAX_HISTORY_TOKENS: Final = 32_000

SessionId = Annotated[str, StringConstraints(pattern=SESSION_ID)]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class SessionTurn(_Data):
    """One job of a session: what was asked, and its answer once it succeeded."""

    seq: int = Field(ge=1, description="Its place in the session, from 1.")
    job_id: str
    task: str = Field(description="The task as the caller wrote it (without the history).")
    status: Literal["running", "succeeded", "failed", "cancelled"] = "running"
    answer: str | None = Field(default=None, description="The job's answer, once it succeeded.")
    at: float = Field(description="When the job was submitted (UNIX time).")


class SessionInfo(_Data):
    """A session of a tenant: its turns, and the summary of those no longer shown whole."""

    id: SessionId
    tenant: str
    title: str = ""
    user: EndUser | None = Field(
        default=None,
        description="The tenant's end user it is for: only that user's jobs join it (a job "
        "that names no user is that user's).",
    )
    created_at: float
    updated_at: float
    turns: tuple[SessionTurn, ...] = Field(
        default=(), description="Its jobs, oldest first (empty in listings)."
    )
    history_tokens: int = Field(
        default=HISTORY_TOKENS,
        ge=MIN_HISTORY_TOKENS,
        le=MAX_HISTORY_TOKENS,
        description="Tokens of history each job is shown, at most (summary and turns).",
    )
    summary: str = Field(default="", description="What the summarized turns said.")
    summarized_through: int = Field(
        default=0, ge=0, description="Turns up to this seq are shown as the summary only."
    )


def checked_session_id(session_id: Any) -> str:
    """``session_id`` if it is a valid session id.

    Raises:
        InvalidInput: it is not.
    """
    says = "a session id is 1-128 letters, digits and ._:@- (starting with a letter or digit)"
    return checked_id(session_id, SESSION_ID, field="session", says=says)
