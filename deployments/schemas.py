"""JSON Schemas of the configuration files, for editors (and for checking files in CI).

``troupe config schema DIR`` writes them; the copies under ``deployments/schemas/`` are kept
current by a test. A YAML file points its editor at one with a first line such as
``# yaml-language-server: $schema=schemas/troupe.schema.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from raytroupe.deployments.config import APIConfig
from raytroupe.protocols import TeamSpec
from raytroupe.protocols.config.llm import LLMConfig
from raytroupe.protocols.config.system import SystemConfig

__all__ = ["CONFIG_FILES", "SHIPPED", "export", "schema_text"]

CONFIG_FILES: dict[str, type[BaseModel]] = {
    "troupe.schema.json": SystemConfig,  # troupe.yaml: the system actors
    "api.schema.json": APIConfig,  # the Serve application's args
    "llm.schema.json": LLMConfig,  # the LLM pool
    "team.schema.json": TeamSpec,  # a team file
}

SHIPPED = Path(__file__).parent / "schemas"
"""Where the repository keeps them, beside the configs that use them."""


def schema_text(model: type[BaseModel]) -> str:
    """``model``'s JSON Schema (what a file of it may hold), as stable, indented text."""
    schema = model.model_json_schema(mode="validation")
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def export(directory: Path) -> list[Path]:
    """Write every configuration file's schema into ``directory``; the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in CONFIG_FILES.items():
        path = directory / name
        path.write_text(schema_text(model), encoding="utf-8")
        written.append(path)
    return written
