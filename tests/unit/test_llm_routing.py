"""Gateway routing: strategies, alias resolution errors, rate limits and concurrency slots."""

import asyncio
import math
import time
from collections import Counter

import pytest
from llm_fakes import Rig, spin
from wiring import run

from raytroupe.actors.llm.deployment_state import estimate_prompt_tokens
from raytroupe.protocols import ConfigError, OfflineModel, OpenAIModel, ProviderUnavailable

# -- strategies -------------------------------------------------------------------------------


def test_static_route_always_tries_the_first_listed_deployment():
    async def main():
        rig = Rig()
        for name in ("a", "b", "c"):
            rig.deploy(name)
        rig.route("main", "a", "b", "c", strategy="static")
        for _ in range(5):
            assert (await rig.ask("main")).deployment == "a"
        assert rig.log == ["a"] * 5

    run(main())


def test_weighted_route_spreads_calls_roughly_by_weight():
    async def main():
        rig = Rig(seed=1234)
        rig.deploy("heavy", spec=OfflineModel(weight=3.0))
        rig.deploy("light", spec=OfflineModel(weight=1.0))
        rig.route("main", "heavy", "light", strategy="weighted")
        for _ in range(1000):
            await rig.ask("main")
        counts = Counter(rig.log)
        assert counts["heavy"] + counts["light"] == 1000
        assert counts["heavy"] / 1000 == pytest.approx(0.75, abs=0.05)

    run(main())


def test_weighted_route_still_falls_over_to_the_other_deployment():
    async def main():
        rig = Rig(seed=0)
        rig.deploy("heavy", spec=OfflineModel(weight=1000.0), then=ProviderUnavailable("down"))
        rig.deploy("light", spec=OfflineModel(weight=0.001))
        rig.route("main", "heavy", "light", strategy="weighted")
        assert (await rig.ask("main")).deployment == "light"
        assert rig.log == ["heavy", "light"]

    run(main())


def test_least_busy_route_prefers_the_deployment_with_fewer_calls_in_flight():
    async def main():
        rig = Rig()
        gate = asyncio.Event()
        busy = rig.deploy("a", gate=gate)
        rig.deploy("b")
        rig.route("main", "a", "b", strategy="least_busy")
        held = asyncio.create_task(rig.ask("main"))
        await busy.entered.wait()
        assert rig.gateway.deployment("a").in_flight == 1
        assert (await rig.ask("main")).deployment == "b"
        assert (await rig.ask("main")).deployment == "b"
        gate.set()
        assert (await held).deployment == "a"
        assert rig.gateway.deployment("a").in_flight == 0
        assert (await rig.ask("main")).deployment == "a"  # a tie again: listed order

    run(main())


def test_cost_route_prefers_the_cheaper_deployment_from_spec_prices():
    async def main():
        rig = Rig()
        rig.deploy("pricey", spec=OfflineModel(input_usd_per_mtok=10.0, output_usd_per_mtok=30.0))
        rig.deploy("cheap", spec=OfflineModel(input_usd_per_mtok=0.1, output_usd_per_mtok=0.4))
        rig.route("main", "pricey", "cheap", strategy="cost")
        for _ in range(3):
            assert (await rig.ask("main")).deployment == "cheap"

    run(main())


def test_cost_route_prefers_the_cheaper_deployment_from_the_price_table():
    async def main():
        rig = Rig()
        rig.deploy("big", spec=OpenAIModel(model="gpt-4o"))
        rig.deploy("mini", spec=OpenAIModel(model="gpt-4o-mini"))
        rig.route("main", "big", "mini", strategy="cost")
        response = await rig.ask("main")
        assert response.deployment == "mini"
        assert response.usage.cost_usd == pytest.approx((3 * 0.15 + 2 * 0.6) / 1e6)

    run(main())


def test_latency_route_prefers_the_lower_observed_latency():
    async def main():
        rig = Rig()
        rig.deploy("slow", latency_s=2.0)
        rig.deploy("fast", latency_s=0.1)
        rig.route("main", "slow", "fast", strategy="latency")
        picks = [(await rig.ask("main")).deployment for _ in range(6)]
        # both untried: listed order; then the untried one; then the faster one, always
        assert picks == ["slow", "fast", "fast", "fast", "fast", "fast"]
        assert rig.gateway.deployment("slow").latency_s == pytest.approx(2.0)
        assert rig.gateway.deployment("fast").latency_s == pytest.approx(0.1)

    run(main())


def test_latency_is_a_moving_average():
    rig = Rig()
    rig.deploy("solo")
    state = rig.gateway.deployment("solo")
    assert state.latency_s is None
    state.succeeded(1.0)
    state.succeeded(2.0)
    assert state.latency_s == pytest.approx(1.3)
    assert state.calls == 2


# -- resolving aliases ------------------------------------------------------------------------


def test_unknown_alias_is_a_config_error():
    async def main():
        rig = Rig()
        rig.deploy("a")
        with pytest.raises(ConfigError, match="unknown model alias") as caught:
            await rig.ask("nope")
        assert caught.value.detail["model"] == "nope"
        assert rig.log == []

    run(main())


@pytest.mark.parametrize("named", ["ghost", "other_route"])
def test_a_route_naming_something_that_is_not_a_deployment_is_a_config_error(named):
    async def main():
        rig = Rig()
        rig.deploy("a")
        rig.route("other_route", "a")
        rig.route("main", "a", named)
        with pytest.raises(ConfigError, match="not a deployment alias"):
            await rig.ask("main")
        assert rig.log == []

    run(main())


