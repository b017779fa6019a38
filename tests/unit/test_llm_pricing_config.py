"""Prices (shipped table, overrides, cost math) and the pool's YAML configuration."""

import json
from importlib import resources

import pytest
from llm_fakes import FakeProvider
from wiring import llm_request, run

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext, RetryPolicy
from raytroupe.actors.llm.pricing import Price, PriceTable
from raytroupe.protocols import (
    AnthropicModel,
    Budget,
    ConfigError,
    OfflineModel,
    OpenAICompatibleModel,
    OpenAIModel,
    RouteSpec,
    ScriptedModel,
    ScriptedTurn,
    Usage,
)

# -- prices -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (OpenAIModel(model="gpt-4o"), Price(2.5, 10.0, 1.25, 2.5)),
        (OpenAIModel(model="gpt-4o-mini"), Price(0.15, 0.6, 0.075, 0.15)),
        (OpenAIModel(model="gpt-4o-mini-2024-07-18"), Price(0.15, 0.6, 0.075, 0.15)),
        (OpenAIModel(model="gpt-4o-2024-08-06"), Price(2.5, 10.0, 1.25, 2.5)),
        (OpenAIModel(model="gpt-4.1-mini-2025-04-14"), Price(0.4, 1.6, 0.1, 0.4)),
        (OpenAIModel(model="gpt-4.1-2025-04-14"), Price(2.0, 8.0, 0.5, 2.0)),
        (AnthropicModel(model="claude-sonnet-4-20250514"), Price(3.0, 15.0, 0.3, 3.75)),
        (
            OpenAICompatibleModel(model="deepseek-chat", base_url="http://x/v1"),
            Price(0.27, 1.1, 0.07, 0.27),
        ),
    ],
)
def test_the_longest_matching_model_prefix_wins(spec, expected):
    assert PriceTable().price(spec) == expected


@pytest.mark.parametrize("spec", [OfflineModel(), ScriptedModel(turns=(ScriptedTurn(text="x"),))])
def test_offline_and_scripted_models_are_free(spec):
    assert PriceTable().price(spec) == Price(0.0, 0.0)


@pytest.mark.parametrize(
    "spec",
    [
        OpenAIModel(model="some-future-model"),
        OpenAICompatibleModel(model="gpt-4o", base_url="http://x/v1"),  # another provider
        OpenAIModel(model="some-future-model", input_usd_per_mtok=1.0),  # half a price
    ],
)
def test_a_model_the_table_does_not_list_has_no_known_price(spec):
    assert PriceTable().price(spec) is None


def test_a_deployments_own_prices_make_an_unlisted_model_priced():
    spec = OpenAIModel(model="some-future-model", input_usd_per_mtok=1.0, output_usd_per_mtok=3.0)
    assert PriceTable().price(spec) == Price(1.0, 3.0)


def test_the_shipped_table_is_what_the_lookup_uses():
    shipped = json.loads(
        resources.files("raytroupe.actors.llm").joinpath("prices.json").read_text()
    )
    table = PriceTable()
    for provider in ("openai", "anthropic"):
        for model, pair in shipped[provider].items():
            spec = (OpenAIModel if provider == "openai" else AnthropicModel)(model=model)
            assert table.price(spec) == Price(*pair)


def test_deployment_prices_override_the_table_field_by_field():
    table = PriceTable()
    both = OpenAIModel(model="gpt-4o", input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)
    only_input = OpenAIModel(model="gpt-4o", input_usd_per_mtok=1.0)
    free_output = OpenAIModel(model="gpt-4o", output_usd_per_mtok=0.0)
    assert table.price(both) == Price(1.0, 2.0)
    assert table.price(only_input) == Price(1.0, 10.0)
    assert table.price(free_output) == Price(2.5, 0.0, 1.25, 2.5)  # the table's cache prices
    assert table.price(OfflineModel(input_usd_per_mtok=3.0)) == Price(3.0, 0.0)


