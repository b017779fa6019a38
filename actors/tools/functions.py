"""Function tools: plain Python functions, imported by path and offered with a JSON Schema.

:func:`load_function_tool` imports the target of a
:class:`~raytroupe.protocols.config.tools.FunctionTool` and returns its ``ToolDef`` and runner.
The schema comes from the signature (a pydantic model of the parameters, so
``Annotated[int, Field(ge=0, description=...)]`` works) unless one is given; validated arguments
are then converted to the annotated types before the call. A synchronous function runs in the
sandbox's worker threads, so the sandbox's event loop keeps serving other calls while it
computes; a coroutine function is awaited on the loop. The return value is made JSON-ready
(pydantic models, dataclasses, sets, paths...).

Timeouts: the sandbox stops waiting after the tool's ``timeout_s`` (which counts time queued
for a free worker) and reports a timeout, but Python cannot stop a thread: the function runs
on until it returns, holding its worker. Functions are trusted code; for untrusted code use the
isolated ``python`` tool.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import typing
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from raytroupe.actors.tools.builtins import Runner, ToolContext
from raytroupe.actors.tools.config import FunctionTool
from raytroupe.protocols import ConfigError, ToolDef, ToolError
from raytroupe.protocols.functions import ShippedFunction, function_schema
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolArguments

__all__ = [
    "ShippedFunction",
    "function_schema",
    "function_tool",
    "import_target",
    "load_function_tool",
    "load_shipped",
]


def import_target(target: str) -> Callable[..., Any]:
    """The callable at ``'package.module:qualified.name'``.

    Raises:
        ConfigError: the module does not import, has no such attribute, or it is not callable.
    """
    module_name, _, qualname = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # whatever the module raises while importing
        raise ConfigError(
            f"cannot import {module_name!r} for {target!r}: {type(exc).__name__}: {exc}",
            target=target,
        ) from exc
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigError(f"{module_name!r} has no {qualname!r}", target=target) from None
    if not callable(found):
        raise ConfigError(f"{target!r} is not callable", target=target)
    return typing.cast("Callable[..., Any]", found)


def load_function_tool(name: str, spec: FunctionTool, executor: Executor) -> tuple[ToolDef, Runner]:
    """Import ``spec.target`` and make it the tool ``name``; sync calls go to ``executor``.

    Raises:
        ConfigError: it cannot be imported, has neither docstring nor description, or has
            no usable schema.
    """
    return function_tool(
        import_target(spec.target),
        executor,
        name=name,
        description=spec.description,
        parameters=spec.parameters,
        output_schema=spec.output_schema,
        timeout_s=spec.timeout_s,
        side_effects=spec.side_effects,
        requires_approval=spec.requires_approval,
        tags=spec.tags,
        source=f"function:{spec.target}",
    )


def load_shipped(
    shipped: ShippedFunction, executor: Executor, digest: str
) -> tuple[ToolDef, Runner]:
    """A driver's shipped function as a tool and its runner (see :func:`function_tool`).

    Raises:
        ConfigError: the function has no usable schema.
    """
    return function_tool(
        shipped.function,
        executor,
        name=shipped.name,
        description=shipped.description,
        timeout_s=shipped.timeout_s,
        side_effects=shipped.side_effects,
        requires_approval=shipped.requires_approval,
        tags=shipped.tags,
        source=f"shipped:{digest}",
    )


def function_tool(
    function: Callable[..., Any],
    executor: Executor,
    *,
    name: str,
    description: str | None = None,
    parameters: JsonSchema | None = None,
    output_schema: JsonSchema | None = None,
    timeout_s: float = 30.0,
    side_effects: bool = False,
    requires_approval: bool = False,
    tags: tuple[str, ...] = (),
    source: str,
) -> tuple[ToolDef, Runner]:
    """``function`` as the tool ``name``: its definition and runner.

    The description defaults to the docstring's first paragraph, the parameters' schema to
    the signature's (arguments then converted to the annotated types). Sync functions run in
    ``executor``'s threads, coroutine functions on the loop.

    Raises:
        ConfigError: neither docstring nor description, or no usable schema.
    """
    description = description or (inspect.getdoc(function) or "").split("\n\n")[0].strip()
    if not description:
        raise ConfigError(
            f"function tool {name!r}: {source} has no docstring; give a description", tool=name
        )
    model: type[BaseModel] | None = None
    if parameters is None:
        parameters, model = function_schema(function, tool=name)
    definition = ToolDef(
        name=name,
        description=description,
        parameters=parameters,
        output_schema=output_schema,
        timeout_s=timeout_s,
        side_effects=side_effects,
        requires_approval=requires_approval,
        tags=tags,
        source=source,
    )
    is_async = inspect.iscoroutinefunction(function)

    async def run(arguments: ToolArguments, _: ToolContext) -> object:
        kwargs = _converted(model, arguments, tool=name)
        if is_async:
            result = await function(**kwargs)
        else:
            call = functools.partial(function, **kwargs)
            context = contextvars.copy_context()  # log context goes with the call
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(executor, context.run, call)
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            result = await result
        return to_jsonable_python(result, fallback=str)

    return definition, run


def _converted(
    model: type[BaseModel] | None, arguments: ToolArguments, *, tool: str
) -> ToolArguments:
    """Arguments as the function's annotated types (as they are without a model).

    Raises:
        ToolError: pydantic refuses what the JSON Schema accepted (a custom type's check).
    """
    if model is None:
        return arguments
    try:
        converted = model.model_validate(arguments)
    except ValidationError as exc:
        problems = [
            {"path": "/".join(str(p) for p in e["loc"]) or "(arguments)", "message": e["msg"]}
            for e in exc.errors()[:10]
        ]
        raise ToolError(
            f"invalid arguments for {tool!r}: "
            + "; ".join(f"{p['path']}: {p['message']}" for p in problems),
            tool=tool,
            errors=problems,
        ) from None
    return {field: getattr(converted, field) for field in arguments}
