"""Moved to :mod:`raytroupe.protocols.config.tools`; the names stay importable from here."""

from raytroupe.protocols.config.tools import (
    RESERVED_TOOL_NAMES,
    FunctionTool,
    ToolsConfig,
    default_scratch_root,
)

__all__ = ["RESERVED_TOOL_NAMES", "FunctionTool", "ToolsConfig", "default_scratch_root"]
