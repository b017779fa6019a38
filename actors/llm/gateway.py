"""The gateway: routing, one retry loop, fallbacks, cooldowns, rate limits and budgets.

Every call makes at most ``RetryPolicy.max_attempts`` provider calls, fallbacks included.
Each attempt goes to the first candidate deployment that is neither excluded for this call
nor cooling down: the alias's own deployments (ordered by the route's strategy), then its
fallback aliases'. A retryable failure cools its deployment down for the provider's
Retry-After, or a jittered exponential backoff, whichever the provider asked for, so the next
attempt moves on to a fallback at once, or waits for the cooldown when there is none. A
context-window overflow or a refused key excludes that deployment for the call. A stream
that already delivered content is not retried unless the request allows it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from raytroupe.actors.llm.budget import KeptCall, Ledger
from raytroupe.actors.llm.deployment_state import DeploymentState, backoff_s, estimate_prompt_tokens
from raytroupe.actors.llm.pricing import PriceTable
from raytroupe.actors.llm.provider import DeltaSink, LLMProvider
from raytroupe.actors.llm.rates import AgentRates
from raytroupe.actors.llm.windows import SpendWindows
from raytroupe.actors.telemetry.genai import chat_answered, chat_call
from raytroupe.protocols import (
    AuthFailed,
    ConfigError,
    ContextTooLong,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    ModelError,
    ModelSpec,
    ModelTimeout,
    Overloaded,
    RouteSpec,
    TroupeError,
    UnpricedModel,
)
from raytroupe.protocols.config.llm import RetryPolicy
from raytroupe.protocols.spend import SpendAlert

__all__ = ["CallContext", "Gateway", "RetryPolicy"]

_LONGEST_COOLDOWN_S = 3600.0
"""A cooldown another replica reports beyond this (or not positive) is ignored."""

log = structlog.get_logger("raytroupe.llm")


@dataclass(frozen=True)
class CallContext:
    """Who a call is for: the budgets and the usage report key on these."""

    job_id: str | None = None
    tenant: str = "default"
    agent: str = ""
    user: str | None = None
    """The job's end user (the tenant's word): per-user spend windows key on it."""
    key: str | None = None
    """Who submitted the job (an API key's name): key spend limits bind it."""
    team: str | None = None
    """The job's team as its tenant named it: team spend limits bind it."""
    turn: str | None = None
    """The call's name in its job's run (``replay.turn_key``): its answer is kept when it is
    billed, and a call of that name is answered from it (None: not kept)."""


class Gateway:
    """Routes calls over bound deployments; see the module docstring.

    Args:
        allow_unpriced: let a call under a USD budget use a deployment without a known price
            (by default it is refused with ``UnpricedModel``: money fails closed).
        share: ``(replica, replicas)``: this pool's part of each deployment's limits.
        on_cooldown: told ``(deployment, seconds)`` when a failure cools a deployment down
            (the pool tells its other replicas, which then rest it too).
        windows: the spend windows calls fall under (``LLMConfig.spend_limits``).
        rates: the agents' call rates (``LLMConfig.agent_rate_limits``).
        on_alert: told ``(context, alerts)`` when a call's cost crosses a window's alert
            thresholds (each once, on whichever replica booked it).
        clock, sleep, rng: injected so tests can control time and jitter.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        prices: PriceTable,
        ledger: Ledger,
        *,
        allow_unpriced: bool = False,
        share: tuple[int, int] = (0, 1),
        on_cooldown: Callable[[str, float], None] | None = None,
        windows: SpendWindows | None = None,
        rates: AgentRates | None = None,
        on_alert: Callable[[CallContext, list[SpendAlert]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.policy = policy
        self._prices = prices
        self._ledger = ledger
        self._allow_unpriced = allow_unpriced
        self._share = share
        self._on_cooldown = on_cooldown
        self._windows = windows or SpendWindows({})
        self._rates = rates or AgentRates({})
        self._on_alert = on_alert
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()  # noqa: S311 - jitter and weights, not secrets
        self._aliases: dict[str, ModelSpec] = {}
        self._deployments: dict[str, DeploymentState] = {}

    # -- binding --------------------------------------------------------------------------

    def bind(self, alias: str, spec: ModelSpec, provider: LLMProvider | None) -> None:
        """Serve ``alias``: a deployment (with its provider) or a route (``provider=None``)."""
        self._aliases[alias] = spec
        self._deployments.pop(alias, None)
        if provider is not None and not isinstance(spec, RouteSpec):
            self._deployments[alias] = DeploymentState(
                alias, spec, provider, self._prices.price(spec), self._clock, share=self._share
            )

    def unbind(self, alias: str) -> LLMProvider | None:
        """Stop serving ``alias``; return its provider, if it had one."""
        self._aliases.pop(alias, None)
        state = self._deployments.pop(alias, None)
        return None if state is None else state.provider

    def deployment(self, alias: str) -> DeploymentState | None:
        """The live state of a deployment alias."""
        return self._deployments.get(alias)

    # -- calls ----------------------------------------------------------------------------

    async def complete(
        self, request: LLMRequest, context: CallContext, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        """Answer ``request`` through the alias it names.

        Raises:
            ConfigError: unknown alias, or a route naming something that is no deployment.
            BudgetExceeded: the call does not fit its job's or tenant's budget.
            ModelError: the last attempt's typed error, once attempts or candidates ran out.
        """
        groups = self._candidates(request.model, set())
        await self._rates.wait(context.tenant, context.agent)
        account = _account(request, context)
        if account is not None and request.budget is not None:
            self._ledger.set_limit(account, request.budget)
        excluded: set[str] = set()
        delivered = False

        async def forward(delta: LLMDelta) -> None:
            nonlocal delivered
            delivered = True
            if on_delta is not None:
                await on_delta(delta)

        def retry(exc: BaseException) -> bool:
            if not isinstance(exc, ModelError):
                return False
            if delivered and not request.retry_partial_stream:
                return False
            if isinstance(exc, ContextTooLong | AuthFailed):
                return bool(self._open(groups, excluded))
            return exc.retryable

        # each attempt waits for its own deployment (see _next), so tenacity never sleeps
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.policy.max_attempts),
            retry=retry_if_exception(retry),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                state = await self._next(groups, excluded)
                try:
                    return await self._attempt(state, request, context, forward)
                except ContextTooLong:
                    window = state.spec.context_window
                    excluded.update(
                        s.name
                        for group in groups
                        for s in group
                        if s is state
                        or (window and s.spec.context_window and s.spec.context_window <= window)
                    )
                    raise
                except AuthFailed:
                    excluded.add(state.name)
                    raise
                # a retryable failure cooled the deployment down in _attempt, before its slot
                # was freed for a call waiting on it
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    async def _attempt(
        self,
        state: DeploymentState,
        request: LLMRequest,
        context: CallContext,
        forward: DeltaSink,
    ) -> LLMResponse:
        account = _account(request, context)
        keys = (f"tenant:{context.tenant}",) + ((account,) if account is not None else ())
        windows = self._windows.accounts(
            context.tenant, context.agent, context.user, key=context.key, team=context.team
        )
        limited = [w.limit for _, _, w in windows if w.limit is not None]
        max_tokens = request.max_tokens or self.policy.default_max_tokens
        if request.max_tokens is None and (self._budgeted(keys) or limited):
            request = request.model_copy(update={"max_tokens": max_tokens})
        prompt = estimate_prompt_tokens(
            [m.text for m in request.messages] + [t.model_dump_json() for t in request.tools]
        )
        usd_limited = self._ledger.limits_usd(keys) or any(w.usd is not None for w in limited)
        if state.price is None and not self._allow_unpriced and usd_limited:
            model = getattr(state.spec, "model", state.name)
            raise UnpricedModel(
                f"{state.name} ({state.spec.provider} model {model!r}) has no known price, so "
                "a USD budget cannot be kept: the operator sets its price "
                "(input_usd_per_mtok / output_usd_per_mtok, or LLMConfig.prices) or allows "
                "unpriced models (LLMConfig.allow_unpriced)",
                deployment=state.name,
                model=model,
                provider=state.spec.provider,
            )
        estimate = 0.0 if state.price is None else state.price.cost(prompt, max_tokens)
        reservation = self._ledger.reserve(
            keys, prompt + max_tokens, estimate, context.turn, (w for _, _, w in windows)
        )
        usage = None
        answer: LLMResponse | None = None
        try:
            async with state.admitted(prompt + max_tokens):
                # a call that failed while this one waited for a slot may have asked for a pause
                if (pause := state.cooling()) > 0.0:
                    await self._sleep(pause)
                start = self._clock()
                with chat_call(
                    request,
                    state.spec,
                    deployment=state.name,
                    job_id=context.job_id,
                    agent=context.agent,
                ) as made:  # a failure is marked on it
                    try:
                        response = await asyncio.wait_for(
                            state.provider.complete(request, on_delta=forward),
                            state.spec.timeout_s,
                        )
                    except TimeoutError:
                        timeout = ModelTimeout(
                            f"{state.name} did not answer within {state.spec.timeout_s} s",
                            deployment=state.name,
                        )
                        self._failed(state, timeout)
                        raise timeout from None
                    except TroupeError as exc:
                        exc.detail.setdefault("deployment", state.name)
                        log.info(
                            "llm_attempt_failed",
                            deployment=state.name,
                            code=exc.code.value,
                            job_id=context.job_id,
                            retryable=exc.retryable,
                        )
                        if exc.retryable:  # now: leaving this block frees the slot for the next
                            self._failed(state, exc)
                        raise
                    chat_answered(made, response)
                state.succeeded(self._clock() - start)
            usage = self._prices.priced(state.spec, response.usage)
            answer = response.model_copy(
                update={
                    "usage": usage,
                    "deployment": state.name,
                    "context_window": state.spec.context_window,
                }
            )
        finally:
            kept = None
            if answer is not None and context.turn is not None and context.job_id is not None:
                kept = KeptCall(context.turn, context.job_id, answer)
            self._ledger.settle(reservation, usage, kept)
        if windows and self._on_alert is not None:
            alerts = SpendWindows.crossed(self._ledger, windows)
            if alerts:
                self._on_alert(context, alerts)
        await state.charge_tokens(usage.total_tokens - (prompt + max_tokens))
        return answer

    def _failed(self, state: DeploymentState, exc: TroupeError) -> None:
        wait = self._cooldown_s(exc, state)
        state.failed(wait)
        if self._on_cooldown is not None:
            self._on_cooldown(state.name, wait)

    def cool(self, deployment: str, wait_s: float) -> bool:
        """Rest ``deployment`` for ``wait_s`` (another replica saw it fail); False if unknown."""
        state = self._deployments.get(deployment)
        if state is None or not 0.0 < wait_s < _LONGEST_COOLDOWN_S:
            return False
        state.cool(wait_s)
        return True

    def _cooldown_s(self, exc: TroupeError, state: DeploymentState) -> float:
        """How long ``state`` rests after ``exc``: the provider's Retry-After, else backoff."""
        retry_after = exc.detail.get("retry_after_s")
        if isinstance(retry_after, int | float):
            return float(retry_after)
        return backoff_s(
            state.failures + 1, self.policy.base_backoff_s, self.policy.max_backoff_s, self._rng
        )

    # -- choosing -------------------------------------------------------------------------

    def _candidates(self, alias: str, seen: set[str]) -> list[list[DeploymentState]]:
        """Groups of deployments to try, in order: the alias's own, then each fallback's."""
        spec = self._aliases.get(alias)
        if spec is None:
            raise ConfigError(
                f"unknown model alias {alias!r}; known: {sorted(self._aliases)}", model=alias
            )
        if alias in seen:
            raise ConfigError(f"model alias {alias!r} is part of a fallback cycle", model=alias)
        seen = seen | {alias}
        if not isinstance(spec, RouteSpec):
            return [[self._deployments[alias]]]
        own = []
        for name in spec.deployments:
            state = self._deployments.get(name)
            if state is None:
                raise ConfigError(
                    f"route {alias!r} names {name!r}, which is not a deployment alias",
                    model=alias,
                )
            own.append(state)
        groups = [self._order(own, spec)]
        for fallback in spec.fallbacks:
            groups.extend(self._candidates(fallback, seen))
        return groups

    def _order(self, states: list[DeploymentState], route: RouteSpec) -> list[DeploymentState]:
        match route.strategy:
            case "static":
                return states
            case "weighted":
                pool, ordered = list(states), []
                while pool:
                    pick = self._rng.choices(pool, weights=[s.spec.weight for s in pool])[0]
                    pool.remove(pick)
                    ordered.append(pick)
                return ordered
            case "least_busy":
                return sorted(states, key=lambda s: s.in_flight)
            case "cost":
                return sorted(states, key=lambda s: s.cost_rank)
            case "latency":
                return sorted(states, key=lambda s: -1.0 if s.latency_s is None else s.latency_s)

    def _pick(
        self, groups: list[list[DeploymentState]], excluded: set[str]
    ) -> DeploymentState | None:
        for group in groups:
            for state in group:
                if state.name not in excluded and state.cooling() == 0.0:
                    return state
        return None

    def _open(
        self, groups: list[list[DeploymentState]], excluded: set[str]
    ) -> list[DeploymentState]:
        return [s for g in groups for s in g if s.name not in excluded]

    async def _next(
        self, groups: list[list[DeploymentState]], excluded: set[str]
    ) -> DeploymentState:
        """The deployment for the next attempt, after waiting out its cooldown if all cool.

        Raises:
            Overloaded: every candidate cools down longer than ``max_wait_s`` (retryable).
        """
        while True:
            state = self._pick(groups, excluded)
            if state is not None:
                return state
            soonest = min(self._open(groups, excluded), key=lambda s: s.cooling())
            wait = soonest.cooling()
            if wait > self.policy.max_wait_s:
                raise Overloaded(
                    f"every deployment for this call cools down for {wait:.1f} s more",
                    retry_after_s=wait,
                )
            # look again after the wait: another call's failure (a 429's Retry-After) may
            # have moved the cooldown later while this one slept
            await self._sleep(wait)

    def _budgeted(self, keys: tuple[str, ...]) -> bool:
        return any(self._ledger.has_limit(k) for k in keys)


def _account(request: LLMRequest, context: CallContext) -> str | None:
    """The budget account a call draws on: its job's, or the one its budget names.

    A graph node's child job names its parent's account (the orchestrator sets it, and
    refuses it from callers), so a job and its children share one budget.
    """
    named = request.budget.account if request.budget is not None else None
    job = named or context.job_id
    return None if job is None else f"job:{job}"
