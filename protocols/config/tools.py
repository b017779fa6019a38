"""The tool sandboxes' configuration (cheap to import: no MCP, no isolation code).

Function tools are named here by import path; nothing is imported until a sandbox loads them
(``raytroupe.actors.tools.functions``), so a driver need not have the functions' modules. The
isolation that enforces :class:`ResourceLimits` is ``raytroupe.actors.tools.isolation``'s.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raytroupe.protocols import A2AAgentSpec, MCPServerSpec, Name
from raytroupe.protocols.config.network import NetworkPolicy
from raytroupe.protocols.config.state import state_url
from raytroupe.protocols.json_data import JsonSchema

__all__ = [
    "RESERVED_TOOL_NAMES",
    "FunctionTool",
    "Limits",
    "ResourceLimits",
    "ToolsConfig",
    "default_scratch_root",
]

RESERVED_TOOL_NAMES: Final = frozenset(
    {"calculator", "python", "shell", "http_get", "file_read", "file_write", "delegate", "handoff"}
)
"""Names of the built-in tools (and the agent tools), which a function tool may not take."""

_DOTTED: Final = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_TARGET: Final = re.compile(rf"^{_DOTTED}:{_DOTTED}$", re.ASCII)


def default_scratch_root() -> Path:
    """``<temp dir>/raytroupe-<uid>/scratch``: each user's own (the temp dir honours TMPDIR).

    A fixed path shared by all users would be whoever made it first's; the sandbox refuses a
    root it does not own alone (``ToolSandbox``), and with this default its parent too.
    """
    return Path(tempfile.gettempdir()) / f"raytroupe-{os.getuid()}" / "scratch"


class ResourceLimits(BaseModel):
    """What one run may use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_s: float = Field(default=10.0, gt=0.0, description="Wall time; the group is killed.")
    cpu_s: int = Field(default=10, ge=1, description="CPU seconds (RLIMIT_CPU).")
    memory_mb: int = Field(default=256, ge=16, description="Address space (RLIMIT_AS).")
    file_mb: int = Field(default=16, ge=1, description="Largest file written (RLIMIT_FSIZE).")
    open_files: int = Field(default=64, ge=8, description="Open descriptors (RLIMIT_NOFILE).")
    processes: int = Field(default=32, ge=1, description="Processes of the uid (RLIMIT_NPROC).")
    output_bytes: int = Field(default=65536, ge=0, description="Kept of stdout and of stderr.")


Limits = ResourceLimits
"""The earlier name of :class:`ResourceLimits` (kept for scripts written for it)."""


