"""Tools: the sandbox actor, its built-ins, validation, isolation, idempotency and MCP sources.

Heavy pieces (the MCP client) are imported by the modules that use them, so that importing
``raytroupe.actors.tools`` stays cheap for agents.
"""

from raytroupe.actors.tools.calculator import CALCULATOR, evaluate

__all__ = ["CALCULATOR", "evaluate"]
