"""The API's operations, each declared once (see :mod:`~raytroupe.runtime.operations.declare`).

:func:`declared` lists them all; the driver, the HTTP API, its clients and the CLI are made
from these declarations.
"""

from __future__ import annotations

from raytroupe.runtime.operations.declare import (
    At,
    Operation,
    in_process,
    operation,
    over_http,
    over_http_async,
)

__all__ = [
    "At",
    "Operation",
    "declared",
    "in_process",
    "operation",
    "over_http",
    "over_http_async",
]


def declared() -> dict[str, Operation[..., object]]:
    """Every declared operation by name."""
    from raytroupe.runtime.operations import (  # noqa: PLC0415 - the families import us
        experiments,
        skills,
    )

    found: dict[str, Operation[..., object]] = {}
    for family in (skills, experiments):
        for name in family.__all__:
            op = getattr(family, name)
            if name in found:
                raise TypeError(f"operation {name!r} is declared twice")
            found[name] = op
    return found
