"""What the front desk checks and shapes a submission with, before it admits it.

Plain functions of a job's own fields (no desk state): the task and its attachments, the
answer schema, a budget's account, a graph job's input, a tenant's inline documents, an
admin's inline teams.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

from raytroupe.actors.orchestrator.admission import admit_attachments, admit_inline, scope_inline
from raytroupe.protocols import Attachment, Budget, InvalidInput, TeamSpec, TenantPolicy
from raytroupe.protocols.inputs import text_files
from raytroupe.protocols.job_context import History, JobContext
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.output_schema import check_output_schema
from raytroupe.protocols.prompts import job_prompt
from raytroupe.protocols.skill import SkillSpec

__all__ = [
    "admitted_documents",
    "checked_schema",
    "checked_task",
    "drawing_on",
    "no_account",
    "scoped_teams",
    "shaped",
    "state_input",
]


def no_account(budget: Budget | None) -> None:
    """Refuse a caller's budget that names an account (another job's budget to draw on).

    Raises:
        InvalidInput: it does.
    """
    if budget is not None and budget.account is not None:
        raise InvalidInput("budget.account is the orchestrator's to set", field="budget")


def drawing_on(budget: Budget | None, account: str | None) -> Budget | None:
    """A graph child's budget: its parent's, drawing on its parent's account."""
    if budget is None or account is None:
        return budget
    return budget.model_copy(update={"account": account})


def state_input(given: Any) -> dict[str, Any]:
    """A graph job's input: an object of its state's fields.

    Raises:
        InvalidInput: it is not an object.
    """
    if not isinstance(given, dict):
        raise InvalidInput("a graph job's input is an object of its state's fields", field="input")
    return given


def admitted_documents(
    tenant: str,
    policy_name: str,
    policy: TenantPolicy,
    attachments: Sequence[Attachment],
    *,
    team: TeamSpec | str | None,
    teams: Mapping[str, TeamSpec],
) -> tuple[TeamSpec | str | None, dict[str, TeamSpec]]:
    """A tenant's job's documents, admitted: its attachments, its inline team(s), scoped.

    Raises:
        Forbidden: a field the policy refuses.
        ConfigError: names too long once scoped.
        WorkLimitExceeded: (run within a budget) its schemas' patterns took too long.
    """
    admit_attachments(attachments, policy_name, policy)
    if isinstance(team, TeamSpec):
        team = admit_inline(team, tenant, policy_name, policy)
    return team, {k: admit_inline(t, tenant, policy_name, policy) for k, t in teams.items()}


def scoped_teams(
    tenant: str,
    team: TeamSpec | str | None,
    teams: Mapping[str, TeamSpec],
    registered: Set[str],
) -> tuple[TeamSpec | str | None, dict[str, TeamSpec]]:
    """An admin's job's inline team(s), named in ``tenant``'s scope (no policy checks them).

    Raises:
        ConfigError: names too long once scoped.
    """
    if isinstance(team, TeamSpec):
        team = scope_inline(team, tenant, registered=registered)
    return team, {k: scope_inline(t, tenant, registered=registered) for k, t in teams.items()}


def shaped(
    team: TeamSpec, skill: SkillSpec | None, schema: JsonSchema | None
) -> tuple[TeamSpec, SkillSpec | None]:
    """The job's team and skill, held to the job's own answer ``schema`` if it has one."""
    if schema is None:
        return team, skill
    update = {"output_schema": schema}
    return team.model_copy(update=update), skill and skill.model_copy(update=update)


def checked_schema(schema: JsonSchema | None) -> JsonSchema | None:
    """A job's ``output_schema``, if it is a usable JSON Schema.

    Raises:
        InvalidInput: it is not (the problem is named).
    """
    try:
        return check_output_schema(schema)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="output_schema") from None


def checked_task(
    task: str, attachments: Sequence[Attachment], history: History | None = None
) -> JobContext:
    """The job's context so far: the task, its text attachments, the history it was given.

    Raises:
        InvalidInput: any holds a NUL character (PostgreSQL keeps none in text).
    """
    context = JobContext(
        request=task, files=text_files(tuple(attachments)), history=history or History()
    )
    if "\x00" in job_prompt(context):
        raise InvalidInput(
            "the task (or a text attachment) contains a NUL character (U+0000), which "
            "the job's journal cannot keep: remove it",
            field="task",
        )
    return context
