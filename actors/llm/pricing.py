"""Prices per million tokens, from the shipped table, overridden per pool or deployment."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import NamedTuple

from raytroupe.protocols import DeploymentSpec, Usage

__all__ = ["FREE", "FREE_PROVIDERS", "Price", "PriceTable"]


class Price(NamedTuple):
    """USD per million tokens: prompt, completion, and prompt tokens cached.

    The last two are the prices of prompt tokens read from and written to the provider's
    cache (None: as other prompt tokens).
    """

    input_usd_per_mtok: float
    output_usd_per_mtok: float
    cached_input_usd_per_mtok: float | None = None
    cache_write_usd_per_mtok: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What that many tokens cost, none of them cached (what a budget holds before a call)."""
        return (
            prompt_tokens * self.input_usd_per_mtok + completion_tokens * self.output_usd_per_mtok
        ) / 1_000_000

    def charge(self, usage: Usage) -> float:
        """What ``usage`` costs: its cached and cache-written prompt tokens at their prices.

        A provider's usage that says more tokens were cached than prompted is read as all of
        them cached (never a negative count of plain ones).
        """
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        written = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
        plain = usage.prompt_tokens - cached - written
        read_price = _or(self.cached_input_usd_per_mtok, self.input_usd_per_mtok)
        write_price = _or(self.cache_write_usd_per_mtok, self.input_usd_per_mtok)
        return (
            plain * self.input_usd_per_mtok
            + cached * read_price
            + written * write_price
            + usage.completion_tokens * self.output_usd_per_mtok
        ) / 1_000_000


def _or(price: float | None, otherwise: float) -> float:
    return otherwise if price is None else price


FREE = Price(0.0, 0.0)
FREE_PROVIDERS = frozenset({"offline", "scripted"})
"""Providers that cost nothing: no network, no account."""


class PriceTable:
    """Looks prices up by provider and model (longest matching model-name prefix wins).

    Args:
        overrides: ``{"provider/model-prefix": Price}`` entries that take precedence.

    A table entry is ``[prompt, completion]``, or with the cache's prices ``[prompt,
    completion, cached prompt, cache write]``, USD per million tokens.
    """

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        shipped = json.loads(
            resources.files("raytroupe.actors.llm").joinpath("prices.json").read_text()
        )
        self._table: dict[str, dict[str, Price]] = {
            provider: {model: Price(*pair) for model, pair in models.items()}
            for provider, models in shipped.items()
            if not provider.startswith("_")
        }
        for key, price in (overrides or {}).items():
            provider, _, model = key.partition("/")
            self._table.setdefault(provider, {})[model] = Price(*price)

    def price(self, spec: DeploymentSpec) -> Price | None:
        """The price of a deployment: its own fields first, then the table; None if unknown.

        The offline and scripted providers are free. A model the table does not list, without
        both prices of its own, has no known price: a USD budget then refuses its calls
        (``UnpricedModel``) unless the pool allows unpriced models.
        """
        if spec.provider in FREE_PROVIDERS:
            base: Price | None = FREE
        else:
            model = getattr(spec, "model", "")
            listed = self._table.get(spec.provider, {})
            matches = [prefix for prefix in listed if model.startswith(prefix)]
            base = listed[max(matches, key=len)] if matches else None
        prompt = spec.input_usd_per_mtok
        completion = spec.output_usd_per_mtok
        if prompt is None:
            prompt = None if base is None else base.input_usd_per_mtok
        if completion is None:
            completion = None if base is None else base.output_usd_per_mtok
        if prompt is None or completion is None:
            return None
        cached, written = spec.cached_input_usd_per_mtok, spec.cache_write_usd_per_mtok
        if base is not None and spec.input_usd_per_mtok is None:  # the table's cache prices
            cached = base.cached_input_usd_per_mtok if cached is None else cached
            written = base.cache_write_usd_per_mtok if written is None else written
        return Price(prompt, completion, cached, written)

    def priced(self, spec: DeploymentSpec, usage: Usage) -> Usage:
        """``usage`` with its cost filled in (0 for a model without a known price)."""
        price = self.price(spec) or FREE
        return usage.model_copy(update={"cost_usd": price.charge(usage)})
