"""A job as it is ordered: what is asked and what runs it, and on whose behalf.

:class:`JobOrder` is what a caller may say about a job (the ``submit`` operation's body, a
driver's ``submit``, an OpenAI chat, a graph node's child job, an eval case); :class:`Submitter`
is who says it, which only the surface it came through may set (its key's tenant, whether
the key is an admin's, the request's id and trace). The front desk admits the two together
and makes the job's :class:`~raytroupe.protocols.job_context.JobContext` from them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.inputs import Attachment
from raytroupe.protocols.intent import IntentConfig
from raytroupe.protocols.job_context import EndUser, History
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import Budget
from raytroupe.protocols.team import TeamSpec

__all__ = ["JobOrder", "Submitter"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class JobOrder(_Data):
    """A job as a caller orders it, before the front desk admits it."""

    task: str = Field(default="", description="What is asked (may be empty for a skill).")
    team: TeamSpec | str | None = Field(
        default=None, description="A team, or the name of a registered one."
    )
    skill: str | None = Field(default=None, description="A skill to run: 'name[@version]'.")
    input: Any = Field(
        default=None, description="A skill's structured input, or a graph team's first state."
    )
    attachments: tuple[Attachment, ...] = Field(
        default=(), description="Text files (part of its context) and images (shown to agents)."
    )
    budget: Budget | None = Field(default=None, description="Overrides the team's.")
    user: EndUser | None = Field(
        default=None,
        description="The tenant's end user the job is for: kept with the job, its usage and "
        "its model calls (per-user spend limits).",
    )
    session: str | None = Field(
        default=None, description="A session of the caller's tenant: its history is shown."
    )
    history: History = Field(
        default_factory=History,
        description="The conversation before the task as the caller gives it (an OpenAI "
        "chat's earlier messages); shown before a session's own turns.",
    )
    teams: dict[str, TeamSpec] | None = Field(
        default=None, description="Teams to choose among by ``intent`` (a driver's)."
    )
    intent: IntentConfig | None = Field(
        default=None, description="How a team is chosen among ``teams``."
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="The JSON Schema its answer must satisfy (a driver's type)."
    )
    stream_answer: bool = Field(
        default=False, description="Its caller streams the answer (the OpenAI endpoint)."
    )


class Submitter(_Data):
    """On whose behalf a job is ordered: what the surface it came through knows."""

    tenant: str = "default"
    admin: bool = Field(
        default=True,
        description="An admin's job (an admin key, a driver): no tenant policy applies.",
    )
    by: str | None = Field(default=None, description="An API key's name, ``driver``, ``eval``.")
    request_id: str | None = Field(default=None, description="The HTTP request's id.")
    traceparent: str | None = Field(
        default=None, description="The caller's OpenTelemetry span (W3C), continued."
    )
    account: str | None = Field(
        default=None,
        description="A graph node's child job: the parent job whose budget account it draws "
        "on (the orchestrator's to set).",
    )
