"""Builds the provider that serves one deployment spec (remote SDKs imported only then)."""

from __future__ import annotations

from raytroupe.actors.llm.offline import OfflineProvider
from raytroupe.actors.llm.provider import LLMProvider
from raytroupe.actors.llm.scripted import ScriptedProvider
from raytroupe.actors.outbound import Outbound
from raytroupe.protocols import (
    AnthropicModel,
    ConfigError,
    DeploymentSpec,
    LocalModel,
    OfflineModel,
    OpenAICompatibleModel,
    OpenAIModel,
    ScriptedModel,
)

__all__ = ["build_provider"]


def build_provider(spec: DeploymentSpec, *, outbound: Outbound | None = None) -> LLMProvider:
    """The provider that serves ``spec`` (SDKs are imported only when one is needed).

    With ``outbound``, a remote provider's every connection passes that network policy and
    it follows no redirect (its key goes only to its ``base_url``).

    Raises:
        ConfigError: the provider needs a key and its environment variable is not set.
    """
    match spec:
        case OfflineModel():
            return OfflineProvider(spec)
        case ScriptedModel():
            return ScriptedProvider(spec)
        case OpenAIModel() | OpenAICompatibleModel():
            import openai  # noqa: PLC0415 - lazy SDK

            from raytroupe.actors.llm.openai_provider import OpenAIProvider  # noqa: PLC0415

            client = outbound.sdk_http_client(openai.DefaultAsyncHttpxClient) if outbound else None
            return OpenAIProvider(spec, http_client=client)
        case AnthropicModel():
            import anthropic  # noqa: PLC0415

            from raytroupe.actors.llm.anthropic_provider import AnthropicProvider  # noqa: PLC0415

            client = (
                outbound.sdk_http_client(anthropic.DefaultAsyncHttpxClient) if outbound else None
            )
            return AnthropicProvider(spec, http_client=client)
        case LocalModel():
            raise ConfigError(
                "a local model is served through its server's supervisor: configure it in "
                "a pool (LLMAdapterPool), which starts one",
                provider="local",
            )