def test_an_unknown_fallback_alias_is_a_config_error():
    async def main():
        rig = Rig()
        rig.deploy("a")
        rig.route("main", "a", fallbacks=("ghost",))
        with pytest.raises(ConfigError, match="unknown model alias"):
            await rig.ask("main")
        assert rig.log == []

    run(main())


@pytest.mark.parametrize("cycle", ["self", "pair"])
def test_a_fallback_cycle_is_a_config_error(cycle):
    async def main():
        rig = Rig()
        rig.deploy("a")
        rig.deploy("b")
        if cycle == "self":
            rig.route("one", "a", fallbacks=("one",))
        else:
            rig.route("one", "a", fallbacks=("two",))
            rig.route("two", "b", fallbacks=("one",))
        with pytest.raises(ConfigError, match="cycle"):
            await rig.ask("one")
        assert rig.log == []

    run(main())


def test_a_shared_fallback_in_two_branches_is_no_cycle():
    async def main():
        rig = Rig()
        for name in ("a", "b", "c", "z"):
            rig.deploy(name)
        rig.route("x", "b", fallbacks=("z",))
        rig.route("y", "c", fallbacks=("z",))
        rig.route("main", "a", fallbacks=("x", "y"))
        assert (await rig.ask("main")).deployment == "a"

    run(main())


# -- rate limits and concurrency (the real clock and the real aiolimiter) ---------------------


def _min_elapsed(limiter, needed: float) -> float:
    """Seconds a leaky bucket needs to admit ``needed`` units, beyond one full bucket."""
    return max(0.0, needed - limiter.max_rate) / (limiter.max_rate / limiter.time_period)


def test_rpm_limit_is_held():
    async def main():
        rig = Rig()
        rig.deploy("limited", spec=OfflineModel(rpm=6000))
        limiter = rig.gateway.deployment("limited")._rpm
        calls = 150
        floor = _min_elapsed(limiter, calls)
        assert floor > 0.2  # the test means something: the bucket must be exceeded
        start = time.monotonic()
        await asyncio.gather(*(rig.ask("limited") for _ in range(calls)))
        assert time.monotonic() - start >= floor * 0.95
        assert len(rig.log) == calls

    run(main())


def test_tpm_limit_is_held():
    async def main():
        rig = Rig()
        rig.deploy("limited", spec=OfflineModel(tpm=600_000))
        limiter = rig.gateway.deployment("limited")._tpm
        calls, max_tokens = 13, 4992
        per_call = estimate_prompt_tokens(["hello there"]) + max_tokens
        floor = _min_elapsed(limiter, calls * per_call)
        assert floor > 0.2
        start = time.monotonic()
        await asyncio.gather(*(rig.ask("limited", max_tokens=max_tokens) for _ in range(calls)))
        assert time.monotonic() - start >= floor * 0.95
        assert math.isclose(limiter.max_rate, 60_000)

    run(main())


def test_max_concurrency_never_lets_more_calls_run_at_once():
    async def main():
        rig = Rig()
        gate = asyncio.Event()
        provider = rig.deploy("narrow", spec=OfflineModel(max_concurrency=2), gate=gate)
        tasks = [asyncio.create_task(rig.ask("narrow")) for _ in range(6)]
        await spin(lambda: provider.current == 2)
        for _ in range(50):  # give the other four every chance to get in
            await asyncio.sleep(0)
        assert (provider.current, provider.calls) == (2, 2)
        # in_flight counts the four queued behind the two running (least_busy sees them)
        assert rig.gateway.deployment("narrow").in_flight == 6
        gate.set()
        await asyncio.gather(*tasks)
        assert (provider.peak, provider.calls) == (2, 6)
        assert rig.gateway.deployment("narrow").in_flight == 0

    run(main())


def test_a_deployments_concurrency_limit_is_shared_by_every_route_naming_it():
    async def main():
        rig = Rig()
        gate = asyncio.Event()
        provider = rig.deploy("narrow", spec=OfflineModel(max_concurrency=1), gate=gate)
        rig.route("r1", "narrow")
        rig.route("r2", "narrow")
        tasks = [asyncio.create_task(rig.ask(alias)) for alias in ("r1", "r2", "narrow")]
        await provider.entered.wait()
        for _ in range(50):
            await asyncio.sleep(0)
        assert provider.calls == 1
        gate.set()
        await asyncio.gather(*tasks)
        assert (provider.peak, provider.calls) == (1, 3)

    run(main())


def test_least_busy_counts_calls_queued_for_a_full_deployment():
    async def main():
        rig = Rig()
        gate = asyncio.Event()
        rig.deploy("a", spec=OfflineModel(max_concurrency=1), gate=gate)
        rig.deploy("b", spec=OfflineModel(max_concurrency=1), gate=gate)
        rig.route("main", "a", "b", strategy="least_busy")
        tasks = []
        for _ in range(6):
            tasks.append(asyncio.create_task(rig.ask("main")))
            for _ in range(10):  # let it reach its deployment (or that deployment's queue)
                await asyncio.sleep(0)
        gate.set()
        picks = Counter([(await task).deployment for task in tasks])
        assert picks == {"a": 3, "b": 3}

    run(main())
