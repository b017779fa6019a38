"""The LLM pool's trust boundary: teams' models never read a secret of the operator's choice,
never send a key anywhere else, and money fails closed; spend survives a restart."""

from __future__ import annotations

import pytest
from llm_fakes import FakeProvider
from wiring import llm_request, run

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext, RetryPolicy
from raytroupe.actors.llm.state import PoolState
from raytroupe.actors.outbound import NetworkPolicy
from raytroupe.protocols import (
    AnthropicModel,
    Budget,
    BudgetExceeded,
    ConfigError,
    OfflineModel,
    OpenAICompatibleModel,
    OpenAIModel,
    RouteSpec,
    UnpricedModel,
)

SECRET_ENV = "TROUPE_TRUST_TEST_SECRET"  # noqa: S105 - a variable's name, not a secret
OPERATOR = OpenAICompatibleModel(
    model="llama", base_url="http://127.0.0.1:8080/v1", api_key_env="LOCAL_LLM_KEY"
)


class Recorder:
    """A provider factory that records what it was asked to build (and builds fakes)."""

    def __init__(self):
        self.built = []

    def __call__(self, spec):
        self.built.append(spec)
        return FakeProvider("fake", prompt_tokens=10, completion_tokens=10)


def pool(recorder=None, **config):
    return LLMAdapterPool(
        config=LLMConfig(models={"local": OPERATOR}, **config),
        provider_factory=recorder or Recorder(),
    )


@pytest.mark.parametrize(
    "spec",
    [
        # an environment variable of the cluster, sent wherever the team says
        OpenAICompatibleModel(model="m", base_url="http://attacker.example/v1",
                              api_key_env=SECRET_ENV),
        OpenAICompatibleModel(model="m", base_url="http://attacker.example/v1",
                              api_key_env="TROUPE_API_KEYS"),
        # the operator's own key variable, but to another host
        OpenAICompatibleModel(model="m", base_url="http://attacker.example/v1",
                              api_key_env="LOCAL_LLM_KEY"),
        AnthropicModel(model="m", base_url="http://127.0.0.1:9/", api_key_env="LOCAL_LLM_KEY"),
        OpenAICompatibleModel(model="m", base_url="https://127.0.0.1:8080/v1",
                              api_key_env="LOCAL_LLM_KEY"),
        # a default endpoint whose key the operator never configured
        OpenAIModel(model="gpt-4o"),
    ],
)  # fmt: skip
def test_a_teams_model_may_not_take_a_key_the_operator_did_not_give_that_host(spec, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "sk-operator-secret")
    recorder = Recorder()

    async def main():
        p = pool(recorder)
        with pytest.raises(ConfigError) as caught:
            await p.configure({"evil": spec})
        assert caught.value.detail["field"] == "api_key_env"
        assert "sk-operator-secret" not in caught.value.message
        assert "evil" not in await p.models()
        assert spec not in recorder.built  # no provider was built: the key was never read

    run(main())


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/v1", "http://10.0.0.5/v1", "http://localhost:6379/v1",
     "http://[::1]:8265/v1", "http://127.0.0.2:8080/v1"],
)  # fmt: skip
def test_a_teams_model_may_not_point_inside_the_cluster(url):
    async def main():
        p = pool()
        with pytest.raises(ConfigError) as caught:
            await p.configure({"inside": OpenAICompatibleModel(model="m", base_url=url)})
        assert caught.value.detail["field"] == "base_url"
        assert "inside" not in await p.models()

    run(main())


def test_what_the_operator_configured_is_trusted_and_keyless_public_models_pass():
    recorder = Recorder()

    async def main():
        p = pool(recorder, keys={"PARTNER_KEY": ("93.184.216.34",)})
        same_host = OpenAICompatibleModel(
            model="other", base_url="http://127.0.0.1:8080/v1", api_key_env="LOCAL_LLM_KEY"
        )
        partner = OpenAICompatibleModel(
            model="p", base_url="https://93.184.216.34/v1", api_key_env="PARTNER_KEY"
        )
        await p.configure(
            {"same": same_host, "partner": partner, "r": RouteSpec(deployments=("same",))}
        )
        assert {"same", "partner", "r"} <= set(await p.models())
        assert same_host in recorder.built

    run(main())


