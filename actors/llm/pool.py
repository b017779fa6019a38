"""The LLM adapter pool: model aliases behind one envelope interface, through the gateway."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

import structlog

from actors.endpoint import RestartStore, RouterClient, TakesBatches, serve_envelope
from actors.llm.budget import Ledger, Spend
from actors.llm.config import LLMConfig
from actors.llm.gateway import CallContext, Gateway
from actors.llm.offline import OfflineProvider
from actors.llm.pricing import Price, PriceTable
from actors.llm.provider import DeltaSink, LLMProvider
from actors.llm.scripted import ScriptedProvider
from actors.llm.state import PoolState
from actors.llm.trust import ModelTrust
from actors.outbound import Outbound
from actors.telemetry import metrics
from protocols import (
    AgentMessage,
    AnthropicModel,
    CancelJob,
    Cancelled,
    ConfigError,
    DeploymentSpec,
    JobCancelled,
    LLMDelta,
    LLMDeltas,
    LLMRequest,
    LLMResponse,
    ModelError,
    ModelSpec,
    OfflineModel,
    OpenAICompatibleModel,
    OpenAIModel,
    RouteSpec,
    ScriptedModel,
    TroupeError,
    UsageRow,
)

__all__ = ["DEFAULT_MODELS", "LLMAdapterPool", "build_provider"]

log = structlog.get_logger("raytroupe.llm")

_REPR_ALIASES = 8
"""Aliases named in the pool's ``repr`` (the Ray dashboard's); the rest are counted."""

DEFAULT_MODELS: Mapping[str, ModelSpec] = {"default": OfflineModel(), "offline": OfflineModel()}
"""Aliases every pool starts with: the offline provider, with no latency."""


def build_provider(spec: DeploymentSpec, *, outbound: Outbound | None = None) -> LLMProvider:
    """The provider that serves ``spec`` (SDKs are imported only when one is needed).

    With ``outbound``, a remote provider's every connection passes that network policy and
    it follows no redirect (its key goes only to its ``base_url``).

    Raises:
        ConfigError: the provider needs a key and its environment variable is not set.
    """
    match spec:
        case OfflineModel():
            return OfflineProvider(spec)
        case ScriptedModel():
            return ScriptedProvider(spec)
        case OpenAIModel() | OpenAICompatibleModel():
            import openai  # noqa: PLC0415 - lazy SDK

            from actors.llm.openai_provider import OpenAIProvider  # noqa: PLC0415

            client = outbound.sdk_http_client(openai.DefaultAsyncHttpxClient) if outbound else None
            return OpenAIProvider(spec, http_client=client)
        case AnthropicModel():
            import anthropic  # noqa: PLC0415

            from actors.llm.anthropic_provider import AnthropicProvider  # noqa: PLC0415

            client = (
                outbound.sdk_http_client(anthropic.DefaultAsyncHttpxClient) if outbound else None
            )
            return AnthropicProvider(spec, http_client=client)


class LLMAdapterPool(TakesBatches):
    """Serves ``LLMRequest`` envelopes by model alias. A plain class; Ray makes it ``llm``.

    Args:
        models: aliases to serve, on top of :data:`DEFAULT_MODELS` and ``config.models``.
        config: budgets, retry policy, prices, outbound policy (and more aliases).
        provider_factory: builds a provider for a deployment (tests may pass their own; the
            default builds them under the outbound policy).
        router: where streamed deltas go, as ``llm_delta`` events of the caller's job.
        restart_store: where the aliases given to :meth:`configure` are kept, so that a restarted
            pool serves them again (under Ray: ``GcsRestartStore("llm")``).
        state: where the budget ledger and usage are kept (a path or a :class:`PoolState`),
            so that a restarted pool neither forgets a spend nor lets a budget be overspent.
        own_addresses: the cluster's node addresses, which no provider may connect to.
    """

    def __init__(
        self,
        models: Mapping[str, ModelSpec] | None = None,
        *,
        config: LLMConfig | None = None,
        provider_factory: Callable[[DeploymentSpec], LLMProvider] | None = None,
        router: RouterClient | None = None,
        gateway: Gateway | None = None,
        restart_store: RestartStore | None = None,
        state: PoolState | str | Path | None = None,
        own_addresses: Sequence[str] = (),
    ) -> None:
        config = config or LLMConfig()
        self._restart_store = restart_store
        self._configured: dict[str, ModelSpec] = {}
        self._operator: set[str] = set()
        self._factory = provider_factory
        self._router = router
        self._state_at = state
        self._state: PoolState | None = None
        self._ledger = Ledger(config.tenant_budgets)
        self._gateway = gateway or Gateway(
            config.retry,
            PriceTable({k: Price(*v) for k, v in config.prices.items()}),
            self._ledger,
            allow_unpriced=config.allow_unpriced,
        )
        self._specs: dict[str, ModelSpec] = {}
        self._broken: dict[str, ConfigError] = {}
        self._usage: dict[tuple[str | None, str, str, str, str], UsageRow] = {}
        self._by_job: dict[str, set[asyncio.Task[object]]] = {}
        self._trust = ModelTrust(config.network, config.keys, own_addresses)
        self._trust.trust([*config.models.values(), *(models or {}).values()])
        self._bind_all({**DEFAULT_MODELS, **config.models, **(models or {})})

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        aliases = sorted(self._specs)
        shown = ", ".join(aliases[:_REPR_ALIASES])
        if len(aliases) > _REPR_ALIASES:
            shown += f" and {len(aliases) - _REPR_ALIASES} more"
        return f"LLMAdapterPool(one replica, {len(aliases)} alias(es): {shown})"

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Serve again what was configured before a restart; read back the ledger and usage."""
        if self._restart_store is not None:
            saved = await asyncio.to_thread(self._restart_store.load) or _Saved()
            if isinstance(saved, dict):  # kept by a pool from before operator aliases were kept
                saved = _Saved(models=saved)
            self._configured = dict(saved.models)
            self._operator = set(saved.operator)
            self._trust.trust(s for a, s in self._configured.items() if a in self._operator)
            changed = {a: s for a, s in self._configured.items() if self._specs.get(a) != s}
            replaced = [p for p in map(self._gateway.unbind, changed) if p is not None]
            self._bind_all(changed)
            for provider in replaced:  # the constructor's, for an alias configured since
                await provider.close()
        at = self._state_at
        if at is not None:
            state = at if isinstance(at, PoolState) else await asyncio.to_thread(PoolState, at)
            self._ledger.attach(state)
            self._usage = {_row_key(row): row for row in state.usage()}
            self._state = state

    async def on_stop(self) -> None:
        """Close every provider (their HTTP clients) and the state file."""
        await self.close()
        if self._state is not None:
            self._state.close()

    def _bind_all(self, models: Mapping[str, ModelSpec]) -> None:
        for alias, spec in models.items():
            try:
                self._bind(alias, spec)
            except ConfigError as exc:  # an actor must start; the alias reports why it can't
                self._specs[alias] = spec
                self._broken[alias] = exc

    async def serves_exactly(self, models: Mapping[str, ModelSpec]) -> bool:
        """Whether every alias of ``models`` is bound to that very spec here."""
        return all(self._specs.get(alias) == spec for alias, spec in models.items())

    async def configure(
        self, models: Mapping[str, ModelSpec], *, replace: bool = False, operator: bool = False
    ) -> None:
        """Serve ``models``.

        An alias already bound to an equal spec keeps its provider (and a scripted provider
        its remaining turns). With ``replace=False`` an alias bound to a different spec is a
        ``ConfigError``; with ``replace=True`` the old provider is replaced, then closed.

        Models from a team (``operator=False``) are checked against the operator's trust
        (:mod:`actors.llm.trust`): a key variable it did not allow for that host, or a
        ``base_url`` the network policy refuses, is a ``ConfigError``. ``operator=True`` (a
        driver's ``runtime.connect(llm=...)``) extends that trust instead.

        Raises:
            ConfigError: a conflicting alias without ``replace``, a key that is not set, or a
                model past the operator's trust; nothing is changed.
            ModelError: closing a replaced provider failed (e.g. ``ScriptError`` for unused
                turns); the new configuration is fully applied all the same.
        """
        conflicts = [a for a, s in models.items() if a in self._specs and self._specs[a] != s]
        if conflicts and not replace:
            raise ConfigError(
                f"model alias(es) {sorted(conflicts)} already serve a different model; "
                "choose another alias (or replace it explicitly)",
                aliases=sorted(conflicts),
            )
        changed = {a: s for a, s in models.items() if self._specs.get(a) != s}
        if operator:
            self._trust.trust(changed.values())
        else:
            for alias, spec in changed.items():
                await self._trust.check(alias, spec)
        built = {
            a: self._build(s) for a, s in changed.items() if not isinstance(s, RouteSpec)
        }  # build every provider first: a missing key leaves nothing half-applied
        replaced = []
        for alias, spec in changed.items():
            old = self._gateway.unbind(alias)
            self._broken.pop(alias, None)
            self._specs[alias] = spec
            self._gateway.bind(alias, spec, built.get(alias))
            if old is not None:
                replaced.append(old)
        if operator:
            self._operator.update(changed)
        self._keep(changed)
        # every alias is bound before any old provider is closed: a close that raises (a
        # scripted provider with turns left) cannot leave the configuration half applied
        errors = []
        for old in replaced:
            try:
                await old.close()
            except ModelError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def _keep(self, changed: Mapping[str, ModelSpec]) -> None:
        if changed:
            self._configured.update(changed)
            self._save()

    def _save(self) -> None:
        if self._restart_store is not None:
            self._restart_store.save(_Saved(dict(self._configured), tuple(sorted(self._operator))))

    def _build(self, spec: DeploymentSpec) -> LLMProvider:
        if self._factory is not None:
            return self._factory(spec)
        return build_provider(spec, outbound=self._trust.outbound)

    async def remove(self, alias: str) -> None:
        """Stop serving ``alias`` and close its provider (a scripted one checks it was used up).

        Raises:
            ScriptError: a scripted provider still had turns.
        """
        self._specs.pop(alias, None)
        self._operator.discard(alias)
        if self._configured.pop(alias, None) is not None:
            self._save()
        provider = self._gateway.unbind(alias)
        if provider is not None:
            await provider.close()

    async def close(self) -> None:
        """Close every provider (their HTTP clients); the pool serves nothing afterwards."""
        for alias in list(self._specs):
            provider = self._gateway.unbind(alias)
            self._specs.pop(alias, None)
            if provider is not None:
                try:
                    await provider.close()
                except ModelError as exc:  # a scripted provider with turns left: say so
                    log.warning("provider_close_failed", alias=alias, error=exc.message)

    async def models(self) -> dict[str, ModelSpec]:
        """Aliases and what they stand for."""
        return dict(self._specs)

    async def unservable(self) -> dict[str, str]:
        """Aliases of the configuration that cannot serve, and why (e.g. a key not set)."""
        return {alias: exc.message for alias, exc in self._broken.items()}

    async def complete(
        self,
        request: LLMRequest,
        context: CallContext | None = None,
        on_delta: DeltaSink | None = None,
    ) -> LLMResponse:
        """Answer one request through the gateway, and book its usage.

        Raises:
            ConfigError: the alias is unknown.
            BudgetExceeded: the call does not fit its job's or tenant's budget.
            ModelError: every attempt failed; the last typed error.
        """
        context = context or CallContext()
        try:
            if request.model in self._broken:
                raise self._broken[request.model]
            response = await self._gateway.complete(request, context, on_delta)
        except TroupeError as exc:
            alias = request.model if request.model in self._specs else "unknown"
            metrics.llm_failed(alias, exc.code)
            raise
        self._book(context, request.model, response)
        return response

    async def usage(self, job_id: str | None = None) -> list[UsageRow]:
        """Usage by job, agent and model (only ``job_id``'s when given)."""
        return [r for r in self._usage.values() if job_id is None or r.job_id == job_id]

    async def spent(self, key: str) -> Spend:
        """What a budget account (``job:<id>``, ``tenant:<name>``) has spent."""
        return self._ledger.spent(key)

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point (called by the router)."""
        return await serve_envelope(data, self._handle, me="llm", accepts=(LLMRequest, CancelJob))

    async def _handle(self, message: AgentMessage, payload: LLMRequest | CancelJob) -> AgentMessage:
        match payload:
            case CancelJob():
                running = self._by_job.pop(message.job_id or "", set())
                for call in running:
                    call.cancel()
                return message.reply(Cancelled(stopped=len(running)), sender="llm")
            case LLMRequest():
                return await self._tracked(message, payload)
            case _:
                assert_never(payload)

    async def _tracked(self, message: AgentMessage, request: LLMRequest) -> AgentMessage:
        """Serve ``request``, known as one of its job's calls (so that a cancel stops it)."""
        task = asyncio.current_task()
        if message.job_id is None or task is None:
            return await self._serve(message, request)
        running = self._by_job.setdefault(message.job_id, set())
        running.add(task)
        try:
            return await self._serve(message, request)
        except asyncio.CancelledError:
            if task.cancelling() and running is not self._by_job.get(message.job_id):
                task.uncancel()  # cancelled by cancel_job: answer, the caller may still listen
                raise JobCancelled("the job was cancelled", job_id=message.job_id) from None
            raise
        finally:
            running.discard(task)
            if not running and self._by_job.get(message.job_id) is running:
                del self._by_job[message.job_id]

    async def _serve(self, message: AgentMessage, request: LLMRequest) -> AgentMessage:
        context = CallContext(job_id=message.job_id, tenant=message.tenant, agent=message.sender)
        forwarder = None
        if request.stream and self._router is not None and message.job_id is not None:
            forwarder = _DeltaForwarder(self._router, message)
        try:
            response = await self.complete(request, context, forwarder)
        finally:
            if forwarder is not None:
                await forwarder.flush()
        log.debug("completed", msg_id=message.id, job_id=message.job_id, model=response.model)
        return message.reply(response, sender="llm")

    def _bind(self, alias: str, spec: ModelSpec) -> None:
        self._specs[alias] = spec
        provider = None if isinstance(spec, RouteSpec) else self._build(spec)
        self._gateway.bind(alias, spec, provider)

    def _book(self, context: CallContext, alias: str, response: LLMResponse) -> None:
        key = (context.job_id, context.agent, alias, response.deployment, response.provider)
        row = self._usage.get(key) or UsageRow(
            job_id=context.job_id,
            agent=context.agent,
            model=alias,
            deployment=response.deployment,
            provider=response.provider,
        )
        usage = response.usage
        metrics.llm_usage(
            alias,
            response.deployment,
            context.tenant,
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            latency_s=response.latency_s,
        )
        row = self._usage[key] = row.model_copy(
            update={
                "calls": row.calls + 1,
                "prompt_tokens": row.prompt_tokens + usage.prompt_tokens,
                "completion_tokens": row.completion_tokens + usage.completion_tokens,
                "cost_usd": row.cost_usd + usage.cost_usd,
            }
        )
        if self._state is not None:
            self._state.book(row)


