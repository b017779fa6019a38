"""Budgets: the ledger reserves before a call and settles after; the gateway enforces it."""

import asyncio

import pytest
from llm_fakes import FakeProvider, Rig
from wiring import llm_request, run

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.budget import Ledger
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.deployment_state import estimate_prompt_tokens
from raytroupe.actors.llm.gateway import CallContext, RetryPolicy
from raytroupe.actors.llm.pricing import Price
from raytroupe.protocols import (
    BadRequest,
    Budget,
    BudgetExceeded,
    OfflineModel,
    RateLimited,
    Usage,
)

PROMPT = estimate_prompt_tokens(["hello there"])
"""What the gateway reserves for the prompt of ``Rig.ask``."""

PRICED = OfflineModel(input_usd_per_mtok=1000.0, output_usd_per_mtok=2000.0)
PRICE = Price(1000.0, 2000.0)

# -- the ledger -------------------------------------------------------------------------------


def test_reserve_holds_and_settle_books_what_was_used():
    ledger = Ledger({"acme": Budget(tokens=1000, usd=1.0)})
    ledger.set_limit("job:j1", Budget(tokens=500))
    reservation = ledger.reserve(("tenant:acme", "job:j1", "job:unlimited"), 300, 0.25)
    assert reservation.keys == ("tenant:acme", "job:j1", "job:unlimited")  # all record spend
    assert not ledger.has_limit("job:unlimited")
    assert (ledger.held("tenant:acme").tokens, ledger.held("tenant:acme").usd) == (300, 0.25)
    assert ledger.held("job:j1").tokens == 300
    ledger.settle(reservation, Usage(prompt_tokens=20, completion_tokens=10, cost_usd=0.01))
    for key in ("tenant:acme", "job:j1"):
        assert (ledger.held(key).tokens, ledger.held(key).usd) == (0, 0.0)
        assert ledger.spent(key).tokens == 30
    assert ledger.spent("tenant:acme").usd == pytest.approx(0.01)
    ledger.settle(reservation, Usage(prompt_tokens=20))  # twice: nothing more
    assert ledger.spent("job:j1").tokens == 30


def test_a_refused_reservation_holds_nothing_anywhere():
    ledger = Ledger({"acme": Budget(tokens=1000)})
    ledger.set_limit("job:j1", Budget(tokens=100))
    with pytest.raises(BudgetExceeded) as caught:
        ledger.reserve(("tenant:acme", "job:j1"), 150, 0.0)
    assert caught.value.detail["account"] == "job:j1"
    assert ledger.held("tenant:acme").tokens == 0
    assert ledger.held("job:j1").tokens == 0


def test_usd_limit_admits_exactly_the_limit_and_no_more():
    ledger = Ledger()
    ledger.set_limit("job:j1", Budget(usd=0.3))
    for _ in range(3):
        ledger.reserve(("job:j1",), 0, 0.1)
    with pytest.raises(BudgetExceeded, match="budget"):
        ledger.reserve(("job:j1",), 0, 0.01)


def test_a_failed_call_settled_with_no_usage_costs_nothing():
    ledger = Ledger()
    ledger.set_limit("job:j1", Budget(usd=1.0))
    ledger.settle(ledger.reserve(("job:j1",), 50, 0.5), None)
    assert (ledger.spent("job:j1").usd, ledger.held("job:j1").usd) == (0.0, 0.0)


def test_set_limit_replaces_the_limit_and_keeps_what_was_spent():
    ledger = Ledger()
    ledger.set_limit("job:j1", Budget(tokens=100))
    ledger.settle(ledger.reserve(("job:j1",), 80, 0.0), Usage(prompt_tokens=80))
    ledger.set_limit("job:j1", Budget(tokens=150))
    assert ledger.spent("job:j1").tokens == 80
    with pytest.raises(BudgetExceeded):
        ledger.reserve(("job:j1",), 80, 0.0)
    assert not ledger.has_limit("job:other")
    assert ledger.spent("job:other").tokens == 0


# -- the gateway under budgets ----------------------------------------------------------------


def test_a_job_token_budget_refuses_a_call_before_the_provider_is_called():
    async def main():
        rig = Rig()
        provider = rig.deploy("a")
        rig.deploy("b")
        rig.route("main", "a", "b")
        with pytest.raises(BudgetExceeded) as caught:
            await rig.ask(
                "main",
                max_tokens=200,
                budget=Budget(tokens=100),
                context=CallContext(job_id="j1"),
            )
        assert caught.value.detail["account"] == "job:j1"
        assert rig.log == []
        assert (provider.calls, rig.clock.sleeps) == (0, [])
        assert rig.ledger.held("job:j1").tokens == 0

    run(main())


