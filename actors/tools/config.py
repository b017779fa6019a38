"""The tool sandboxes' configuration (cheap to import: no MCP, no isolation code)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from actors.tools.isolation import Limits
from protocols import MCPServerSpec

__all__ = ["ToolsConfig"]


class ToolsConfig(BaseModel):
    """How tool sandboxes run and what they may reach."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sandboxes: int = Field(default=2, ge=1, le=64, description="ToolSandbox actors to run.")
    state_dir: Path = Field(
        default_factory=lambda: Path.home() / ".raytroupe",
        description="Where idempotency records and grants are kept (survives restarts).",
    )
    scratch_root: Path = Field(
        default_factory=lambda: Path("/tmp/raytroupe/scratch"),  # noqa: S108 - per-job subdirs
        description="Per-job scratch directories live under it.",
    )
    limits: Limits = Field(default_factory=Limits, description="Limits of isolated runs.")
    allow_unisolated: bool = Field(
        default=False, description="Run untrusted code even where it cannot be isolated."
    )
    enable_shell: bool = Field(default=False, description="Offer the isolated shell tool.")
    http_allow_domains: tuple[str, ...] = Field(
        default=(), description="Domains http_get may fetch from (and their subdomains)."
    )
    http_max_bytes: int = Field(default=1_000_000, gt=0)
    http_timeout_s: float = Field(default=10.0, gt=0.0)
    file_max_bytes: int = Field(default=1_000_000, gt=0)
    max_output_bytes: int = Field(default=64_000, gt=0, description="Cap on a result's data.")
    mcp_servers: tuple[MCPServerSpec, ...] = Field(default=(), description="Tool sources.")
    approval_required: tuple[str, ...] = Field(
        default=(), description="Tools a human must approve call by call (besides those marked)."
    )
