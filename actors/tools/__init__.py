"""Tools agents may call."""

from actors.tools.calculator import CALCULATOR, evaluate
from actors.tools.toolbox import BUILTIN_TOOLS, Tool, ToolBox

__all__ = ["BUILTIN_TOOLS", "CALCULATOR", "Tool", "ToolBox", "evaluate"]