def test_a_job_budget_accumulates_over_the_jobs_calls():
    async def main():
        rig = Rig()
        rig.deploy("a", prompt_tokens=50, completion_tokens=50)
        context = CallContext(job_id="j1")
        budget = Budget(tokens=2 * 100 + PROMPT + 100 - 1)  # room for two calls, not a third
        for _ in range(2):
            await rig.ask("a", max_tokens=100, budget=budget, context=context)
        with pytest.raises(BudgetExceeded):
            await rig.ask("a", max_tokens=100, budget=budget, context=context)
        assert rig.ledger.spent("job:j1").tokens == 200
        assert len(rig.log) == 2

    run(main())


@pytest.mark.parametrize("actual", ["small", "as_reserved"])
def test_concurrent_calls_never_overspend_a_usd_budget(actual):
    async def main():
        rig = Rig()
        gate = asyncio.Event()
        tokens = (3, 2) if actual == "small" else (PROMPT, 100)
        rig.deploy("priced", spec=PRICED, gate=gate, prompt_tokens=tokens[0],
                   completion_tokens=tokens[1])  # fmt: skip
        per_call = PRICE.cost(PROMPT, 100)
        limit = 2.0
        context = CallContext(job_id="j1")
        tasks = [
            asyncio.create_task(
                rig.ask("priced", max_tokens=100, budget=Budget(usd=limit), context=context)
            )
            for _ in range(50)
        ]
        for _ in range(20):
            await asyncio.sleep(0)
        held = rig.ledger.held("job:j1").usd
        assert held <= limit
        assert held + per_call > limit  # no further call would have fit
        gate.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        answered = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, BudgetExceeded)]
        assert len(answered) + len(refused) == 50
        assert len(answered) == int(limit // per_call) == 9
        spent = rig.ledger.spent("job:j1").usd
        assert spent <= limit
        assert spent == pytest.approx(sum(r.usage.cost_usd for r in answered))
        assert spent == pytest.approx(9 * PRICE.cost(*tokens))
        assert rig.ledger.held("job:j1").usd == pytest.approx(0.0)

    run(main())


def test_max_tokens_defaults_under_a_budget_and_the_provider_sees_it():
    async def main():
        rig = Rig(RetryPolicy(default_max_tokens=321))
        provider = rig.deploy("a")
        await rig.ask("a")  # no budget: left to the provider
        await rig.ask("a", budget=Budget(tokens=10_000), context=CallContext(job_id="j1"))
        await rig.ask("a", max_tokens=50, budget=Budget(tokens=10_000))
        assert [r.max_tokens for r in provider.requests] == [None, 321, 50]
        assert rig.ledger.spent("job:j1").tokens == 5

    run(main())


def test_a_failed_call_releases_its_hold_and_spends_nothing():
    async def main():
        rig = Rig()
        rig.deploy("priced", BadRequest("no"), spec=PRICED)
        context = CallContext(job_id="j1")
        with pytest.raises(BadRequest):
            await rig.ask("priced", budget=Budget(usd=5.0), context=context)
        assert rig.ledger.held("job:j1").usd == 0.0
        assert rig.ledger.held("job:j1").tokens == 0
        assert rig.ledger.spent("job:j1").usd == 0.0

    run(main())


def test_a_retried_call_pays_only_for_the_attempt_that_answered():
    async def main():
        rig = Rig()
        rig.deploy("priced", RateLimited("429", retry_after_s=1.0), spec=PRICED)
        context = CallContext(job_id="j1")
        response = await rig.ask("priced", budget=Budget(usd=5.0), context=context)
        assert response.usage.cost_usd == pytest.approx(PRICE.cost(3, 2))
        assert rig.ledger.spent("job:j1").usd == pytest.approx(PRICE.cost(3, 2))
        assert rig.ledger.held("job:j1").usd == pytest.approx(0.0)
        assert rig.clock.sleeps == [1.0]

    run(main())


def test_tenant_budgets_from_the_config_apply_across_jobs():
    async def main():
        def factory(_spec):
            return FakeProvider("m", prompt_tokens=100, completion_tokens=100)

        config = LLMConfig(
            models={"m": OfflineModel()},
            tenant_budgets={"acme": Budget(tokens=300)},
            retry=RetryPolicy(default_max_tokens=100),
        )
        pool = LLMAdapterPool(config=config, provider_factory=factory)
        request = llm_request("hello there", model="m")
        await pool.complete(request, CallContext(job_id="j1", tenant="acme", agent="w"))
        with pytest.raises(BudgetExceeded) as caught:
            await pool.complete(request, CallContext(job_id="j2", tenant="acme", agent="w"))
        assert caught.value.detail["account"] == "tenant:acme"
        await pool.complete(request, CallContext(job_id="j3", tenant="other", agent="w"))
        assert (await pool.spent("tenant:acme")).tokens == 200
        assert (await pool.spent("tenant:other")).tokens == 200  # recorded, not limited
        assert [r.job_id for r in await pool.usage()] == ["j1", "j3"]

    run(main())
