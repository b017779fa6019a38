"""Tools as data: what a tool is, where it comes from, and the MCP servers and A2A agents."""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolSpec

__all__ = ["A2A_TOOL_PREFIX", "A2AAgentSpec", "MCPServerSpec", "ToolDef"]


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
    source: str = Field(
        default="builtin", description="'builtin', 'mcp:<server>' or 'a2a:<agent>'."
    )

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


A2A_TOOL_PREFIX: Final = "a2a_"
"""An A2A agent's tool is named ``a2a_<name>``."""

_HEADER: Final = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_ENV_VAR: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HOP_HEADERS: Final = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "a2a-version"}
)


class A2AAgentSpec(BaseModel):
    """A remote A2A agent offered as one tool, ``a2a_<name>``: the operator's configuration.

    The agent's card is read from ``url`` (a base URL, whose card is
    ``/.well-known/agent-card.json``, or the card's own URL ending in ``.json``); its JSON-RPC
    interface must be at the same scheme, host and port. Every connection passes the tools'
    outbound policy (``ToolsConfig.network``): a loopback or private agent must be allowed
    there. Secrets are named, never written: ``headers_env`` maps a header to the environment
    variable that holds its value in the sandbox's process, sent only to that origin.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,59}$")] = Field(
        description="The agent's name here; its tool is 'a2a_<name>'."
    )
    url: str = Field(
        max_length=2048,
        description="http(s) base URL of the agent, or its agent card's URL (ending in .json).",
    )
    description: str | None = Field(
        default=None,
        max_length=2000,
        description="What the model is told; default: the card's description and skills "
        "(trimmed: the card is the remote's text).",
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0.0,
        le=3000.0,
        description="Wall time of one call, until the remote task ends; past it the task is "
        "canceled (best effort) and the call fails.",
    )
    side_effects: bool = Field(
        default=True,
        description="Treat the agent as side-effecting: one call per idempotency key.",
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP header -> name of the environment variable holding its value (e.g. "
        "{Authorization: PARTNER_AGENT_AUTH}); never a value itself.",
    )

    @property
    def tool_name(self) -> str:
        """The tool's name: ``a2a_<name>``."""
        return f"{A2A_TOOL_PREFIX}{self.name}"

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("credentials may not be written in the URL: use headers_env")
        if parts.query or parts.fragment:
            raise ValueError(f"{url!r}: a query or fragment is not taken")
        try:
            _ = parts.port
        except ValueError:
            raise ValueError(f"{url!r} has an invalid port") from None
        return url

    @field_validator("headers_env")
    @classmethod
    def _named_secrets(cls, headers: dict[str, str]) -> dict[str, str]:
        for header, variable in headers.items():
            if not _HEADER.match(header) or header.lower() in _HOP_HEADERS:
                raise ValueError(f"{header!r} is not a header that may be set")
            if not _ENV_VAR.match(variable):
                raise ValueError(
                    f"header {header!r}: {variable!r} is not an environment variable's name "
                    "(the value itself is never written here)"
                )
        return headers
