"""A job's context as one typed value: what was asked, and what the job is shown beside it.

The caller's request stays the request. A session's earlier turns, the episodes its team or
skill offers, the text of its attachments and a team skill's lessons are fields beside it,
filled in by whoever knows them (the front desk, the job's shard), journaled with the job,
and turned into text in one place only, :mod:`raytroupe.protocols.prompts`. Nothing reads
them back out of a prompt.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from raytroupe.protocols.errors import InvalidInput
from raytroupe.protocols.guardrails import BoundGuardrail

__all__ = [
    "END_USER",
    "EndUser",
    "Example",
    "History",
    "JobContext",
    "Role",
    "TextFile",
    "Turn",
    "checked_end_user",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]
"""Who said a turn of a conversation (OpenAI's roles; a session's turns are users' and
assistants')."""


END_USER: Final = r"^[A-Za-z0-9][A-Za-z0-9_.@:+=-]{0,127}$"
EndUser = Annotated[str, StringConstraints(pattern=END_USER)]
"""One of a tenant's own users, as the tenant names them (an id, an e-mail address): 1-128
letters, digits and ``_.@:+=-``. The tenant's word: it scopes that tenant's records only."""


def checked_id(value: Any, pattern: str, *, field: str, says: str) -> str:
    """``value`` if it is a string matching ``pattern`` (an id a caller gave).

    Raises:
        InvalidInput: it is not (``says`` what an id is; ``field`` names it).
    """
    if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
        raise InvalidInput(says, field=field)
    return value


def checked_end_user(user: Any) -> str:
    """``user`` if it is a valid end user id.

    Raises:
        InvalidInput: it is not.
    """
    says = "an end user is 1-128 letters, digits and _.@:+=- (starting with a letter or digit)"
    return checked_id(user, END_USER, field="user", says=says)


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TextFile(_Data):
    """A text attachment, as the job's agents read it."""

    name: str = Field(description="File name, shown to the model.")
    media_type: str = Field(description="MIME type, e.g. text/markdown.")
    text: str


class Turn(_Data):
    """One earlier turn of a conversation."""

    role: Role
    text: str


class History(_Data):
    """What a job is shown of the conversation before it: its session's, or its caller's."""

    summary: str = Field(default="", description="Earlier turns, summarized.")
    turns: tuple[Turn, ...] = Field(default=(), description="The newest turns, whole.")

    def __bool__(self) -> bool:
        return bool(self.summary or self.turns)


class Example(_Data):
    """An earlier job of the same team or skill that succeeded (an episode), offered as one."""

    request: str
    plan: str = ""
    tools: str = ""
    answer: str = ""


class JobContext(_Data):
    """What a job was asked, and what it is shown beside it."""

    request: str = Field(description="The task as the caller wrote it.")
    files: tuple[TextFile, ...] = Field(default=(), description="Its text attachments.")
    history: History = Field(
        default_factory=History,
        description="The conversation before it: its session's, or the one its caller gave.",
    )
    examples: tuple[Example, ...] = Field(
        default=(), description="Episodes of its team or skill, offered as examples."
    )
    session: str | None = Field(
        default=None, description="The session it is a turn of (its history is the session's)."
    )
    lessons: tuple[str, ...] = Field(
        default=(), description="A team skill's lessons, recalled for this request."
    )
    user: EndUser | None = Field(
        default=None, description="The tenant's end user it is for (the caller's word)."
    )
    guardrails: tuple[BoundGuardrail, ...] = Field(
        default=(),
        description="The guardrails that bind it, the versions set when it was admitted.",
    )
