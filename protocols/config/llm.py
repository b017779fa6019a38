"""The LLM pool's configuration: aliases, budgets, retry policy and prices, from YAML or code.

API keys never appear here: deployments name the environment variable holding theirs
(``api_key_env``), which is read only inside the pool actor. This configuration is the
operator's, and trusted: models that teams configure later are checked against it (see
:mod:`raytroupe.actors.llm.trust`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols import (
    Budget,
    ConfigError,
    ModelSpec,
    Name,
    OpenAICompatibleModel,
    OpenAIModel,
)
from raytroupe.protocols.config.files import read_yaml, validated
from raytroupe.protocols.config.network import NetworkPolicy
from raytroupe.protocols.spend import (
    MAX_RATE_LIMITS,
    MAX_SPEND_LIMITS,
    AgentRateLimit,
    SpendLimit,
)

__all__ = ["LLMConfig", "RetryPolicy", "refuse_own_api"]


class RetryPolicy(BaseModel):
    """How hard the pool tries before it gives up on a call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(
        default=4, ge=1, le=50, description="Provider calls per request, fallbacks included."
    )
    base_backoff_s: float = Field(default=0.5, gt=0.0, description="First backoff, seconds.")
    max_backoff_s: float = Field(default=30.0, gt=0.0, description="Longest backoff, seconds.")
    max_wait_s: float = Field(
        default=60.0, ge=0.0, description="Longest wait for a deployment to come off cooldown."
    )
    default_max_tokens: int = Field(
        default=1024, gt=0, description="max_tokens set (and reserved) under a budget if unset."
    )


class LLMConfig(BaseModel):
    """Everything the pool serves and enforces."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[Name, ModelSpec] = Field(
        default_factory=dict, description="Aliases: deployments, and routes over them."
    )
    tenant_budgets: dict[str, Budget] = Field(
        default_factory=dict, description="Spending limit of each tenant, over all its jobs."
    )
    spend_limits: dict[Name, SpendLimit] = Field(
        default_factory=dict,
        max_length=MAX_SPEND_LIMITS,
        description="Named limits on what a tenant (or one of its agents) spends per day, "
        "month, rolling hours or ever, with alert thresholds (docs/llm-gateway.md).",
    )
    agent_rate_limits: dict[Name, AgentRateLimit] = Field(
        default_factory=dict,
        max_length=MAX_RATE_LIMITS,
        description="Model calls a minute a tenant's agents may make (each agent on its own, "
        "or one named agent); calls over it wait their turn.",
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries and backoff.")
    replicas: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Pool replicas (actors llm/0, llm/1, ...): each serves calls, all share "
        "one budget ledger, and each deployment's rpm, tpm and max_concurrency are split "
        "between them, so that together they stay within the provider's quota.",
    )
    prices: dict[str, tuple[float, float] | tuple[float, float, float, float]] = Field(
        default_factory=dict,
        description="'provider/model-prefix' -> [USD per M prompt, per M completion tokens], "
        "or with the provider cache's prices [prompt, completion, cached prompt, cache write].",
    )
    allow_unpriced: bool = Field(
        default=False,
        description="Let a call under a USD budget use a model without a known price (it "
        "then costs 0); by default such a call is refused with UnpricedModel.",
    )
    network: NetworkPolicy = Field(
        default_factory=NetworkPolicy,
        description="Where models configured by teams may point beyond public addresses "
        "(the hosts of these deployments are allowed without being listed).",
    )
    keys: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="More key variables that models configured by teams may name, each with "
        "the hosts its key may be sent to (those of these deployments are allowed already).",
    )

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "llm config") -> Self:
        """Validate a mapping.

        Raises:
            ConfigError: not a valid configuration; ``detail['problems']`` lists why.
        """
        return validated(cls, data, source=source, what="llm config", article="an")

    @classmethod
    def from_yaml(cls, path: str | Path) -> Self:
        """Read a YAML file.

        Raises:
            ConfigError: missing, unreadable, not YAML, or not a valid configuration.
        """
        return cls.from_dict(read_yaml(path, what="llm config"), source=str(path))


def _same_machine(host: str, proxy_host: str) -> bool:
    """Whether ``host`` names the machine of a proxy listening on ``proxy_host``.

    Loopback and unspecified addresses, ``localhost``, the proxy's own host and this
    machine's name; no DNS is asked (a name that resolves here some other way is not seen).
    """
    host = host.lower().rstrip(".")
    if host in {"localhost", proxy_host.lower(), socket.gethostname().lower()}:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith(".localhost")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def refuse_own_api(
    models: Mapping[str, ModelSpec], *, host: str, port: int, route_prefix: str = "/"
) -> None:
    """Refuse a deployment whose ``base_url`` is raytroupe's own OpenAI-compatible API.

    raytroupe's HTTP app answers ``POST <route_prefix>/v1/chat/completions`` on the Serve
    proxy at ``host:port``. An ``openai`` or ``openai_compatible`` deployment sent there
    would make each of the pool's calls a job of raytroupe's, whose agents call the pool
    again: a loop, not a model. A model server on the same proxy (a Ray Serve LLM app)
    needs a route prefix of its own, e.g. ``/llm``: ``http://127.0.0.1:8000/llm/v1``.

    Raises:
        ConfigError: such a deployment; ``detail`` names its ``alias`` and ``base_url``.
    """
    api = route_prefix.rstrip("/") + "/v1"
    for alias, spec in models.items():
        if not isinstance(spec, OpenAIModel | OpenAICompatibleModel) or not spec.base_url:
            continue
        parts = urlsplit(spec.base_url)
        try:
            target = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # not a port: the SDK refuses it on its own
            continue
        if (
            target == port
            and parts.path.rstrip("/") == api
            and _same_machine(parts.hostname or "", host)
        ):
            raise ConfigError(
                f"model alias {alias!r}: base_url {spec.base_url} is raytroupe's own "
                f"OpenAI-compatible API (route {api} of the Serve proxy at {host}:{port}): "
                "the pool would call raytroupe itself; serve the model under a route prefix "
                f"of its own (a Ray Serve LLM app at /llm: .../llm/v1) or on another port",
                alias=alias,
                base_url=spec.base_url,
                field=f"models.{alias}.base_url",
            )
