"""A tiny MCP server over stdio, for ``examples/mcp_tools.py`` (any MCP server would do).

Usage: python examples/mcp_server.py   (speaks MCP on stdin/stdout; a client starts it)

Built with the ``mcp`` package's ``MCPServer``: each decorated function is a tool, its
schema taken from the signature and its description from the decorator.
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import MCPServer

server = MCPServer("units", log_level="WARNING")

KM_PER_MILE = 1.609344


@server.tool(description="Convert a distance between kilometres and miles.")
def convert_distance(value: float, to: Literal["km", "mi"]) -> float:
    """``value`` in the other unit, converted to ``to``."""
    return round(value * KM_PER_MILE if to == "km" else value / KM_PER_MILE, 3)


@server.tool(description="Convert a temperature between Celsius and Fahrenheit.")
def convert_temperature(value: float, to: Literal["C", "F"]) -> float:
    """``value`` in the other scale, converted to ``to``."""
    return round((value - 32) * 5 / 9 if to == "C" else value * 9 / 5 + 32, 2)


if __name__ == "__main__":
    server.run("stdio")
