"""The pool's provider for a :class:`LocalModel`: an OpenAI-compatible client of its server.

The server's address and key come from its supervisor (``model/<alias>``) and change when it
restarts, so the client is made on the first call and made again after a call that could
not reach it (or whose key it refused); the pool's retry then reaches the new server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from raytroupe.actors.llm.local.server import LlamaServer, LocalEndpoint
from raytroupe.actors.llm.provider import DeltaSink
from raytroupe.actors.llm.tool_examples import family_of, with_tool_examples
from raytroupe.protocols import (
    AuthFailed,
    LLMRequest,
    LLMResponse,
    LocalModel,
    ModelTimeout,
    OpenAICompatibleModel,
    ProviderUnavailable,
    StreamInterrupted,
)

if TYPE_CHECKING:
    from raytroupe.actors.llm.openai_provider import OpenAIProvider

__all__ = ["InProcessServers", "LocalModelProvider", "LocalServers"]

_STALE = (ProviderUnavailable, AuthFailed, StreamInterrupted, ModelTimeout)
"""Errors after which the server may have moved (a restart gives a new port and key)."""


class LocalServers(Protocol):
    """Where the pool finds the servers of its local models (under Ray: ``model/<alias>``)."""

    async def endpoint(self, alias: str, spec: LocalModel) -> LocalEndpoint:
        """The running server of ``alias`` (started, or restarted with ``spec``, if need be)."""
        ...

    async def stop(self, alias: str) -> None:
        """End the server of ``alias``, if there is one."""
        ...


class InProcessServers:
    """Servers supervised in this process (tests and benchmarks without Ray)."""

    def __init__(self, log_dir: str | Path | None = None) -> None:
        self._servers: dict[str, LlamaServer] = {}
        self._log_dir = log_dir

    async def endpoint(self, alias: str, spec: LocalModel) -> LocalEndpoint:
        """See :class:`LocalServers`."""
        server = self._servers.get(alias)
        if server is None:
            server = self._servers[alias] = LlamaServer(alias, spec, log_dir=self._log_dir)
        return await server.endpoint(spec)

    def server(self, alias: str) -> LlamaServer | None:
        """The supervisor of ``alias``, if one was started."""
        return self._servers.get(alias)

    async def stop(self, alias: str) -> None:
        """See :class:`LocalServers`."""
        server = self._servers.pop(alias, None)
        if server is not None:
            await server.stop()


class LocalModelProvider:
    """Serves one local model alias through its server's OpenAI-compatible API."""

    name = "local"

    def __init__(self, alias: str, spec: LocalModel, servers: LocalServers) -> None:
        self._alias, self._spec, self._servers = alias, spec, servers
        self._client: OpenAIProvider | None = None
        self._lock = asyncio.Lock()

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        """Answer ``request`` (see ``LLMProvider.complete``).

        Raises:
            ModelError: typed, as an OpenAI-compatible server's; ``ProviderUnavailable``
                also when the server cannot be started (``ConfigError`` for a missing file).
        """
        client = await self._connected()
        if self._spec.tool_examples:
            request = with_tool_examples(
                request, family_of(Path(self._spec.gguf).name), native_tools=self._spec.native_tools
            )
        try:
            return await client.complete(request, on_delta=on_delta)
        except _STALE:
            await self._forget(client)
            raise

    async def close(self) -> None:
        """Close the client (the server keeps running: other replicas use it)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _connected(self) -> OpenAIProvider:
        async with self._lock:
            if self._client is None:
                from raytroupe.actors.llm.openai_provider import OpenAIProvider  # noqa: PLC0415 - lazy SDK

                endpoint = await self._servers.endpoint(self._alias, self._spec)
                self._client = OpenAIProvider(
                    _as_compatible(self._spec, endpoint), api_key=endpoint.api_key, name=self.name
                )
            return self._client

    async def _forget(self, client: OpenAIProvider) -> None:
        async with self._lock:
            if self._client is client:
                self._client = None
        await client.close()


def _as_compatible(spec: LocalModel, endpoint: LocalEndpoint) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        model=Path(spec.gguf).stem,
        base_url=endpoint.base_url,
        api_key_env=None,
        native_tools=spec.native_tools,
        constrained_tools=spec.constrained_tools,
        timeout_s=spec.timeout_s,
        context_window=spec.context_window,
    )
