"""The orchestrator actor and its planning helpers."""

from actors.orchestrator.actor import Orchestrator, TeamProvisioner
from actors.orchestrator.planner import aggregate_request, parse_plan, plan_request

__all__ = ["Orchestrator", "TeamProvisioner", "aggregate_request", "parse_plan", "plan_request"]
