"""The gateway's retry loop: retry-after, backoff, fallbacks, cooldowns, typed errors, streams."""

import asyncio
import random

import pytest
from llm_fakes import FakeClock, Rig, spin
from wiring import llm_request, run

from raytroupe.actors.llm.budget import Ledger
from raytroupe.actors.llm.deployment_state import backoff_s
from raytroupe.actors.llm.gateway import CallContext, Gateway, RetryPolicy
from raytroupe.actors.llm.pricing import PriceTable
from raytroupe.actors.llm.scripted import ScriptedProvider
from raytroupe.protocols import (
    AuthFailed,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    ErrorCode,
    ModelError,
    ModelTimeout,
    OfflineModel,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
    ScriptedModel,
    ScriptedTurn,
)


def test_rate_limited_with_retry_after_waits_exactly_that_long_then_succeeds():
    async def main():
        clock = FakeClock()
        gateway = Gateway(
            RetryPolicy(), PriceTable(), Ledger(), clock=clock, sleep=clock.sleep,
            rng=random.Random(0),  # noqa: S311
        )  # fmt: skip
        spec = ScriptedModel(
            turns=(
                ScriptedTurn(error=ErrorCode.RATE_LIMITED, retry_after_s=1.5),
                ScriptedTurn(text="fine"),
            )
        )
        provider = ScriptedProvider(spec)
        gateway.bind("solo", spec, provider)
        response = await gateway.complete(llm_request("hi", model="solo"), CallContext())
        assert (response.text, response.deployment) == ("fine", "solo")
        assert clock.sleeps == [1.5]
        assert clock.now == 1.5
        assert provider.remaining == 0

    run(main())


@pytest.mark.parametrize("retry_after", [0.25, 1.5, 7.0])
def test_fractional_retry_after_is_honoured_not_rounded(retry_after):
    async def main():
        rig = Rig()
        provider = rig.deploy("solo", RateLimited("429", retry_after_s=retry_after))
        response = await rig.ask("solo")
        assert response.text == "ok"
        assert rig.clock.sleeps == [retry_after]
        assert provider.times == [0.0, retry_after]

    run(main())


def test_without_retry_after_backoff_is_jittered_exponential():
    async def main():
        rig = Rig(RetryPolicy(max_attempts=4, base_backoff_s=0.5, max_backoff_s=30.0), seed=7)
        rig.deploy("solo", Overloaded("a"), ProviderUnavailable("b"), Overloaded("c"))
        assert (await rig.ask("solo")).text == "ok"
        replica = random.Random(7)  # noqa: S311
        expected = [replica.uniform(d / 2, d) for d in (0.5, 1.0, 2.0)]
        assert rig.clock.sleeps == pytest.approx(expected)
        for wait, ceiling in zip(rig.clock.sleeps, (0.5, 1.0, 2.0), strict=True):
            assert ceiling / 2 <= wait <= ceiling

    run(main())


def test_backoff_stays_within_half_to_full_capped_delay():
    rng = random.Random(0)  # noqa: S311
    for failures in range(1, 12):
        ceiling = min(4.0, 0.5 * 2 ** (failures - 1))
        for _ in range(50):
            assert ceiling / 2 <= backoff_s(failures, 0.5, 4.0, rng) <= ceiling


@pytest.mark.parametrize("max_attempts", [1, 2, 3, 5, 8])
def test_max_attempts_counts_fallbacks_then_reraises_the_last_error(max_attempts):
    async def main():
        rig = Rig(RetryPolicy(max_attempts=max_attempts))
        for name in ("a", "b", "f"):
            rig.deploy(name, then=Overloaded(f"{name} is overloaded"))
        rig.route("main", "a", "b", fallbacks=("f",))
        with pytest.raises(Overloaded) as caught:
            await rig.ask("main")
        assert len(rig.log) == max_attempts
        assert rig.log[:3] == ["a", "b", "f"][:max_attempts]
        assert caught.value.detail["deployment"] == rig.log[-1]
        assert str(caught.value) == f"{rig.log[-1]} is overloaded"

    run(main())


def test_retryable_failure_moves_to_the_next_deployment_at_once():
    async def main():
        rig = Rig()
        rig.deploy("a", ProviderUnavailable("down"))
        rig.deploy("b")
        rig.route("main", "a", "b")
        response = await rig.ask("main")
        assert response.deployment == "b"
        assert rig.log == ["a", "b"]
        assert rig.clock.waited == 0.0
        assert rig.gateway.deployment("a").cooling() > 0.0
        assert rig.gateway.deployment("b").cooling() == 0.0

    run(main())