@dataclass(frozen=True)
class _Saved:
    """What the pool keeps across restarts.

    The aliases configured since it started, and which of them the operator configured
    (their hosts and key variables are trusted).
    """

    models: dict[str, ModelSpec] = field(default_factory=dict)
    operator: tuple[str, ...] = ()


def _row_key(row: UsageRow) -> tuple[str | None, str, str, str, str]:
    return (row.job_id, row.agent, row.model, row.deployment, row.provider)


class _DeltaForwarder:
    """Sends a call's deltas to the orchestrator as ``llm_delta`` events, batched, in order.

    The provider never waits for the router: deltas queue up, and one task sends whatever
    has queued as one event at a time, so events arrive in the order the deltas did.
    """

    def __init__(self, router: RouterClient, cause: AgentMessage) -> None:
        self._router = router
        self._cause = cause
        self._queue: asyncio.Queue[LLMDelta] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, delta: LLMDelta) -> None:
        self._queue.put_nowait(delta)
        if self._task is None:
            self._task = asyncio.create_task(self._drain())

    async def flush(self) -> None:
        """Wait until every queued delta was sent, then stop."""
        if self._task is None:
            return
        await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _drain(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            event = LLMDeltas(agent=self._cause.sender, deltas=tuple(batch))
            try:
                await self._router.request(
                    self._cause.derive(sender="llm", recipient="orchestrator", payload=event)
                )
            except Exception as exc:  # noqa: BLE001 - a lost progress event must not fail the call
                log.warning("delta_forward_failed", job_id=self._cause.job_id, error=repr(exc))
            finally:
                for _ in batch:
                    self._queue.task_done()
