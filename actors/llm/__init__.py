"""The LLM adapter pool and its providers."""

from actors.llm.offline import OfflineProvider, split_task
from actors.llm.pool import DEFAULT_MODELS, LLMAdapterPool, build_provider
from actors.llm.provider import LLMProvider, count_tokens
from actors.llm.scripted import ScriptedProvider

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