def test_fallbacks_are_tried_after_the_routes_own_deployments_in_order():
    async def main():
        rig = Rig(RetryPolicy(max_attempts=6))
        for name in ("a", "b", "f1"):
            rig.deploy(name, RateLimited("busy", retry_after_s=30.0))
        rig.deploy("c")
        rig.deploy("unused")
        rig.route("inner", "c")
        rig.route("main", "a", "b", fallbacks=("f1", "inner", "unused"))
        response = await rig.ask("main")
        assert response.deployment == "c"
        assert rig.log == ["a", "b", "f1", "c"]
        assert rig.clock.waited == 0.0

    run(main())


def test_a_cooling_deployment_is_skipped_by_later_calls():
    async def main():
        rig = Rig()
        rig.deploy("a", RateLimited("429", retry_after_s=10.0))
        rig.deploy("b")
        rig.route("main", "a", "b")
        await rig.ask("main")
        await rig.ask("main")
        assert rig.log == ["a", "b", "b"]
        rig.clock.advance(10.0)
        await rig.ask("main")
        assert rig.log[-1] == "a"

    run(main())


def test_a_new_call_waits_out_an_earlier_calls_retry_after():
    async def main():
        rig = Rig(RetryPolicy(max_attempts=1))
        provider = rig.deploy("solo", RateLimited("429", retry_after_s=5.0))
        with pytest.raises(RateLimited):
            await rig.ask("solo")
        await rig.ask("solo")
        assert provider.times[1] >= 5.0

    run(main())


def test_a_call_queued_for_the_slot_of_a_call_answered_429_waits_out_its_retry_after():
    # One call at a time: the second call waits for the first's slot. The first is answered
    # 429 + Retry-After 5 s; the cooldown must hold before its slot passes to the second
    # (the reliability suite saw the second reach the server ~0.08 s after the 429).
    async def main():
        rig = Rig(RetryPolicy(max_attempts=1))
        gate = asyncio.Event()
        provider = rig.deploy(
            "solo", RateLimited("429", retry_after_s=5.0), spec=OfflineModel(max_concurrency=1),
            gate=gate,
        )  # fmt: skip
        first = asyncio.ensure_future(rig.ask("solo"))
        await provider.entered.wait()
        second = asyncio.ensure_future(rig.ask("solo"))
        for _ in range(50):  # the second reaches the deployment's only slot, and waits there
            await asyncio.sleep(0)
        assert provider.calls == 1
        gate.set()
        with pytest.raises(RateLimited):
            await first
        await second
        assert provider.times == [0.0, 5.0]

    run(main())


def test_cooldown_deadline_is_never_shortened_by_a_later_shorter_retry_after():
    async def main():
        rig = Rig(RetryPolicy(max_attempts=1))
        gate = asyncio.Event()
        provider = rig.deploy(
            "solo",
            RateLimited("long", retry_after_s=10.0),
            RateLimited("short", retry_after_s=1.0),
            gate=gate,
        )
        first = asyncio.create_task(rig.ask("solo"))
        second = asyncio.create_task(rig.ask("solo"))
        await spin(lambda: provider.current == 2)
        gate.set()
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert [str(r) for r in results] == ["long", "short"]
        state = rig.gateway.deployment("solo")
        assert state.cooling() == 10.0
        assert state.failures == 2

    run(main())


def test_deployment_cooldown_only_moves_later():
    rig = Rig()
    rig.deploy("solo")
    state = rig.gateway.deployment("solo")
    state.failed(10.0)
    rig.clock.advance(2.0)
    state.failed(1.0)
    assert state.cooling() == 8.0
    state.failed(20.0)
    assert state.cooling() == 20.0
    state.succeeded(0.1)
    assert (state.failures, state.cooling()) == (0, 20.0)


def test_context_too_long_moves_to_a_larger_fallback_and_skips_smaller_ones():
    async def main():
        rig = Rig()
        rig.deploy("small", ContextTooLong("too long"), spec=OfflineModel(context_window=8000))
        rig.deploy("same", spec=OfflineModel(context_window=8000))
        rig.deploy("smaller", spec=OfflineModel(context_window=4000))
        rig.deploy("big", spec=OfflineModel(context_window=200_000))
        rig.route("main", "small", fallbacks=("same", "smaller", "big"))
        response = await rig.ask("main")
        assert response.deployment == "big"
        assert rig.log == ["small", "big"]
        assert rig.clock.waited == 0.0
        assert rig.gateway.deployment("small").cooling() == 0.0  # not the deployment's fault

    run(main())


