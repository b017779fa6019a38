"""What a model configured at run time may point at, and which key it may take along.

The operator's own configuration (the pool's ``LLMConfig``, ``raytroupe.runtime.connect(llm=...)``)
is trusted: the hosts of its deployments may be reached, and each key variable it names may be sent
to the host it names it with. A model configured later by a team (over HTTP with an admin key, or in
a driver's team) is data checked against that: its ``base_url`` must pass the outbound network
policy, and its ``api_key_env`` must be a variable the operator allowed for that very host. So no
team can make the pool read an arbitrary environment variable, or send a configured key anywhere but
to the endpoint it was configured for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from raytroupe.actors.outbound import NetworkPolicy, Outbound, OutboundRefused, host_of
from raytroupe.protocols import ConfigError, LocalModel, ModelSpec, RouteSpec

__all__ = ["DEFAULT_HOSTS", "ModelTrust", "endpoint_host", "endpoint_origin"]

DEFAULT_HOSTS: Mapping[str, str] = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
"""Where a provider's SDK sends requests when its spec has no ``base_url``."""


def endpoint_host(spec: ModelSpec) -> str:
    """The host a deployment's requests (and key) go to ('' for local providers)."""
    base_url = getattr(spec, "base_url", None)
    if base_url:
        return host_of(base_url)
    return DEFAULT_HOSTS.get(spec.provider, "")


def endpoint_origin(spec: ModelSpec) -> str:
    """``scheme://host:port`` of a deployment's endpoint ('' for local providers)."""
    base_url = getattr(spec, "base_url", None)
    if not base_url:
        host = DEFAULT_HOSTS.get(spec.provider, "")
        return f"https://{host}:443" if host else ""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


class ModelTrust:
    """The operator's trusted hosts and key variables, and the check of run-time models.

    Args:
        network: the pool's outbound policy.
        keys: more key variables run-time models may name, each with the hosts (any port) or
            origins (``https://host:port``) its key may be sent to.
        own_addresses: the cluster's node addresses (never reached).
    """

    def __init__(
        self,
        network: NetworkPolicy,
        keys: Mapping[str, Iterable[str]],
        own_addresses: Iterable[str] = (),
    ) -> None:
        self._network = network
        self._own = tuple(own_addresses)
        self._keys: dict[str, set[str]] = {
            env: {h.lower() for h in hosts} for env, hosts in keys.items()
        }
        self._trusted: set[str] = set()
        self.outbound = Outbound(network, own_addresses=self._own)

    def trust(self, specs: Iterable[ModelSpec]) -> None:
        """Take ``specs`` as the operator's own: their hosts and key variables are allowed."""
        for spec in specs:
            host = endpoint_host(spec)
            if host and getattr(spec, "base_url", None):
                self._trusted.add(host)
            env = getattr(spec, "api_key_env", None)
            if env and host:  # the key may go where the operator sent it: that very origin
                self._keys.setdefault(env, set()).add(endpoint_origin(spec))
        self.outbound = Outbound(
            self._network, trusted_hosts=self._trusted, own_addresses=self._own
        )

    async def check(self, alias: str, spec: ModelSpec) -> None:
        """Refuse a model configured at run time that reaches past the operator's trust.

        Raises:
            ConfigError: its key variable is not allowed for its host, or its ``base_url``
                is refused by the network policy (``detail['field']`` names which).
        """
        if isinstance(spec, RouteSpec):
            return
        if isinstance(spec, LocalModel):
            raise ConfigError(
                f"model alias {alias!r}: provider 'local' starts a server process on the "
                "cluster from a file path; only the operator's configuration may name one",
                alias=alias,
                field="provider",
            )
        host = endpoint_host(spec)
        env = getattr(spec, "api_key_env", None)
        allowed = self._keys.get(env or "", set())
        if env is not None and host not in allowed and endpoint_origin(spec) not in allowed:
            raise ConfigError(
                f"model alias {alias!r}: api_key_env {env!r} is not a key the operator allows "
                f"to be sent to {host or 'this endpoint'!r} (LLMConfig.keys, or a deployment of "
                "the pool's own configuration)",
                alias=alias,
                field="api_key_env",
            )
        base_url = getattr(spec, "base_url", None)
        if base_url and not self.outbound.host_allowed(host):
            try:
                await self.outbound.check_url(base_url)
            except OutboundRefused as exc:
                raise ConfigError(
                    f"model alias {alias!r}: base_url refused by the network policy: {exc}",
                    alias=alias,
                    field="base_url",
                ) from None
