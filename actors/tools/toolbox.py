"""In-process tools for an agent: an allow-list, argument validation, one result shape.

Untrusted code runs in sandbox actors (their own issue); what runs here is pure and trusted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema

from actors.tools.calculator import CALCULATOR, evaluate
from protocols import ConfigError, ErrorPayload, ToolCall, ToolError, ToolResult, ToolSpec

__all__ = ["BUILTIN_TOOLS", "Tool", "ToolBox"]


@dataclass(frozen=True)
class Tool:
    """A tool: what the model sees, and the function that runs it."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], object]


BUILTIN_TOOLS: Final[Mapping[str, Tool]] = {
    "calculator": Tool(CALCULATOR, lambda args: evaluate(str(args["expression"]))),
}


class ToolBox:
    """The tools one agent may call.

    Raises:
        ConfigError: an allowed tool does not exist.
    """

    def __init__(self, allowed: Iterable[str], catalog: Mapping[str, Tool] = BUILTIN_TOOLS) -> None:
        names = list(dict.fromkeys(allowed))
        unknown = [n for n in names if n not in catalog]
        if unknown:
            raise ConfigError(f"unknown tool(s) {unknown}; known: {sorted(catalog)}", tools=unknown)
        self._tools = {n: catalog[n] for n in names}

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the allowed tools."""
        return tuple(t.spec for t in self._tools.values())

    def call(self, call: ToolCall) -> ToolResult:
        """Run ``call``; failures come back as ``ok=False`` results, never as exceptions."""
        start = time.perf_counter()
        try:
            data = self._run(call)
        except Exception as exc:  # noqa: BLE001 - a tool failure goes back to the model
            error = (
                exc
                if isinstance(exc, ToolError)
                else ToolError(
                    f"tool {call.tool!r} failed: {type(exc).__name__}: {exc}", tool=call.tool
                )
            )
            return ToolResult(
                call_id=call.call_id,
                tool=call.tool,
                ok=False,
                error=ErrorPayload.from_exception(error),
                metadata={"duration_s": time.perf_counter() - start},
            )
        return ToolResult(
            call_id=call.call_id,
            tool=call.tool,
            ok=True,
            data=data,
            metadata={"duration_s": time.perf_counter() - start},
        )

    def _run(self, call: ToolCall) -> object:
        tool = self._tools.get(call.tool)
        if tool is None:
            raise ToolError(
                f"tool {call.tool!r} is not allowed for this agent; allowed: {sorted(self._tools)}",
                tool=call.tool,
            )
        try:
            jsonschema.validate(call.arguments, tool.spec.parameters)
        except jsonschema.ValidationError as e:
            raise ToolError(f"invalid arguments for {call.tool!r}: {e.message}") from None
        return tool.run(call.arguments)
