"""The LLM adapter pool and its providers.

The pool's names (``LLMAdapterPool``, ``DEFAULT_MODELS``) and ``build_provider`` are imported
on first use (PEP 562): the pool brings the gateway, its retries and rate limiters, which a
process that imports ``raytroupe.actors.llm.config`` or only the offline or scripted provider should
not load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytroupe.actors.lazy import lazy_exports
from raytroupe.actors.llm.offline import OfflineProvider, split_task
from raytroupe.actors.llm.provider import LLMProvider, word_tokens
from raytroupe.actors.llm.scripted import ScriptedProvider

if TYPE_CHECKING:
    from raytroupe.actors.llm.factory import build_provider
    from raytroupe.actors.llm.pool import DEFAULT_MODELS, LLMAdapterPool

__all__ = [
    "DEFAULT_MODELS",
    "LLMAdapterPool",
    "LLMProvider",
    "OfflineProvider",
    "ScriptedProvider",
    "build_provider",
    "split_task",
    "word_tokens",
]

_HOMES = {
    **dict.fromkeys(("DEFAULT_MODELS", "LLMAdapterPool"), "raytroupe.actors.llm.pool"),
    "build_provider": "raytroupe.actors.llm.factory",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
