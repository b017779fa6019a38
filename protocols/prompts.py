"""Conventions shared by the orchestrator's prompts and the models that answer them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["RESULTS_HEADING", "plan_schema"]

RESULTS_HEADING: Final = "Subtask results:"
"""Heading under which an aggregation prompt lists one subtask result per line."""


def plan_schema(roles: Mapping[str, str], max_subtasks: int = 32) -> dict[str, Any]:
    """JSON Schema of a plan whose subtasks may only name ``roles`` (role -> description).

    A plan has 1 to ``max_subtasks`` subtasks; each may carry an ``output_schema``, the JSON
    Schema its output must satisfy.
    """
    return {
        "type": "object",
        "properties": {
            "subtasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_subtasks,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"},
                        "role": {
                            "type": "string",
                            "oneOf": [{"const": r, "description": d} for r, d in roles.items()],
                        },
                        "instructions": {"type": "string", "minLength": 1},
                        "depends_on": {"type": "array", "items": {"type": "string"}},
                        "output_schema": {
                            "type": "object",
                            "description": "Optional JSON Schema (2020-12) the subtask's "
                            "output must satisfy, when it must be structured data.",
                        },
                    },
                    "required": ["id", "role", "instructions"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["subtasks"],
        "additionalProperties": False,
    }
