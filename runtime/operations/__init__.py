"""The API's operations, each declared once (see :mod:`~raytroupe.runtime.operations.declare`).

:func:`declared` lists them all; the driver, the HTTP API, its clients and the CLI are made
from these declarations.
"""

from __future__ import annotations

import importlib
import pkgutil

from raytroupe.runtime.operations.declare import At, Operation, operation
from raytroupe.runtime.operations.surfaces import (
    handle,
    in_process,
    invoke,
    over_http,
    over_http_async,
    widens,
)

__all__ = [
    "At",
    "Operation",
    "declared",
    "handle",
    "in_process",
    "invoke",
    "operation",
    "over_http",
    "over_http_async",
    "widens",
]


def declared() -> dict[str, Operation[..., object]]:
    """Every declared operation by name: those of each module of this package."""
    found: dict[str, Operation[..., object]] = {}
    for module in pkgutil.iter_modules(__path__):
        family = importlib.import_module(f"{__name__}.{module.name}")
        for name, op in vars(family).items():
            if not isinstance(op, Operation):
                continue
            if name != op.name or name not in getattr(family, "__all__", ()):
                raise TypeError(f"{family.__name__}.{name}: declare it under its name, in __all__")
            if found.setdefault(name, op) is not op:
                raise TypeError(f"operation {name!r} is declared twice")
    return found
