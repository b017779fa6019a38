"""How one replica of the LLM pool reaches the others (under Ray: ``RayPoolPeers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from raytroupe.protocols import AgentMessage, LLMRequest, LLMResponse, ModelSpec
from raytroupe.protocols.spend import SpendLimitInfo

if TYPE_CHECKING:
    from raytroupe.actors.llm.gateway import CallContext

__all__ = ["PoolPeers"]


class PoolPeers(Protocol):
    """The other replicas of a pool, as one replica reaches them."""

    async def configure(
        self, models: Mapping[str, ModelSpec], *, replace: bool, operator: bool
    ) -> None:
        """Serve ``models`` on each (see ``raytroupe.actors.llm.pool.LLMAdapterPool``)."""
        ...

    async def remove(self, alias: str) -> None:
        """Stop serving ``alias`` on each."""
        ...

    async def spend_limits(self, infos: list[SpendLimitInfo]) -> None:
        """Have each hold ``infos`` as the spend limits set at run time."""
        ...

    async def cancel(self, job_id: str) -> int:
        """Stop the job's calls on each; how many were stopped."""
        ...

    def cooled(self, deployment: str, wait_s: float) -> None:
        """Tell each, without waiting, that ``deployment`` rests for ``wait_s``."""
        ...

    async def first(self, message: AgentMessage) -> AgentMessage:
        """``llm-0``'s reply to the envelope ``message`` (a model only it serves)."""
        ...

    async def complete_first(self, request: LLMRequest, context: CallContext) -> LLMResponse:
        """``llm-0``'s answer to ``request`` (a model only it serves)."""
        ...
