"""Moved to :mod:`raytroupe.protocols.config.llm`; the names stay importable from here."""

from raytroupe.protocols.config.llm import LLMConfig, RetryPolicy, refuse_own_api

__all__ = ["LLMConfig", "RetryPolicy", "refuse_own_api"]
