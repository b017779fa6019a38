"""Package attributes imported on first use (PEP 562), for light package ``__init__`` files."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``module``.

    Each name of ``homes`` is imported from its home module when first looked up, then kept
    in ``module``, so later look-ups are plain attribute reads.
    """
    namespace = sys.modules[module].__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