class FunctionTool(BaseModel):
    """A plain Python function offered as a tool, run inside the sandbox process.

    The function is the operator's code, trusted: it runs with the sandbox's privileges, not
    isolated. A synchronous function runs in one of the sandbox's worker threads (the sandbox
    keeps serving other calls meanwhile); an ``async def`` one runs on its event loop. A plain
    string in ``ToolsConfig.functions`` stands for ``FunctionTool(target=...)``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = Field(description="Import path 'package.module:function' (or ':Class.method').")
    description: str | None = Field(
        default=None,
        description="What the model is told; default: the docstring's first paragraph.",
    )
    parameters: JsonSchema | None = Field(
        default=None,
        description="JSON Schema of the arguments; default: derived from the signature's "
        "annotations (pydantic), arguments then converted to the annotated types.",
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema the function's return value must satisfy, if any."
    )
    timeout_s: float = Field(default=30.0, gt=0.0, le=3600.0, description="Wall time per call.")
    side_effects: bool = Field(
        default=False,
        description="Changes the world: runs at most once per subtask for the same arguments "
        "(the same call again gets the recorded result).",
    )
    requires_approval: bool = Field(default=False, description="A human must approve each call.")
    tags: tuple[str, ...] = Field(default=(), description="For discovery.")

    @model_validator(mode="before")
    @classmethod
    def _from_target(cls, data: Any) -> Any:
        return {"target": data} if isinstance(data, str) else data

    @field_validator("target")
    @classmethod
    def _import_path(cls, target: str) -> str:
        if not _TARGET.match(target):
            raise ValueError(f"{target!r} is not an import path like 'package.module:function'")
        return target


class ToolsConfig(BaseModel):
    """How tool sandboxes run and what they may reach."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sandboxes: int = Field(default=2, ge=1, le=64, description="ToolSandbox actors to run.")
    state_dir: Path = Field(
        default_factory=lambda: Path.home() / ".raytroupe",
        description="Where idempotency records and grants are kept in SQLite files (survives "
        "restarts of a sandbox on the same node), unless state_url is set.",
    )
    state_url: str | None = Field(
        default=None,
        repr=False,  # may hold a password
        description="A PostgreSQL database (postgresql://user@host:5432/name) for idempotency "
        "records and grants, shared by the sandboxes of every node: a cluster's choice.",
    )
    scratch_root: Path = Field(
        default_factory=default_scratch_root,
        description="Per-job scratch directories live under it: a directory of the sandbox's "
        "user alone, made 0700 if missing; one that is a symlink, another user's, or writable "
        "by group or others is refused. Default: <temp dir>/raytroupe-<uid>/scratch (TMPDIR "
        "honoured), whose raytroupe-<uid> parent is held to the same rule.",
    )
    limits: ResourceLimits = Field(
        default_factory=ResourceLimits, description="Resource limits of isolated runs."
    )
    allow_unisolated: bool = Field(
        default=False, description="Run untrusted code even where it cannot be isolated."
    )
    enable_shell: bool = Field(default=False, description="Offer the isolated shell tool.")
    http_allow_domains: tuple[str, ...] = Field(
        default=(), description="Domains http_get may fetch from (and their subdomains)."
    )
    network: NetworkPolicy = Field(
        default_factory=NetworkPolicy,
        description="Addresses http_get may reach beyond public ones (default: public only; "
        "loopback, link-local, private ranges and the cluster's own nodes are refused).",
    )
    http_max_bytes: int = Field(default=1_000_000, gt=0)
    http_timeout_s: float = Field(default=10.0, gt=0.0)
    file_max_bytes: int = Field(default=1_000_000, gt=0)
    max_output_bytes: int = Field(default=64_000, gt=0, description="Cap on a result's data.")
    mcp_servers: tuple[MCPServerSpec, ...] = Field(default=(), description="Tool sources.")
    a2a_agents: tuple[A2AAgentSpec, ...] = Field(
        default=(),
        description="Remote A2A agents, each one tool 'a2a_<name>' (reached under 'network', "
        "like http_get: a loopback or private agent must be allowed there).",
    )
    approval_required: tuple[str, ...] = Field(
        default=(), description="Tools a human must approve call by call (besides those marked)."
    )
    functions: dict[Name, FunctionTool] = Field(
        default_factory=dict,
        description="Plain Python functions offered as tools, by tool name: an import path "
        "'module:function' or a FunctionTool. Imported by each sandbox when it starts.",
    )
    function_threads: int = Field(
        default=4, ge=1, le=256, description="Worker threads per sandbox for function tools."
    )

    @field_validator("state_url")
    @classmethod
    def _is_postgres(cls, value: str | None) -> str | None:
        return None if value is None else state_url(value)

    @field_validator("functions")
    @classmethod
    def _not_reserved(cls, functions: dict[str, FunctionTool]) -> dict[str, FunctionTool]:
        taken = sorted(RESERVED_TOOL_NAMES & functions.keys())
        if taken:
            raise ValueError(f"function tool name(s) {taken} are taken by built-in tools")
        return functions

    @model_validator(mode="after")
    def _a2a_names(self) -> ToolsConfig:
        names = [agent.tool_name for agent in self.a2a_agents]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"A2A agent tool name(s) {twice} are configured more than once")
        taken = sorted((set(names) & self.functions.keys()) | (set(names) & RESERVED_TOOL_NAMES))
        if taken:
            raise ValueError(f"A2A agent tool name(s) {taken} are taken by other tools")
        return self