def test_table_overrides_replace_and_extend_the_shipped_prices():
    table = PriceTable(
        {
            "openai/gpt-4o": Price(5.0, 20.0),
            "openai_compatible/qwen": Price(0.1, 0.2),
            "openai/gpt-4o-mini-2024": Price(0.01, 0.02),
        }
    )
    assert table.price(OpenAIModel(model="gpt-4o-2024-08-06")) == Price(5.0, 20.0)
    assert table.price(OpenAIModel(model="gpt-4o-mini")) == Price(0.15, 0.6, 0.075, 0.15)
    assert table.price(OpenAIModel(model="gpt-4o-mini-2024-07-18")) == Price(0.01, 0.02)
    qwen = OpenAICompatibleModel(model="qwen2.5-7b", base_url="http://x/v1")
    assert table.price(qwen) == Price(0.1, 0.2)
    pinned = OpenAIModel(model="gpt-4o", output_usd_per_mtok=1.0)
    assert table.price(pinned) == Price(5.0, 1.0)  # the deployment still wins


def test_cached_and_cache_written_prompt_tokens_are_charged_at_their_own_prices():
    sonnet = PriceTable().price(AnthropicModel(model="claude-sonnet-4-20250514"))
    assert sonnet is not None
    usage = Usage(
        prompt_tokens=10_000, completion_tokens=1_000, cached_tokens=6_000, cache_write_tokens=3_000
    )
    plain, read, write, out = 1_000 * 3.0, 6_000 * 0.3, 3_000 * 3.75, 1_000 * 15.0
    assert sonnet.charge(usage) == pytest.approx((plain + read + write + out) / 1e6)
    uncached = usage.model_copy(update={"cached_tokens": 0, "cache_write_tokens": 0})
    assert sonnet.charge(uncached) == pytest.approx(sonnet.cost(10_000, 1_000))
    # a deployment's own prompt price without cache prices charges cached tokens at it
    own = PriceTable().price(AnthropicModel(model="claude-sonnet-4", input_usd_per_mtok=1.0))
    assert own is not None
    assert own.charge(usage) == pytest.approx((10_000 * 1.0 + 1_000 * 15.0) / 1e6)
    # and a deployment may set them
    priced = AnthropicModel(
        model="x", input_usd_per_mtok=1.0, output_usd_per_mtok=2.0, cached_input_usd_per_mtok=0.5
    )
    assert PriceTable().price(priced) == Price(1.0, 2.0, 0.5, None)


def test_usage_that_claims_more_cached_tokens_than_prompted_is_not_a_negative_charge():
    price = Price(2.0, 8.0, 0.5, 2.5)
    odd = Usage(prompt_tokens=100, cached_tokens=500, cache_write_tokens=500)
    assert price.charge(odd) == pytest.approx(100 * 0.5 / 1e6)


def test_a_pools_prices_may_carry_the_caches_prices():
    config = LLMConfig.model_validate({"prices": {"openai/m": [1, 2, 0.1, 1.5]}})
    table = PriceTable({k: Price(*v) for k, v in config.prices.items()})
    assert table.price(OpenAIModel(model="m-1")) == Price(1.0, 2.0, 0.1, 1.5)


def test_cost_math_is_per_million_tokens():
    price = Price(2.0, 8.0)
    assert price.cost(1000, 500) == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    assert price.cost(1_000_000, 0) == pytest.approx(2.0)
    assert price.cost(0, 1_000_000) == pytest.approx(8.0)
    assert price.cost(0, 0) == 0.0
    usage = Usage(prompt_tokens=1000, completion_tokens=500, calls=1)
    priced = PriceTable().priced(OpenAIModel(model="gpt-4.1"), usage)
    assert priced.cost_usd == pytest.approx(0.006)
    assert (priced.prompt_tokens, priced.completion_tokens, priced.calls) == (1000, 500, 1)


