"""A driver's Python function as a tool on the wire: its schema, its identity, its envelope.

``raytroupe.tool`` checks a function here (:func:`function_schema`) and ships it to the tool
sandboxes as a :class:`ShippedFunction`, pickled by value and known by the digest of its bytes
(:func:`digest_of`). What imports and runs function tools is ``raytroupe.actors.tools``'s.
"""

from __future__ import annotations

import hashlib
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from raytroupe.protocols.errors import ConfigError

__all__ = ["ShippedFunction", "digest_of", "function_schema"]

_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class ShippedFunction:
    """A driver's function tool as it travels to the sandboxes (pickled, by value).

    Made by ``raytroupe.tool``; the sandbox that unpickles it runs it like a function tool
    of its configuration (trusted code: only a driver, which holds the cluster, ships one).
    Pickles made before it moved here name ``raytroupe.actors.tools.functions``, which
    re-exports it.
    """

    function: Callable[..., Any]
    name: str
    description: str
    timeout_s: float = 30.0
    side_effects: bool = False
    requires_approval: bool = False
    tags: tuple[str, ...] = ()


def digest_of(payload: bytes) -> str:
    """``sha256:<hex>`` of a shipped function's bytes: its identity."""
    return f"sha256:{hashlib.sha256(payload).hexdigest()}"


def function_schema(
    function: Callable[..., Any], *, tool: str
) -> tuple[dict[str, Any], type[BaseModel]]:
    """The JSON Schema of ``function``'s parameters, and the model that converts arguments.

    Raises:
        ConfigError: a parameter cannot be passed by keyword (``*args``, ``**kwargs``,
            positional-only), or an annotation has no JSON Schema: give ``parameters``.
    """
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigError(f"function tool {tool!r}: cannot read its signature: {exc}") from exc
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind not in _BY_KEYWORD:
            raise ConfigError(
                f"function tool {tool!r}: parameter {parameter.name!r} cannot be passed by "
                "keyword; give the tool explicit parameters and a wrapper function",
                tool=tool,
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    try:
        model: type[BaseModel] = create_model(
            f"{tool}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
    except Exception as exc:  # pydantic's schema errors have no common base worth naming
        raise ConfigError(
            f"function tool {tool!r}: no JSON Schema for its parameters ({exc}); give one",
            tool=tool,
        ) from exc
    return _untitled(schema), model


def _untitled(schema: Any) -> Any:
    """``schema`` without pydantic's generated ``title`` keys (noise in a model's prompt)."""
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in {"properties", "$defs", "patternProperties"} and isinstance(value, dict):
            cleaned[key] = {k: _untitled(v) for k, v in value.items()}  # names, not keywords
        else:
            cleaned[key] = _untitled(value)
    return cleaned
