"""Spend alerts said: a log line, the metric, and a ``spend_alert`` event of the job.

The gateway names the alert thresholds a call's cost crossed (each once, see
:mod:`raytroupe.actors.llm.windows`); :class:`AlertSender` is its ``on_alert``: it logs and
counts each at once, and sends them on to the job's orchestrator shard as the pool sends
streamed deltas (sender ``llm``), never making the call wait for the router.
"""

from __future__ import annotations

import asyncio

import structlog

from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import AgentMessage, orchestrator_address
from raytroupe.protocols.spend import SpendAlert

__all__ = ["AlertSender"]

log = structlog.get_logger("raytroupe.llm")


class AlertSender:
    """Says each alert a call fired (see the module); without a router, logs and counts."""

    def __init__(self, router: RouterClient | None) -> None:
        self._router = router
        self._sending: set[asyncio.Task[None]] = set()

    def __call__(self, context: CallContext, alerts: list[SpendAlert]) -> None:
        """Log and count ``alerts`` now; send them to the job's shard in the background."""
        for alert in alerts:
            log.warning("spend_alert", job_id=context.job_id, **alert.model_dump(exclude={"kind"}))
            metrics.spend_alert(alert.limit, alert.tenant, alert.threshold)
        if self._router is None or context.job_id is None:
            return
        task = asyncio.create_task(self._send(self._router, context, alerts))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    @staticmethod
    async def _send(router: RouterClient, context: CallContext, alerts: list[SpendAlert]) -> None:
        for alert in alerts:
            message = AgentMessage(
                sender="llm",
                recipient=orchestrator_address(context.job_id),
                job_id=context.job_id,
                tenant=context.tenant,
                user=context.user,
                payload=alert,
            )
            try:
                await router.request(message)
            except Exception as exc:  # noqa: BLE001 - the log and the metric have it
                log.warning("spend_alert_not_sent", job_id=context.job_id, error=repr(exc))
