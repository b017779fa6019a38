"""The job shards (``orchestrator/<k>``) and their planning helpers."""

from raytroupe.actors.orchestrator.actor import Orchestrator
from raytroupe.actors.orchestrator.planner import aggregate_request, parse_plan, plan_request

__all__ = ["Orchestrator", "aggregate_request", "parse_plan", "plan_request"]
