"""JSON Schema export of the public models, for clients in other languages.

Usage: ``python -m raytroupe.protocols.schema DIR`` writes one ``<Model>.json`` per public model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from raytroupe.protocols.envelope import AgentMessage
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt
from raytroupe.protocols.jobs import DeadLetter, JobEvent, JobResult, Plan
from raytroupe.protocols.llm import LLMRequest, LLMResponse, ToolCall
from raytroupe.protocols.memory import MemoryHits, MemoryQuery, MemoryWrite
from raytroupe.protocols.payloads import ErrorPayload, Event, TaskRequest, TaskResult, ToolResult
from raytroupe.protocols.quality import StandardOutput
from raytroupe.protocols.skill import SkillSpec
from raytroupe.protocols.team import TeamSpec

__all__ = ["PUBLIC_MODELS", "export", "main"]

PUBLIC_MODELS: tuple[type[BaseModel], ...] = (
    SkillSpec,
    StandardOutput,
    AgentMessage,
    TaskRequest,
    TaskResult,
    LLMRequest,
    LLMResponse,
    ToolCall,
    ToolResult,
    Event,
    ErrorPayload,
    TeamSpec,
    Plan,
    JobResult,
    JobEvent,
    GraphCheckpoint,
    GraphInterrupt,
    DeadLetter,
    MemoryWrite,
    MemoryQuery,
    MemoryHits,
)


def export(directory: Path) -> list[Path]:
    """Write the JSON Schema of every public model into ``directory``; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for model in PUBLIC_MODELS:
        path = directory / f"{model.__name__}.json"
        schema = model.model_json_schema(mode="validation")
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m raytroupe.protocols.schema DIR", file=sys.stderr)
        return 2
    for path in export(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
