"""The LLM adapter pool and its providers.

The pool's names (``LLMAdapterPool``, ``DEFAULT_MODELS``, ``build_provider``) are imported on
first use (PEP 562): the pool brings the gateway, its retries and rate limiters, which a
process that imports ``actors.llm.config`` or only the offline or scripted provider should not
load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from actors.llm.offline import OfflineProvider, split_task
from actors.llm.provider import LLMProvider, count_tokens
from actors.llm.scripted import ScriptedProvider

if TYPE_CHECKING:
    from actors.llm.pool import DEFAULT_MODELS, LLMAdapterPool, build_provider

__all__ = [
    "DEFAULT_MODELS",
    "LLMAdapterPool",
    "LLMProvider",
    "OfflineProvider",
    "ScriptedProvider",
    "build_provider",
    "count_tokens",
    "split_task",
]

_LAZY = {"DEFAULT_MODELS", "LLMAdapterPool", "build_provider"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("actors.llm.pool"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
