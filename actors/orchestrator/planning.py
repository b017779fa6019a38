"""Planning and aggregation requests, and turning a planner's answer into a valid ``Plan``."""

from __future__ import annotations

import json

from pydantic import ValidationError

from protocols import (
    ChatMessage,
    LLMRequest,
    Plan,
    PlanError,
    SubtaskResult,
    TeamSpec,
)
from protocols.prompts import RESULTS_HEADING, plan_schema

__all__ = ["aggregate_request", "parse_plan", "plan_request", "role_descriptions"]

_PLANNER = (
    "You are the planner of a team of agents. Split the user's task into subtasks that can run "
    "in parallel where possible. Give each subtask an id, the role of the agent that should do "
    "it, clear instructions, and the ids it depends on. Answer with JSON only."
)
_AGGREGATOR = (
    "You combine the results of subtasks into one answer to the task. Keep every fact; say "
    "which subtask it came from when that helps."
)


def role_descriptions(team: TeamSpec) -> dict[str, str]:
    """Per role: which agents hold it and which tools they have, for the planner."""
    described = {}
    for role in team.roles:
        agents = [a for a in team.agents if a.role == role]
        tools = sorted({t for a in agents for t in a.tools})
        described[role] = (
            f"agents: {', '.join(a.name for a in agents)}; tools: {', '.join(tools) or 'none'}"
        )
    return described


def plan_request(task: str, team: TeamSpec) -> LLMRequest:
    """The request that asks the team's planner model for a plan."""
    described = role_descriptions(team)
    roles = "; ".join(f"{r} ({d})" for r, d in described.items())
    return LLMRequest(
        model=team.planner_model,
        purpose="plan",
        messages=(
            ChatMessage(role="system", content=f"{_PLANNER} Available roles: {roles}."),
            ChatMessage(role="user", content=task),
        ),
        response_format=plan_schema(described),
        temperature=0.0,
    )


def parse_plan(text: str, team: TeamSpec) -> Plan:
    """Validate a planner's answer.

    Raises:
        PlanError: not JSON, not a DAG of subtasks, or a role the team lacks.
    """
    try:
        plan = Plan.model_validate(json.loads(text))
    except json.JSONDecodeError as e:
        raise PlanError(f"planner answer is not JSON: {e}", answer=text[:2000]) from None
    except ValidationError as e:
        problems = [err["msg"] for err in e.errors(include_url=False)[:10]]
        raise PlanError(
            f"planner answer is not a valid plan: {problems}", answer=text[:2000]
        ) from None
    unknown = sorted({s.role for s in plan.subtasks} - set(team.roles))
    if unknown:
        raise PlanError(f"plan uses roles the team lacks: {unknown}", roles=unknown)
    return plan


def aggregate_request(task: str, results: list[SubtaskResult], team: TeamSpec) -> LLMRequest:
    """The request that asks the planner model to combine subtask results into one answer."""
    lines = "\n".join(f"- {r.instructions}: {r.output.strip()}" for r in results)
    return LLMRequest(
        model=team.planner_model,
        purpose="aggregate",
        messages=(
            ChatMessage(role="system", content=_AGGREGATOR),
            ChatMessage(role="user", content=f"Task:\n{task}\n\n{RESULTS_HEADING}\n{lines}"),
        ),
        temperature=0.0,
    )
