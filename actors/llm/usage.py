"""The usage one pool replica books: calls, tokens and cost by job, agent and deployment."""

from __future__ import annotations

from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.state import PoolState
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import LLMResponse, UsageRow

__all__ = ["UsageBook"]

UsageKey = tuple[str | None, str, str, str, str]
"""A row's job, agent, model alias, deployment and provider."""


class UsageBook:
    """The usage rows of one replica, kept in its :class:`PoolState` once one is attached."""

    def __init__(self) -> None:
        self.rows: dict[UsageKey, UsageRow] = {}
        self._state: PoolState | None = None

    def attach(self, state: PoolState, replica: str) -> None:
        """Read back what ``replica`` booked in ``state``, and book there from now on."""
        self.rows = {_row_key(row): row for row in state.usage(replica=replica)}
        self._state = state

    def here(self, job_id: str | None = None) -> list[UsageRow]:
        """The rows booked here (only ``job_id``'s when given)."""
        return [r for r in self.rows.values() if job_id is None or r.job_id == job_id]

    def book(self, context: CallContext, alias: str, response: LLMResponse) -> None:
        """Add one answered call to its row, and to the model's metrics."""
        key = (context.job_id, context.agent, alias, response.deployment, response.provider)
        row = self.rows.get(key) or UsageRow(
            job_id=context.job_id,
            agent=context.agent,
            user=context.user,
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
        row = self.rows[key] = row + usage.model_copy(update={"calls": 1})
        if self._state is not None:
            self._state.book(row)


def _row_key(row: UsageRow) -> UsageKey:
    return (row.job_id, row.agent, row.model, row.deployment, row.provider)
