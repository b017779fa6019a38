"""``@raytroupe.tool``: plain Python functions as a team's tools.

```python
import raytroupe

@raytroupe.tool
def lookup(sku: str, warehouse: int = 1) -> dict:
    \"\"\"Stock of an item in a warehouse.\"\"\"
    return {"sku": sku, "on_hand": 12}

team = raytroupe.Team(
    name="shop",
    functions=[lookup],                      # every agent of the team may call it
    agents=[{"name": "clerk", "role": "clerk", "tools": ["calculator"]},
            {"name": "buyer", "role": "buyer", "tools": [reorder]}],   # this agent only
)
```

The schema comes from the signature (pydantic: ``Annotated[int, Field(ge=1)]`` works) and the
description from the docstring's first paragraph, both checked when the decorator runs. The
function stays callable as it was. When the team is submitted (or registered) by a driver,
each function is pickled by value and shipped to the tool sandboxes, which run it like a
configured function tool: trusted code, in the sandbox's worker threads (``async def`` on its
loop). A function must not need modules the sandboxes' nodes lack.
"""

from __future__ import annotations

import functools
import inspect
import sys
import sysconfig
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

from ray import cloudpickle

from raytroupe.protocols import ConfigError
from raytroupe.protocols.addresses import NAME_PATTERN
from raytroupe.protocols.config.tools import RESERVED_TOOL_NAMES
from raytroupe.protocols.functions import ShippedFunction, digest_of, function_schema

__all__ = ["Tool", "tool"]


class Tool:
    """A function made a tool by :func:`tool`; calling it calls the function."""

    def __init__(self, function: Callable[..., Any], shipped: ShippedFunction) -> None:
        self.function = function
        self.name = shipped.name
        self.description = shipped.description
        self._shipped = shipped
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function, as if undecorated."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    @functools.cached_property
    def payload(self) -> bytes:
        """The function and its options, pickled by value: what the sandboxes receive."""
        module = sys.modules.get(self.function.__module__)
        by_value = module is not None and module.__name__ != "__main__" and not _installed(module)
        if by_value:  # a script's or a notebook's module: the sandboxes cannot import it
            cloudpickle.register_pickle_by_value(module)
        try:
            return bytes(cloudpickle.dumps(self._shipped))
        finally:
            if by_value:
                cloudpickle.unregister_pickle_by_value(module)

    @functools.cached_property
    def digest(self) -> str:
        """``sha256:<hex>`` of :attr:`payload`: the tool's identity on the cluster."""
        return digest_of(self.payload)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float = 30.0,
    side_effects: bool = False,
    requires_approval: bool = False,
    tags: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float = 30.0,
    side_effects: bool = False,
    requires_approval: bool = False,
    tags: tuple[str, ...] = (),
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make ``function`` a tool: ``@tool`` or ``@tool(name=..., requires_approval=True)``.

    ``side_effects`` makes the sandbox run it at most once per subtask for the same
    arguments (the same call again gets the recorded result);
    ``requires_approval`` holds each call for a human; ``timeout_s`` bounds each call.

    Raises:
        ConfigError: the name is not a valid tool name or is a built-in's, there is neither
            docstring nor description, or the parameters have no JSON Schema (``*args``,
            ``**kwargs``, positional-only parameters, annotations pydantic cannot describe).
    """

    def made(target: Callable[..., Any]) -> Tool:
        return as_tool(
            target,
            name=name,
            description=description,
            timeout_s=timeout_s,
            side_effects=side_effects,
            requires_approval=requires_approval,
            tags=tags,
        )

    return made if function is None else made(function)


def as_tool(function: Callable[..., Any] | Tool, **options: Any) -> Tool:
    """``function`` as a :class:`Tool` (a plain function gets the defaults of :func:`tool`)."""
    if isinstance(function, Tool):
        return function
    if not callable(function):
        raise ConfigError(f"{function!r} is not a function", field="tools")
    name = options.pop("name", None) or getattr(function, "__name__", "")
    if not _valid_name(name) or name in RESERVED_TOOL_NAMES:
        raise ConfigError(
            f"{name!r} cannot name a tool: letters, digits, '_' and '-' (and not a built-in's "
            f"name: {sorted(RESERVED_TOOL_NAMES)})",
            tool=name,
        )
    described = options.pop("description", None) or _first_paragraph(function)
    if not described:
        raise ConfigError(f"function tool {name!r} has no docstring: give a description")
    function_schema(function, tool=name)  # fails here, at definition, not in a sandbox
    # Annotations written as strings (``from __future__ import annotations``) name globals
    # that pickling by value does not carry: the sandbox gets them evaluated, as here.
    function.__annotations__ = typing.get_type_hints(function, include_extras=True)
    options = {k: v for k, v in options.items() if v is not None}
    return Tool(function, ShippedFunction(function, name, described, **options))


def _first_paragraph(function: Callable[..., Any]) -> str:
    return (inspect.getdoc(function) or "").split("\n\n")[0].strip()


def _valid_name(name: str) -> bool:
    import re  # noqa: PLC0415 - once per decorated function

    return bool(re.fullmatch(NAME_PATTERN, name))


def _installed(module: Any) -> bool:
    """Whether ``module`` is the interpreter's or site-packages' (not a script's folder's).

    Those import on every node with the same environment; the others go by value.
    """
    file = getattr(module, "__file__", None)
    if file is None:
        return True  # built into the interpreter
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    path = Path(file).resolve()
    return any(path.is_relative_to(Path(root).resolve()) for root in roots)