def test_config_prices_override_the_table_in_the_pool():
    async def main():
        config = LLMConfig(
            models={"m": OpenAIModel(model="gpt-4o-2024-08-06")},
            prices={"openai/gpt-4o": (100.0, 200.0)},
        )
        factory = lambda _spec: FakeProvider("m", prompt_tokens=1000, completion_tokens=500)  # noqa: E731
        pool = LLMAdapterPool(config=config, provider_factory=factory)
        response = await pool.complete(llm_request("hi", model="m"), CallContext(job_id="j"))
        assert response.usage.cost_usd == pytest.approx((1000 * 100.0 + 500 * 200.0) / 1e6)
        [row] = await pool.usage("j")
        assert row.cost_usd == pytest.approx(0.2)

    run(main())


# -- LLMConfig from YAML ----------------------------------------------------------------------

GOOD = """
models:
  primary:
    provider: openai
    model: gpt-4o-mini
    rpm: 500
    max_concurrency: 8
  backup:
    provider: anthropic
    model: claude-3-5-haiku-latest
    context_window: 200000
  local:
    provider: openai_compatible
    model: qwen2.5
    base_url: http://127.0.0.1:8000/v1
    input_usd_per_mtok: 0
  smart:
    provider: route
    deployments: [primary, local]
    strategy: cost
    fallbacks: [backup]
tenant_budgets:
  acme: {usd: 12.5}
  beta: {tokens: 100000, usd: 1}
retry:
  max_attempts: 6
  base_backoff_s: 0.25
prices:
  openai/gpt-4o-mini: [0.2, 0.8]
"""


def test_from_yaml_reads_a_good_file(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text(GOOD)
    config = LLMConfig.from_yaml(path)
    assert config.models["smart"] == RouteSpec(
        deployments=("primary", "local"), strategy="cost", fallbacks=("backup",)
    )
    assert config.models["primary"] == OpenAIModel(model="gpt-4o-mini", rpm=500, max_concurrency=8)
    assert isinstance(config.models["backup"], AnthropicModel)
    assert config.models["backup"].context_window == 200_000
    assert config.tenant_budgets == {
        "acme": Budget(usd=12.5),
        "beta": Budget(tokens=100_000, usd=1.0),
    }
    assert config.retry == RetryPolicy(max_attempts=6, base_backoff_s=0.25)
    assert config.prices == {"openai/gpt-4o-mini": (0.2, 0.8)}
    assert LLMConfig.from_yaml(str(path)) == config


def test_an_empty_mapping_is_the_default_configuration(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text("{}\n")
    assert LLMConfig.from_yaml(path) == LLMConfig()


def test_bad_yaml_is_a_config_error(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text("models: [unclosed\n  : :\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        LLMConfig.from_yaml(path)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        LLMConfig.from_yaml(tmp_path / "absent.yaml")


def test_yaml_that_is_not_a_mapping_is_a_config_error(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="an llm config must be a mapping"):
        LLMConfig.from_yaml(path)


def test_an_unknown_provider_is_a_config_error_with_problems(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text("models:\n  m: {provider: nosuch, model: x}\n")
    with pytest.raises(ConfigError) as caught:
        LLMConfig.from_yaml(path)
    [problem] = caught.value.detail["problems"]
    assert problem.startswith("models.m:")
    assert "'nosuch'" in problem
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("models:\n  r: {provider: route, deployments: [a], fallbacks: [a]}\n", "models.r"),
        ("tenant_budgets:\n  acme: {usd: -1}\n", "tenant_budgets.acme.usd"),
        ("retry: {max_attempts: 0}\n", "retry.max_attempts"),
        ("unknown_key: 1\n", "unknown_key"),
        ("models:\n  m: {provider: openai}\n", "models.m.openai.model"),
    ],
)
def test_invalid_configurations_list_their_problems(tmp_path, text, where):
    path = tmp_path / "llm.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        LLMConfig.from_yaml(path)
    assert any(p.startswith(where) for p in caught.value.detail["problems"]), caught.value
