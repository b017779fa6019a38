"""Graphs the unit tests (in one process) and the Ray tests both run."""

from __future__ import annotations

from typing import Any

NESTED: dict[str, Any] = {
    "start": "write",
    "answer": "final",
    "state": {"json_schema": {"type": "object", "properties": {
        "draft": {"type": "string"}, "final": {"type": "string"}}}},
    "nodes": [
        {"id": "write", "role": "outer", "writes": ["draft"], "instructions": "{task}"},
        {"id": "loud", "inputs": {"text": "draft"}, "outputs": {"final": "out"}, "graph": {
            "start": "upper",
            "state": {"json_schema": {"type": "object", "properties": {
                "text": {"type": "string"}, "out": {"type": "string"}}}},
            "nodes": [{"id": "upper", "role": "inner", "writes": ["out"],
                       "instructions": "Shout {state.text}"}],
        }},
    ],
    "edges": [{"source": "write", "target": "loud"}],
}  # fmt: skip
"""A subgraph node: the inner graph's state from the outer's draft, its output back."""

PAUSED: dict[str, Any] = {
    "start": "draft",
    "answer": "text",
    "state": {"json_schema": {"type": "object", "properties": {
        "text": {"type": "string"}, "verdict": {"type": "string"}}}},
    "nodes": [
        {"id": "draft", "role": "writer", "writes": ["text"], "instructions": "Write {task}"},
        {"id": "publish", "role": "editor", "writes": ["text"], "interrupt": "before",
         "resume_field": "verdict", "instructions": "Publish {state.text}: {resume}"},
    ],
    "edges": [{"source": "draft", "target": "publish"}],
}  # fmt: skip
"""A pause before publishing: the person's word goes to ``verdict`` and into the prompt."""

CHAIN: dict[str, Any] = {
    "start": "one",
    "answer": "log",
    "state": {"json_schema": {"type": "object", "properties": {
        "log": {"type": "array", "items": {"type": "string"}}}}, "reducers": {"log": "append"}},
    "nodes": [
        {"id": "one", "role": "first", "writes": ["log"], "instructions": "one"},
        {"id": "two", "role": "middle", "writes": ["log"], "instructions": "two: {state.log}"},
        {"id": "three", "role": "last", "writes": ["log"], "instructions": "three"},
    ],
    "edges": [{"source": "one", "target": "two"}, {"source": "two", "target": "three"}],
}  # fmt: skip
"""Three nodes in a row, each appending its answer to the log."""
