"""Prices per million tokens, from the shipped table, overridden per pool or deployment."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import NamedTuple

from raytroupe.protocols import DeploymentSpec, Usage

__all__ = ["FREE", "FREE_PROVIDERS", "Price", "PriceTable"]


class Price(NamedTuple):
    """USD per million prompt and completion tokens."""

    input_usd_per_mtok: float
    output_usd_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What that many tokens cost."""
        return (
            prompt_tokens * self.input_usd_per_mtok + completion_tokens * self.output_usd_per_mtok
        ) / 1_000_000


FREE = Price(0.0, 0.0)
FREE_PROVIDERS = frozenset({"offline", "scripted"})
"""Providers that cost nothing: no network, no account."""


class PriceTable:
    """Looks prices up by provider and model (longest matching model-name prefix wins).

    Args:
        overrides: ``{"provider/model-prefix": Price}`` entries that take precedence.
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
        return None if prompt is None or completion is None else Price(prompt, completion)

    def priced(self, spec: DeploymentSpec, usage: Usage) -> Usage:
        """``usage`` with its cost filled in (0 for a model without a known price)."""
        price = self.price(spec) or FREE
        cost = price.cost(usage.prompt_tokens, usage.completion_tokens)
        return usage.model_copy(update={"cost_usd": cost})