def test_context_too_long_without_a_larger_fallback_is_reraised_without_retrying():
    async def main():
        rig = Rig()
        rig.deploy("small", ContextTooLong("too long"), spec=OfflineModel(context_window=8000))
        rig.deploy("tiny", spec=OfflineModel(context_window=4000))
        rig.route("main", "small", fallbacks=("tiny",))
        with pytest.raises(ContextTooLong):
            await rig.ask("main")
        assert rig.log == ["small"]
        assert rig.clock.sleeps == []

    run(main())


def test_auth_failure_moves_to_another_deployment():
    async def main():
        rig = Rig()
        rig.deploy("a", then=AuthFailed("bad key"))
        rig.deploy("b")
        rig.route("main", "a", "b")
        assert (await rig.ask("main")).deployment == "b"
        assert rig.log == ["a", "b"]
        assert rig.clock.waited == 0.0

    run(main())


def test_auth_failure_on_the_only_deployment_is_raised_after_one_call():
    async def main():
        rig = Rig()
        rig.deploy("solo", then=AuthFailed("bad key"))
        with pytest.raises(AuthFailed):
            await rig.ask("solo")
        assert rig.log == ["solo"]

    run(main())


@pytest.mark.parametrize("error", [BadRequest("malformed"), ContentFiltered("blocked")])
def test_bad_requests_and_filtered_content_are_never_retried(error):
    async def main():
        rig = Rig(RetryPolicy(max_attempts=5))
        rig.deploy("a", then=error)
        rig.deploy("b")
        rig.deploy("f")
        rig.route("main", "a", "b", fallbacks=("f",))
        with pytest.raises(type(error)):
            await rig.ask("main")
        assert rig.log == ["a"]
        assert rig.clock.sleeps == []
        assert rig.gateway.deployment("a").cooling() == 0.0

    run(main())


def test_a_timed_out_call_is_retried_on_the_next_deployment():
    async def main():
        rig = Rig()
        rig.deploy("slow", spec=OfflineModel(timeout_s=0.01), gate=asyncio.Event())  # never set
        rig.deploy("b")
        rig.route("main", "slow", "b")
        assert (await rig.ask("main")).deployment == "b"
        assert rig.log == ["slow", "b"]
        assert rig.gateway.deployment("slow").cooling() > 0.0

    run(main())


def test_a_timeout_is_a_typed_model_timeout():
    async def main():
        rig = Rig(RetryPolicy(max_attempts=1))
        rig.deploy("slow", spec=OfflineModel(timeout_s=0.01), gate=asyncio.Event())
        with pytest.raises(ModelTimeout) as caught:
            await rig.ask("slow")
        assert caught.value.detail["deployment"] == "slow"

    run(main())


@pytest.mark.parametrize(
    ("code", "moves_on"),
    [
        (ErrorCode.RATE_LIMITED, True),
        (ErrorCode.OVERLOADED, True),
        (ErrorCode.PROVIDER_UNAVAILABLE, True),
        (ErrorCode.AUTH, True),
        (ErrorCode.CONTEXT_TOO_LONG, True),
        (ErrorCode.BAD_REQUEST, False),
        (ErrorCode.CONTENT_FILTERED, False),
    ],
)
def test_scripted_typed_errors_move_on_or_stop_as_their_type_says(code, moves_on):
    async def main():
        rig = Rig()
        first = ScriptedModel(turns=(ScriptedTurn(error=code),), context_window=1000)
        second = ScriptedModel(turns=(ScriptedTurn(text="second"),), context_window=9000)
        providers = [ScriptedProvider(first), ScriptedProvider(second)]
        rig.gateway.bind("a", first, providers[0])
        rig.gateway.bind("b", second, providers[1])
        rig.route("main", "a", fallbacks=("b",))
        if moves_on:
            assert (await rig.ask("main")).text == "second"
        else:
            with pytest.raises(ModelError) as caught:
                await rig.ask("main")
            assert caught.value.code == code
        assert [p.remaining for p in providers] == [0, 0 if moves_on else 1]
        assert rig.clock.sleeps in ([], [0.0])

    run(main())
