"""Conventions shared by the orchestrator's prompts and the models that answer them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from raytroupe.protocols.json_data import JsonSchema

__all__ = [
    "CONTEXT_HEADINGS",
    "EXAMPLES_HEADING",
    "HISTORY_HEADING",
    "KNOWLEDGE_HEADING",
    "RESULTS_HEADING",
    "plan_schema",
    "request_of",
]

RESULTS_HEADING: Final = "Subtask results:"
"""Heading under which an aggregation prompt lists one subtask result per line."""

HISTORY_HEADING: Final = "The conversation so far (earlier turns of this session, oldest first):"
"""Heading of a session's history, after the task of a job of the session."""

EXAMPLES_HEADING: Final = (
    "Examples: similar earlier jobs that succeeded (for reference; the request above may differ):"
)
"""Heading of the episodes offered to a job, after its task (and its history)."""

KNOWLEDGE_HEADING: Final = (
    "Passages from your knowledge bases (cite those you use as [source#position]):"
)
"""Heading of the knowledge passages an agent is shown, one ``[source#position] text`` line each."""

CONTEXT_HEADINGS: Final = (HISTORY_HEADING, EXAMPLES_HEADING)
"""Headings of what a job's task is followed by as context (never part of the request)."""


def request_of(task: str) -> str:
    """``task`` without the context that follows it (a session's history, examples)."""
    cut = len(task)
    for heading in CONTEXT_HEADINGS:
        at = task.find(f"\n\n{heading}\n")
        if at != -1:
            cut = min(cut, at)
    return task[:cut]


def plan_schema(roles: Mapping[str, str], max_subtasks: int = 32) -> JsonSchema:
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
