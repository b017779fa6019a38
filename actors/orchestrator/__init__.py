"""The orchestrator actor and its planning helpers."""

from raytroupe.actors.orchestrator.actor import Orchestrator, TeamProvisioner
from raytroupe.actors.orchestrator.planner import aggregate_request, parse_plan, plan_request

__all__ = ["Orchestrator", "TeamProvisioner", "aggregate_request", "parse_plan", "plan_request"]
