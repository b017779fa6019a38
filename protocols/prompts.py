"""Prompts' text: a job's context, lessons and knowledge passages, rendered in one place.

A job's context is a typed value (:class:`~raytroupe.protocols.job_context.JobContext`);
these functions are the only ones that turn it into text, for the planner, the agents, the
aggregator and the skills alike. The headings are shared with the offline models, which read
prompts as a model would.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from raytroupe.protocols.job_context import Example, History, JobContext, TextFile
from raytroupe.protocols.json_data import JsonSchema

__all__ = [
    "CONTEXT_HEADINGS",
    "EXAMPLES_HEADING",
    "HISTORY_HEADING",
    "KNOWLEDGE_HEADING",
    "LESSONS_HEADING",
    "RESULTS_HEADING",
    "asked",
    "job_prompt",
    "knowledge_text",
    "lessons_text",
    "plan_schema",
    "request_text",
]

RESULTS_HEADING: Final = "Subtask results:"
"""Heading under which an aggregation prompt lists one subtask result per line."""

HISTORY_HEADING: Final = "The conversation so far (earlier turns, oldest first):"
"""Heading of a job's history (its session's, or its caller's), after what it was asked."""

EXAMPLES_HEADING: Final = (
    "Examples: similar earlier jobs that succeeded (for reference; the request above may differ):"
)
"""Heading of the episodes offered to a job, after its task (and its history)."""

KNOWLEDGE_HEADING: Final = (
    "Passages from your knowledge bases (cite those you use as [source#position]):"
)
"""Heading of the knowledge passages an agent is shown, one ``[source#position] text`` line each."""

LESSONS_HEADING: Final = "Lessons from earlier jobs of this skill:"
"""Heading of a skill's lessons, one ``- lesson`` line each."""

CONTEXT_HEADINGS: Final = (HISTORY_HEADING, EXAMPLES_HEADING)
"""Headings of what a job's prompt shows after what was asked (never part of the request)."""


def asked(context: JobContext) -> str:
    """What the job was asked: the request, then the text of each attachment under its name."""
    return "\n\n".join([context.request, *(_file(f) for f in context.files)])


def job_prompt(context: JobContext) -> str:
    """The job as its planner, agents and aggregator read it.

    What was asked, then its session's history and the examples offered to it, each under
    its heading. What was asked comes first: it is the question; the rest is what it may draw on.
    """
    lines = [asked(context)]
    if context.history:
        lines += ["", *_history(context.history)]
    if context.examples:
        lines += ["", *_examples(context.examples)]
    return "\n".join(lines)


def request_text(task: str, data: Any) -> str:
    """What a skill is asked: the task, and its structured input under it."""
    if data is None:
        return task
    shown = json.dumps(data, ensure_ascii=False, indent=1)
    return f"{task}\n\nInput (JSON):\n{shown}" if task.strip() else f"Input (JSON):\n{shown}"


def lessons_text(lessons: Iterable[str]) -> str:
    """A skill's lessons under their heading ('' for none)."""
    shown = [f"- {lesson}" for lesson in lessons]
    return "\n".join([LESSONS_HEADING, *shown]) if shown else ""


def knowledge_text(passages: Iterable[tuple[str, int, str]]) -> str:
    """Knowledge passages ``(source, position, text)`` under their heading ('' for none)."""
    shown = [f"[{source}#{position}] {_one_line(text)}" for source, position, text in passages]
    return "\n".join([KNOWLEDGE_HEADING, *shown]) if shown else ""


def _file(file: TextFile) -> str:
    return f"--- file: {file.name} ({file.media_type}) ---\n{file.text.strip()}"


def _history(history: History) -> list[str]:
    lines = [HISTORY_HEADING]
    if history.summary:
        lines.append(f"Summary of earlier turns: {history.summary}")
    lines += [f"{turn.role}: {_one_line(turn.text)}" for turn in history.turns]
    return lines


def _examples(examples: tuple[Example, ...]) -> list[str]:
    lines = [EXAMPLES_HEADING]
    for n, example in enumerate(examples, 1):
        lines.append(f"[{n}] request: {_one_line(example.request)}")
        if example.plan:
            lines.append(f"    plan: {_one_line(example.plan)}")
        if example.tools:
            lines.append(f"    tools called: {_one_line(example.tools)}")
        lines.append(f"    answer: {_one_line(example.answer)}")
    return lines


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
