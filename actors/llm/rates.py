"""Agents' call rates: each tenant's agents paced to their configured calls a minute.

:class:`AgentRates` holds one pacer per limited agent (``LLMConfig.agent_rate_limits``,
:class:`~raytroupe.protocols.spend.AgentRateLimit`): a call of the agent waits for its turn
before the gateway tries any deployment. Each pool replica paces its share of the rate
(``rpm / replicas``), as it does a deployment's ``rpm``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

from aiolimiter import AsyncLimiter

from raytroupe.protocols.policy import unscoped
from raytroupe.protocols.spend import AgentRateLimit

__all__ = ["PACERS_KEPT", "AgentRates"]

PACERS_KEPT: Final = 4096
"""Agents' pacers a replica keeps (the least recently used go first)."""


class AgentRates:
    """The pacers of the agents under a rate limit (see the module)."""

    def __init__(self, limits: Mapping[str, AgentRateLimit], replicas: int = 1) -> None:
        self._by_tenant: dict[str, list[tuple[str, AgentRateLimit]]] = {}
        for name, limit in limits.items():
            self._by_tenant.setdefault(limit.tenant, []).append((name, limit))
        self._replicas = replicas
        self._pacers: OrderedDict[tuple[str, str], AsyncLimiter] = OrderedDict()

    async def wait(self, tenant: str, agent: str) -> None:
        """Wait until a call of ``tenant``'s ``agent`` may go, under every limit on it."""
        written = unscoped(agent, tenant)
        for name, limit in self._by_tenant.get(tenant, ()):
            if limit.agent is not None and limit.agent != written:
                continue
            await self._pacer(name, written, limit).acquire()

    def _pacer(self, name: str, agent: str, limit: AgentRateLimit) -> AsyncLimiter:
        key = (name, agent)
        pacer = self._pacers.get(key)
        if pacer is None:
            # one call every 60 / rate seconds, no burst (a deployment's rpm paces the same)
            pacer = self._pacers[key] = AsyncLimiter(1, 60.0 * self._replicas / limit.rpm)
            while len(self._pacers) > PACERS_KEPT:
                self._pacers.popitem(last=False)
        else:
            self._pacers.move_to_end(key)
        return pacer
