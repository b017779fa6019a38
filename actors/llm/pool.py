"""The LLM adapter pool: model aliases behind one envelope interface, through the gateway."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeGuard, assert_never

import structlog

from raytroupe.actors.endpoint import RestartStore, RouterClient, TakesBatches, serve_envelope
from raytroupe.actors.llm.alerts import AlertSender
from raytroupe.actors.llm.budget import Ledger, Spend
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.configured import (
    ConfiguredAliases,
    _Saved,  # noqa: F401 - old kept pickles name it here
)
from raytroupe.actors.llm.factory import build_provider
from raytroupe.actors.llm.gateway import CallContext, Gateway
from raytroupe.actors.llm.job_calls import JobCalls
from raytroupe.actors.llm.local.provider import InProcessServers, LocalModelProvider, LocalServers
from raytroupe.actors.llm.peers import PoolPeers
from raytroupe.actors.llm.pricing import Price, PriceTable
from raytroupe.actors.llm.provider import DeltaSink, LLMProvider
from raytroupe.actors.llm.rates import AgentRates
from raytroupe.actors.llm.replay import KeptCalls, turn_key
from raytroupe.actors.llm.replicas import check_share, reaches_script, served_here
from raytroupe.actors.llm.set_limits import SetLimits
from raytroupe.actors.llm.state import PoolState
from raytroupe.actors.llm.streaming import DeltaForwarder
from raytroupe.actors.llm.trust import ModelTrust
from raytroupe.actors.llm.usage import UsageBook
from raytroupe.actors.llm.windows import SpendWindows
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import (
    AgentMessage,
    CancelJob,
    Cancelled,
    ConfigError,
    DeploymentSpec,
    LLMRequest,
    LLMResponse,
    LocalModel,
    ModelError,
    ModelSpec,
    OfflineModel,
    TroupeError,
    UsageRow,
)
from raytroupe.protocols.spend import SpendLimit, SpendLimitInfo, SpendWindowView

__all__ = ["DEFAULT_MODELS", "LLMAdapterPool", "PoolPeers"]


log = structlog.get_logger("raytroupe.llm")

_REPR_ALIASES = 8

"""Aliases named in the pool's ``repr`` (the Ray dashboard's); the rest are counted."""

DEFAULT_MODELS: Mapping[str, ModelSpec] = {"default": OfflineModel(), "offline": OfflineModel()}
"""Aliases every pool starts with: the offline provider, with no latency."""


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
        replica: which of the ``config.replicas`` replicas this is (its name: ``llm-<n>``).
        peers: the other replicas (under Ray: :class:`raytroupe.actors.ray_handles.RayPoolPeers`):
            aliases configured or removed here, cancels and cooldowns are passed on to them.
        local_servers: where the servers of local models run (under Ray:
            :class:`raytroupe.actors.llm.local.ray_servers.RayLocalServers`, the actors
            ``model/<alias>``); by default, supervised in this process.
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
        replica: int = 0,
        peers: PoolPeers | None = None,
        local_servers: LocalServers | None = None,
    ) -> None:
        config = config or LLMConfig()
        if not 0 <= replica < config.replicas:
            raise ConfigError(f"replica {replica} of a pool of {config.replicas}", replica=replica)
        self.name = f"llm-{replica}"
        self._replicas = config.replicas
        self._peers = peers
        self._kept = ConfiguredAliases(restart_store)
        self._factory = provider_factory
        self._local = local_servers or InProcessServers()
        self._router = router
        self._state_at = state
        self._state: PoolState | None = None
        self._ledger = Ledger(config.tenant_budgets)
        self._windows = SpendWindows(config.spend_limits)
        self._set_limits = SetLimits(config.spend_limits, self._windows)
        self._gateway = gateway or Gateway(
            config.retry,
            PriceTable({k: Price(*v) for k, v in config.prices.items()}),
            self._ledger,
            allow_unpriced=config.allow_unpriced,
            share=(replica, config.replicas),
            on_cooldown=self._cooled_here,
            windows=self._windows,
            rates=AgentRates(config.agent_rate_limits, config.replicas),
            on_alert=AlertSender(router),
        )
        self._specs: dict[str, ModelSpec] = {}
        self._broken: dict[str, ConfigError] = {}
        self._usage = UsageBook()
        self._calls = JobCalls()
        self._kept_calls = KeptCalls(self._ledger)
        self._trust = ModelTrust(config.network, config.keys, own_addresses)
        self._trust.trust([*config.models.values(), *(models or {}).values()])
        self._bind_all({**DEFAULT_MODELS, **config.models, **(models or {})})

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        aliases = sorted(self._specs)
        shown = ", ".join(aliases[:_REPR_ALIASES])
        if len(aliases) > _REPR_ALIASES:
            shown += f" and {len(aliases) - _REPR_ALIASES} more"
        replica = self.name.removeprefix("llm-")
        return (
            f"LLMAdapterPool(replica {replica} of {self._replicas}, "
            f"{len(aliases)} alias(es): {shown})"
        )

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Serve again what was configured before a restart; read back the ledger and usage."""
        if await self._kept.load():
            self._trust.trust(self._kept.operators())
            changed = {a: s for a, s in self._kept.models.items() if self._specs.get(a) != s}
            replaced = [p for p in map(self._gateway.unbind, changed) if p is not None]
            self._bind_all(changed)
            for provider in replaced:  # the constructor's, for an alias configured since
                await provider.close()
        at = self._state_at
        if at is not None:
            if isinstance(at, PoolState):
                state, at.replica = at, self.name  # its holds and rows are this replica's
            else:
                state = await asyncio.to_thread(PoolState, at, replica=self.name)
            # holds this replica left when it died; replica 0 also books those of replicas
            # no longer configured (a pool scaled down, or from before replicas)
            live = [f"llm-{n}" for n in range(self._replicas)] if self.name == "llm-0" else None
            booked = await asyncio.to_thread(state.recover, live)
            if booked:
                log.warning("open_holds_booked", replica=self.name, holds=booked)
            self._ledger.attach(state)
            self._usage.attach(state, self.name)
            await asyncio.to_thread(self._set_limits.load, state)
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
        self,
        models: Mapping[str, ModelSpec],
        *,
        replace: bool = False,
        operator: bool = False,
        local: bool = False,
    ) -> None:
        """Serve ``models`` (on every replica, unless ``local``: a replica passing it on).

        An alias already bound to an equal spec keeps its provider (and a scripted provider
        its remaining turns). With ``replace=False`` an alias bound to a different spec is a
        ``ConfigError``; with ``replace=True`` the old provider is replaced, then closed.

        Models from a team (``operator=False``) are checked against the operator's trust
        (:mod:`raytroupe.actors.llm.trust`): a key variable it did not allow for that host, or a
        ``base_url`` the network policy refuses, is a ``ConfigError``. ``operator=True`` (a
        driver's ``raytroupe.runtime.connect(llm=...)``) extends that trust instead.

        Raises:
            ConfigError: a conflicting alias without ``replace``, a key that is not set, a
                model past the operator's trust, or a ``max_concurrency`` below the number of
                replicas; nothing is changed.
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
        if not operator:  # who may configure it, before how it is shared
            for alias, spec in changed.items():
                await self._trust.check(alias, spec)
        for alias, spec in changed.items():
            check_share(alias, spec, self._replicas)
        if operator:
            self._trust.trust(changed.values())
        built = {
            a: self._build(a, s) for a, s in changed.items() if self._served_here(s)
        }  # build every provider first: a missing key leaves nothing half-applied
        replaced = []
        for alias, spec in changed.items():
            old = self._gateway.unbind(alias)
            self._broken.pop(alias, None)
            self._specs[alias] = spec
            self._gateway.bind(alias, spec, built.get(alias))
            if old is not None:
                replaced.append(old)
        self._kept.keep(changed, operator=operator)
        # every alias is bound before any old provider is closed: a close that raises (a
        # scripted provider with turns left) cannot leave the configuration half applied
        errors = []
        for old in replaced:
            try:
                await old.close()
            except ModelError as exc:
                errors.append(exc)
        if self._peers is not None and not local:  # checked here: they take the same
            await self._peers.configure(models, replace=replace, operator=operator)
        if errors:
            raise errors[0]

    def _build(self, alias: str, spec: DeploymentSpec) -> LLMProvider:
        if self._factory is not None:
            return self._factory(spec)
        if isinstance(spec, LocalModel):  # its server is the operator's own: no outbound policy
            return LocalModelProvider(alias, spec, self._local)
        return build_provider(spec, outbound=self._trust.outbound)

    async def remove(self, alias: str, *, local: bool = False) -> None:
        """Stop serving ``alias`` and close its provider (a scripted one checks it was used up).

        On every replica, unless ``local`` (a replica passing it on).

        Raises:
            ScriptError: a scripted provider still had turns.
        """
        if self._peers is not None and not local:
            await self._peers.remove(alias)
        if isinstance(self._specs.get(alias), LocalModel) and not local:
            await self._local.stop(alias)
        self._specs.pop(alias, None)
        self._kept.forget(alias)
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
        if self._peers is not None and self._forwards(request.model):
            return await self._peers.complete_first(request, context)
        if context.turn is not None:
            return await self._kept_calls.call(
                context.turn, lambda: self._made(request, context, on_delta), context, request
            )
        return await self._made(request, context, on_delta)

    async def _made(
        self, request: LLMRequest, context: CallContext, on_delta: DeltaSink | None
    ) -> LLMResponse:
        """The call made through the gateway, its usage booked."""
        try:
            if request.model in self._broken:
                raise self._broken[request.model]
            response = await self._gateway.complete(request, context, on_delta)
        except TroupeError as exc:
            alias = request.model if request.model in self._specs else "unknown"
            metrics.llm_failed(alias, exc.code)
            raise
        self._usage.book(context, request.model, response)
        return response

    async def usage(self, job_id: str | None = None) -> list[UsageRow]:
        """Usage by job, agent and model (only ``job_id``'s when given), on all replicas."""
        if self._state is None:
            return await self.usage_here(job_id)
        return await asyncio.to_thread(self._state.usage, job_id=job_id)

    async def usage_here(self, job_id: str | None = None) -> list[UsageRow]:
        """What this replica booked of :meth:`usage`."""
        return self._usage.here(job_id)

    async def spent(self, key: str) -> Spend:
        """What a budget account (``job:<id>``, ``tenant:<name>``) has spent, on all replicas."""
        if self._state is not None:
            return await asyncio.to_thread(self._ledger.spent, key)
        return self._ledger.spent(key)

    async def spend_windows(self, tenant: str | None = None) -> list[SpendWindowView]:
        """Each spend limit of ``tenant`` (None: every tenant's) with its window's spend now."""
        if self._state is not None:
            return await asyncio.to_thread(self._windows.report, self._ledger, tenant)
        return self._windows.report(self._ledger, tenant)

    async def spend_limits(self, tenant: str | None = None) -> list[SpendLimitInfo]:
        """Every spend limit in force (on ``tenant``, if given): configured, then set."""
        return self._set_limits.listed(tenant)

    async def put_spend_limit(self, name: str, limit: SpendLimit, by: str = "") -> SpendLimitInfo:
        """Set the spend limit ``name`` now, on every replica (see :mod:`.set_limits`)."""
        info = await asyncio.to_thread(self._set_limits.put, name, limit, by, self._state)
        if self._peers is not None:
            await self._peers.spend_limits(self._set_limits.set_here())
        return info

    async def delete_spend_limit(self, name: str) -> SpendLimitInfo:
        """Drop the spend limit ``name`` set at run time, on every replica; what it was."""
        info = await asyncio.to_thread(self._set_limits.delete, name, self._state)
        if self._peers is not None:
            await self._peers.spend_limits(self._set_limits.set_here())
        return info

    async def adopt_spend_limits(self, infos: list[SpendLimitInfo]) -> None:
        """Hold ``infos`` as the limits set at run time (a peer just changed them)."""
        self._set_limits.adopt(infos)

    async def cancel_job(self, job_id: str) -> int:
        """Stop the job's model calls here; how many were running (a peer passing a cancel).

        A call of the job that arrives afterwards (it was on its way, through another router
        shard) is refused with ``JobCancelled``.
        """
        return self._calls.cancel(job_id)

    async def cooled(self, deployment: str, wait_s: float) -> bool:
        """Rest ``deployment`` for ``wait_s``: another replica saw it fail (False: unknown)."""
        return self._gateway.cool(deployment, wait_s)

    def _cooled_here(self, deployment: str, wait_s: float) -> None:
        if self._peers is not None:
            self._peers.cooled(deployment, wait_s)

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point (called by the router)."""
        return await serve_envelope(data, self._handle, me="llm", accepts=(LLMRequest, CancelJob))

    async def _handle(self, message: AgentMessage, payload: LLMRequest | CancelJob) -> AgentMessage:
        match payload:
            case CancelJob():
                stopped = await self.cancel_job(message.job_id or "")
                if self._peers is not None and message.job_id:
                    stopped += await self._peers.cancel(message.job_id)
                return message.reply(Cancelled(stopped=stopped), sender="llm")
            case LLMRequest():
                return await self._calls.run(message, lambda: self._serve(message, payload))
            case _:
                assert_never(payload)

    async def _serve(self, message: AgentMessage, request: LLMRequest) -> AgentMessage:
        if self._peers is not None and self._forwards(request.model):
            return await self._peers.first(message)  # llm-0 answers (and streams) it
        context = CallContext(
            job_id=message.job_id,
            tenant=message.tenant,
            agent=message.sender,
            user=message.user,
            key=message.key,
            team=message.team,
            turn=turn_key(message.tenant, message.job_id, request),
        )
        forwarder = None
        if request.stream and self._router is not None and message.job_id is not None:
            forwarder = DeltaForwarder(self._router, message)
        try:
            response = await self.complete(request, context, forwarder)
        finally:
            if forwarder is not None:
                await forwarder.flush()
        log.debug("completed", msg_id=message.id, job_id=message.job_id, model=response.model)
        return message.reply(response, sender="llm")

    def _bind(self, alias: str, spec: ModelSpec) -> None:
        self._specs[alias] = spec
        provider = self._build(alias, spec) if self._served_here(spec) else None
        self._gateway.bind(alias, spec, provider)

    @property
    def _forwards_stateful(self) -> bool:
        return self._peers is not None and self.name != "llm-0"

    def _served_here(self, spec: ModelSpec) -> TypeGuard[DeploymentSpec]:
        return served_here(spec, forwards_scripts=self._forwards_stateful)

    def _forwards(self, alias: str) -> bool:
        """Whether a call to ``alias`` goes to ``llm-0``: it may reach a scripted model."""
        return self._forwards_stateful and reaches_script(self._specs, alias)
