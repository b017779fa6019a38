"""The LLM adapter pool: model aliases served by providers, behind one envelope interface."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from actors._endpoint import serve_envelope
from actors.llm.offline import OfflineProvider
from actors.llm.provider import LLMProvider
from actors.llm.scripted import ScriptedProvider
from protocols import (
    AgentMessage,
    ConfigError,
    InvalidInput,
    LLMRequest,
    LLMResponse,
    ModelError,
    ModelSpec,
    OfflineModel,
    ScriptedModel,
)

__all__ = ["DEFAULT_MODELS", "LLMAdapterPool", "build_provider"]

log = structlog.get_logger("raytroupe.llm")

DEFAULT_MODELS: Mapping[str, ModelSpec] = {"default": OfflineModel(), "offline": OfflineModel()}
"""Aliases every pool starts with: the offline provider, with no latency."""


def build_provider(spec: ModelSpec) -> LLMProvider:
    """The provider that serves ``spec``."""
    match spec:
        case OfflineModel():
            return OfflineProvider(spec)
        case ScriptedModel():
            return ScriptedProvider(spec)
        case _:
            raise ConfigError(f"provider {spec.provider!r} is not available in this build")


class LLMAdapterPool:
    """Serves ``LLMRequest`` envelopes by model alias. A plain class; Ray makes it ``llm``.

    Args:
        models: aliases to serve, on top of :data:`DEFAULT_MODELS`.
        provider_factory: builds a provider for a spec (tests may pass their own).
    """

    def __init__(
        self,
        models: Mapping[str, ModelSpec] | None = None,
        *,
        provider_factory: Callable[[ModelSpec], LLMProvider] = build_provider,
    ) -> None:
        self._factory = provider_factory
        self._specs: dict[str, ModelSpec] = {}
        self._providers: dict[str, LLMProvider] = {}
        for alias, spec in {**DEFAULT_MODELS, **(models or {})}.items():
            self._bind(alias, spec)

    async def configure(self, models: Mapping[str, ModelSpec], *, replace: bool = False) -> None:
        """Serve ``models``.

        An alias already bound to an equal spec keeps its provider (and a scripted provider
        its remaining turns). With ``replace=False`` an alias bound to a different spec is a
        ``ConfigError``; with ``replace=True`` the old provider is replaced, then closed.

        Raises:
            ConfigError: a conflicting alias without ``replace``; nothing is changed.
            ModelError: closing a replaced provider failed (e.g. ``ScriptError`` for unused
                turns); the new configuration is fully applied all the same.
        """
        conflicts = [a for a, s in models.items() if a in self._specs and self._specs[a] != s]
        if conflicts and not replace:
            raise ConfigError(
                f"model alias(es) {sorted(conflicts)} already serve a different model; "
                "choose another alias",
                aliases=sorted(conflicts),
            )
        replaced = []
        for alias, spec in models.items():
            if self._specs.get(alias) == spec:
                continue
            old = self._providers.get(alias)
            self._bind(alias, spec)
            if old is not None:
                replaced.append(old)
        # every alias is bound before any old provider is closed: a close that raises (a
        # scripted provider with turns left) cannot leave the configuration half applied
        errors = []
        for old in replaced:
            try:
                await old.close()
            except ModelError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    async def remove(self, alias: str) -> None:
        """Stop serving ``alias`` and close its provider (a scripted one checks it was used up).

        Raises:
            ScriptError: a scripted provider still had turns.
        """
        self._specs.pop(alias, None)
        provider = self._providers.pop(alias, None)
        if provider is not None:
            await provider.close()

    async def models(self) -> dict[str, ModelSpec]:
        """Aliases and what they stand for."""
        return dict(self._specs)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request with the provider bound to its model alias.

        Raises:
            ConfigError: the alias is unknown.
            ModelError: the provider failed.
        """
        provider = self._providers.get(request.model)
        if provider is None:
            raise ConfigError(
                f"unknown model alias {request.model!r}; known: {sorted(self._providers)}",
                model=request.model,
            )
        return await provider.complete(request)

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point (called by the router)."""
        return await serve_envelope(data, self._handle, me="llm")

    async def _handle(self, message: AgentMessage) -> AgentMessage:
        if not isinstance(message.payload, LLMRequest):
            raise InvalidInput(f"llm pool cannot handle {message.kind!r}", kind=message.kind)
        response = await self.complete(message.payload)
        log.debug("completed", msg_id=message.id, job_id=message.job_id, model=response.model)
        return message.reply(response, sender="llm")

    def _bind(self, alias: str, spec: ModelSpec) -> None:
        self._specs[alias] = spec
        self._providers[alias] = self._factory(spec)
