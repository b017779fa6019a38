"""Tools as data: what a tool is, where it comes from, and the MCP servers that provide some."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolSpec

__all__ = ["MCPServerSpec", "ToolDef"]


class ToolDef(BaseModel):
    """A tool the sandbox can run, with the policy that goes with it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: Name
    description: str
    parameters: JsonSchema = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments (an object schema).",
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema the result's data must satisfy, if any."
    )
    timeout_s: float = Field(default=30.0, gt=0.0, le=3600.0, description="Wall time per call.")
    retries: int = Field(default=0, ge=0, le=5, description="Re-runs after a retryable failure.")
    side_effects: bool = Field(
        default=False, description="Changes the world: runs at most once per idempotency key."
    )
    requires_approval: bool = Field(default=False, description="A human must approve each call.")
    isolated: bool = Field(default=False, description="Runs in an isolated child process.")
    tags: tuple[str, ...] = Field(default=(), description="For discovery.")
    source: str = Field(default="builtin", description="'builtin' or 'mcp:<server>'.")

    def spec(self) -> ToolSpec:
        """What a model is told about the tool."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


class MCPServerSpec(BaseModel):
    """An MCP server whose tools the sandbox offers: a command (stdio) or a URL (HTTP)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: Name = Field(description="Server name; its tools record 'mcp:<name>' as source.")
    transport: Literal["stdio", "http"] = "stdio"
    command: tuple[str, ...] = Field(default=(), description="stdio: the program and its args.")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: its environment.")
    url: str | None = Field(default=None, description="http: the streamable-HTTP endpoint.")
    timeout_s: float = Field(default=30.0, gt=0.0, description="Per call.")
    side_effects: bool = Field(default=True, description="Treat its tools as side-effecting.")

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPServerSpec:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs a command")
        if self.transport == "http" and not self.url:
            raise ValueError("an http MCP server needs a url")
        return self
