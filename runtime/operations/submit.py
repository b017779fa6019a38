"""Starting a job: ``submit``, the one operation every surface starts a job by.

The job runs for the caller's tenant; a key's job is checked against its tenant's policy
(an admin's key's too, except what only admins may do). A team given inline is data: one
naming shipped functions is refused here, on every surface; a Python driver's
:meth:`~raytroupe.runtime.driver.Runtime.submit` (which ships a team's functions, and takes
what only a driver gives: teams to route among, an output type) starts the job through
:func:`start` as this operation does.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols import Attachment, Budget, InvalidRequest, TeamSpec
from raytroupe.protocols.http import JobAccepted
from raytroupe.protocols.job_context import EndUser
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.sessions import SessionId
from raytroupe.runtime.operations.declare import At, WireName, operation
from raytroupe.runtime.operations.surfaces import OLDER_FORM
from raytroupe.runtime.operations.teams import data_team

__all__ = ["session_id_keyword", "start", "submit"]

TAG: Final = "jobs"

Task = Annotated[
    str, Field(max_length=200_000, description="What is asked (may be empty for a skill's input).")
]
TeamName = Annotated[str, Field(min_length=1, max_length=64)]
SkillRef = Annotated[str, Field(min_length=1, max_length=81, description="'name[@version]'.")]
Attachments = Annotated[
    list[Attachment], Field(max_length=32, description="Text files and images for the job.")
]


@operation(
    "POST", "/v1/jobs", cli="run", status=202, location=lambda accepted: accepted.url
)  # fmt: skip
async def submit(
    at: At,
    task: Task = "",
    team: TeamSpec | TeamName | None = None,
    *,
    skill: SkillRef | None = None,
    input: Any = None,  # noqa: A002 - a skill's structured input, as the API calls it
    attachments: Attachments | None = None,
    budget: Budget | None = None,
    session: Annotated[SessionId | None, WireName("session_id")] = None,
    user: EndUser | None = None,
) -> JobAccepted:
    """Start a job; answers at once with its id (follow it with ``events`` or ``result``).

    ``team`` is a team, or the name of a registered one; with neither a team nor a
    ``skill`` (``name`` or ``name@version``), the job is routed among the skills and teams
    the caller may run. ``input`` is a skill's structured input (checked by its
    ``input_schema``), or a graph team's first state. ``budget`` overrides the team's.
    ``session`` (``session_id`` in the JSON body): a session of the caller's tenant, whose
    history the job sees and whose next turn it becomes. ``user``: the tenant's end user the
    job is for (an id the tenant chooses), kept with the job and its usage, and the account
    of per-user spend limits. Over HTTP a W3C ``traceparent`` header is continued.

    Raises:
        InvalidRequest: no task (and no input).
        Forbidden: the tenant's policy refuses a field (``detail['field']``), or the team
            names shipped functions.
        TeamNotFound, SkillNotFound: no such team or skill (for the caller).
    """
    if not task.strip() and input is None:  # as a body the schema refuses: nothing started
        said = "a job needs a task (or, for a skill, an input)"
        raise InvalidRequest(said, field="task", problems=[f"body.task: {said}"])
    inline = team if team is None or isinstance(team, str) else data_team(team)
    order = JobOrder(
        task=task, team=inline, skill=skill, input=input, attachments=tuple(attachments or ()),
        budget=budget, session=session, user=user,
    )  # fmt: skip
    job_id = await start(at, order)
    url = f"/v1/jobs/{job_id}"
    return JobAccepted(id=job_id, status="pending", url=url, events_url=f"{url}/events")


async def start(at: At, order: JobOrder) -> str:
    """``order`` started for ``at``: the job's id (what :func:`submit` runs, checks done).

    A driver's order may say more than the operation's body (``teams`` and ``intent`` to
    route among, an ``output_schema``); the caller is ``at``'s, whatever the order says.
    """
    caller = Submitter(
        tenant=at.tenant, admin=at.admin, by=at.name, request_id=at.request_id,
        traceparent=at.traceparent,
    )  # fmt: skip
    return await at.system.submit(order, caller)


def session_id_keyword(client: Any, *args: Any, **given: Any) -> Any:
    """The HTTP clients' older ``submit(..., session_id=...)``: ``session=``, with a warning."""
    if "session_id" not in given:
        return OLDER_FORM
    warnings.warn(
        "submit(session_id=...) is deprecated: submit(session=...)",
        DeprecationWarning,
        stacklevel=3,
    )
    given["session"] = given.pop("session_id")
    return client.submit(*args, **given)
