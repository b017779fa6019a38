"""Plans sized to the task, work sent to a role with the tools it needs, answers assembled.

A team with ``planning: auto`` (the default) has its jobs sized here before any model call
(:func:`sized_plan`): a task of one part is one subtask, and the agent's answer is the job's
(no planner call, no aggregation call: a job costs what a single agent's loop costs); a task
listing independent questions is one subtask per question, each given the text the questions
share rather than the whole task (not an arithmetic question written out in full, which needs
none of it), their answers assembled in the order asked
(:func:`assembled`). What a part is is ``raytroupe.protocols.task_shape``'s reading of the text.

Each subtask goes to a role whose agents have the tools its text needs (:func:`role_for`); the
same rule repairs a planner model's plan that gives such work to a role without the tool
(:func:`tool_repairs`).
"""

from __future__ import annotations

from raytroupe.protocols import Plan, PlannedSubtask, SubtaskResult, TeamSpec
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.prompts import asked
from raytroupe.protocols.task_shape import needs_arithmetic, stands_alone, task_parts

__all__ = [
    "CALCULATOR",
    "assembled",
    "needed_tools",
    "role_for",
    "sized_plan",
    "subtask_context",
    "tool_repairs",
]

CALCULATOR = "calculator"


def needed_tools(text: str, team: TeamSpec, context: str = "") -> frozenset[str]:
    """The tools of ``team`` that work on ``text`` needs (its numbers may be in ``context``).

    The calculator, for arithmetic.
    """
    held = {t for a in team.agents for t in a.tools}
    needed = {CALCULATOR} if CALCULATOR in held and needs_arithmetic(text, context) else set()
    return frozenset(needed)


def role_for(text: str, team: TeamSpec, context: str = "") -> str:
    """The role that should do ``text``: the first whose agents have every tool it needs.

    Work that needs no tool goes to the first role whose agents have no tools, if any (a
    calculator role is not asked to read a text), else to the team's first role.
    """
    needed = needed_tools(text, team, context)
    tools = {r: {t for a in team.agents if a.role == r for t in a.tools} for r in team.roles}
    if needed:
        able = [r for r in team.roles if needed <= tools[r]]
        return able[0] if able else team.roles[0]
    plain = [r for r in team.roles if not tools[r]]
    return plain[0] if plain else team.roles[0]


def sized_plan(context: JobContext, team: TeamSpec) -> Plan:
    """The job's plan, sized by what it was asked (see the module's docstring).

    More listed parts than the team's ``max_subtasks`` make one subtask of the whole task: a
    single agent answering every part beats parts silently joined. The one subtask of a
    whole task is what was asked; its agent sees the rest of the job's context beside it.
    """
    task = asked(context)
    shape = task_parts(task)
    if not shape.split or len(shape.parts) > team.max_subtasks:
        whole = PlannedSubtask(id="s1", role=role_for(task, team), instructions=task)
        return Plan(subtasks=(whole,), sizing="one")
    subtasks = tuple(
        PlannedSubtask(
            id=f"s{n}",
            role=role_for(part.text, team, shape.context),
            instructions=part.text,
            context="" if stands_alone(part.text) else shape.context,
        )
        for n, part in enumerate(shape.parts, start=1)
    )
    return Plan(subtasks=subtasks, sizing="parts")


def subtask_context(context: JobContext, sub: PlannedSubtask) -> JobContext:
    """The job's context as ``sub``'s agent is given it.

    A part of a sized task is given the text the parts share in place of what was asked
    (the attachments' text is in it), with the rest of the context; a part that stands
    alone, nothing. Any other subtask is given the job's whole context. Lessons are the
    planner's and the aggregator's: no agent is given them.
    """
    if sub.context is None:
        return context.model_copy(update={"lessons": ()})
    if not sub.context:
        return JobContext(request="")
    return context.model_copy(update={"request": sub.context, "files": (), "lessons": ()})


def assembled(task: str, plan: Plan, results: list[SubtaskResult]) -> str:
    """The answer of a sized plan: the one answer, or each part's under its marker, in order."""
    outputs = {r.id: r.output.strip() for r in results}
    if plan.sizing == "one" or len(plan.subtasks) == 1:
        return outputs.get(plan.subtasks[0].id, "")
    markers = [p.marker for p in task_parts(task).parts]
    if len(markers) != len(plan.subtasks):  # the task is not the one sized: number them
        markers = [f"{n}." for n in range(1, len(plan.subtasks) + 1)]
    pairs = zip(markers, plan.subtasks, strict=True)
    return "\n".join(f"{marker} {outputs.get(s.id, '')}" for marker, s in pairs)


def tool_repairs(plan: Plan, team: TeamSpec) -> tuple[Plan, list[str]]:
    """``plan`` with work that needs a tool moved to a role that has it; each move described."""
    tools = {r: {t for a in team.agents if a.role == r for t in a.tools} for r in team.roles}
    repairs: list[str] = []
    subtasks = []
    for sub in plan.subtasks:
        needed = needed_tools(sub.instructions, team)
        role = role_for(sub.instructions, team) if needed - tools[sub.role] else sub.role
        if role != sub.role and needed <= tools[role]:
            repairs.append(
                f"subtask {sub.id!r} needs {', '.join(sorted(needed))}: moved from role "
                f"{sub.role!r} to {role!r}"
            )
            subtasks.append(sub.model_copy(update={"role": role}))
        else:
            subtasks.append(sub)
    if not repairs:
        return plan, repairs
    return plan.model_copy(update={"subtasks": tuple(subtasks)}), repairs