def test_the_operators_runtime_configuration_extends_the_trust():
    async def main():
        p = pool()
        mine = OpenAICompatibleModel(
            model="m", base_url="http://10.1.1.1/v1", api_key_env="INTERNAL_KEY"
        )
        with pytest.raises(ConfigError):
            await p.configure({"internal": mine})
        await p.configure({"internal": mine}, operator=True)
        again = mine.model_copy(update={"model": "m2"})
        await p.configure({"internal2": again})  # a team may now use that host and key

    run(main())


def test_replacing_an_alias_needs_replace_even_for_the_operator():
    async def main():
        p = pool()
        with pytest.raises(ConfigError, match="replace"):
            await p.configure({"default": OfflineModel(latency_s=0.5)}, operator=True)
        await p.configure({"default": OfflineModel(latency_s=0.5)}, operator=True, replace=True)
        assert (await p.models())["default"] == OfflineModel(latency_s=0.5)

    run(main())


def test_the_network_policy_lets_the_operator_open_a_range():
    async def main():
        p = pool(network=NetworkPolicy(allow=("10.0.0.0/8",)))
        await p.configure({"lan": OpenAICompatibleModel(model="m", base_url="http://10.2.3.4/v1")})

    run(main())


# -- money fails closed ---------------------------------------------------------------------

UNPRICED = OpenAICompatibleModel(model="mystery", base_url="http://127.0.0.1:8080/v1")


def test_a_usd_budget_refuses_a_model_without_a_price():
    async def main():
        recorder = Recorder()
        p = LLMAdapterPool(config=LLMConfig(models={"u": UNPRICED}), provider_factory=recorder)
        request = llm_request("hi", model="u", budget=Budget(usd=1.0))
        with pytest.raises(UnpricedModel) as caught:
            await p.complete(request, CallContext(job_id="j1"))
        assert isinstance(caught.value, BudgetExceeded)
        assert caught.value.detail["model"] == "mystery"
        assert "mystery" in caught.value.message
        # a token budget, or no budget, needs no price
        await p.complete(llm_request("hi", model="u", budget=Budget(tokens=5000)),
                         CallContext(job_id="j2"))  # fmt: skip
        await p.complete(llm_request("hi", model="u"), CallContext(job_id="j3"))

    run(main())


def test_a_price_or_the_operators_opt_in_lets_it_run():
    async def main():
        priced = UNPRICED.model_copy(update={"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0})
        for config in (
            LLMConfig(models={"u": priced}),
            LLMConfig(models={"u": UNPRICED}, allow_unpriced=True),
            LLMConfig(models={"u": UNPRICED}, prices={"openai_compatible/myst": (1.0, 1.0)}),
        ):
            p = LLMAdapterPool(config=config, provider_factory=Recorder())
            request = llm_request("hi", model="u", budget=Budget(usd=1.0))
            await p.complete(request, CallContext(job_id="j1"))

    run(main())


# -- the ledger and usage survive a restart -------------------------------------------------


def test_a_restarted_pool_keeps_every_spend_and_counts_calls_in_flight_as_spent(tmp_path):
    path = tmp_path / "llm.sqlite"
    config = LLMConfig(
        models={"m": OfflineModel()},
        tenant_budgets={"acme": Budget(tokens=750)},
        retry=RetryPolicy(default_max_tokens=100),
    )

    def factory(_spec):
        return FakeProvider("m", prompt_tokens=100, completion_tokens=100)

    async def main():
        first = LLMAdapterPool(config=config, provider_factory=factory, state=path)
        await first.on_start()
        request = llm_request("hello there", model="m")
        await first.complete(request, CallContext(job_id="j1", tenant="acme", agent="w"))
        await first.complete(request, CallContext(job_id="j1", tenant="acme", agent="w"))
        spent = await first.spent("tenant:acme")
        assert spent.tokens == 400
        usage = await first.usage()
        # a call is in flight when the pool dies: its hold was written before it was made
        first._ledger.reserve(("tenant:acme", "job:j2"), 300, 0.0)

        second = LLMAdapterPool(config=config, provider_factory=factory, state=PoolState(path))
        await second.on_start()
        assert (await second.spent("tenant:acme")).tokens == 700  # 400 + the 300 held
        assert (await second.spent("job:j2")).tokens == 300
        assert await second.usage() == usage
        # the tenant's budget holds across the restart: 700 + ~100 reserved would pass 750
        with pytest.raises(BudgetExceeded):
            await second.complete(request, CallContext(job_id="j3", tenant="acme", agent="w"))

    run(main())
