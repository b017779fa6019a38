"""Sends a shard's pending deliveries: signed, through the outbound policy, retried with backoff.

Each job shard runs one :class:`Deliverer` over the deliveries of the jobs it owns, so no two
processes send the same delivery at once; a shard that restarts finds its pending ones in the
journal and goes on. Delivery is at least once: a shard that dies after the endpoint answered
and before the answer was recorded sends it again, with the same ``webhook-id``, which is how
a receiver knows it has seen it.

An attempt is delivered when the endpoint answers 2xx. Anything else (another status, a
refused or failed connection, a timeout) is tried again after ``retry_s * 2**(attempts-1)``
seconds (at most ``max_retry_s``, with jitter) until ``attempts`` are spent; it then stays
``failed`` with its last error, listed by ``webhooks deliveries``. Redirects are not followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import random
import time
from typing import Final

import httpx
import structlog
from standardwebhooks.webhooks import Webhook as Signer

from raytroupe.actors.notify.store import Due, WebhookStore
from raytroupe.actors.outbound import Outbound
from raytroupe.protocols.config.webhooks import WebhooksConfig

__all__ = ["Deliverer"]

log = structlog.get_logger("raytroupe.webhooks")

_USER_AGENT: Final = "raytroupe-webhooks/1"


class Deliverer:
    """Sends the pending deliveries of ``shard`` from ``store``, as ``config`` says.

    Args:
        store: where deliveries are kept.
        shard: the job shard whose deliveries it sends.
        config: attempts, backoff, timeout and the outbound network policy.
        outbound: the guard every connection goes through (default: ``config.network``'s).
    """

    def __init__(
        self,
        store: WebhookStore,
        shard: int,
        config: WebhooksConfig,
        outbound: Outbound | None = None,
    ) -> None:
        self._store, self._shard, self._config = store, shard, config
        self._outbound = outbound or Outbound(config.network)
        self._client: httpx.AsyncClient | None = None
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look for due deliveries now (an event was just journaled)."""
        self._wake.set()

    async def run(self) -> None:
        """Send due deliveries until cancelled, looking again every ``poll_s`` or when woken."""
        try:
            while True:
                try:
                    sent = await self.send_due()
                except Exception as exc:  # noqa: BLE001 - a store hiccup: look again later
                    log.warning("webhook_deliveries_unread", error=str(exc)[:300])
                    sent = 0
                if sent:
                    continue
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._config.poll_s)
        finally:
            await self.close()

    async def send_due(self) -> int:
        """Make one attempt at each delivery due now; how many were attempted."""
        due = await asyncio.to_thread(self._store.due, self._shard)
        if due:
            await asyncio.gather(*(self._attempt(d) for d in due))
        return len(due)

    async def close(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._outbound.httpx_transport(),
                timeout=self._config.timeout_s,
                follow_redirects=False,
                trust_env=False,
            )
        return self._client

    def _headers(self, due: Due) -> dict[str, str]:
        headers = {"content-type": "application/json", "user-agent": _USER_AGENT}
        if due.kind == "a2a":  # as A2A's own push sender does
            headers.update(due.headers)
            if due.secret:
                headers["X-A2A-Notification-Token"] = due.secret
            return headers
        now = datetime.datetime.now(tz=datetime.UTC)
        signature = Signer(due.secret).sign(due.id, now, due.body)
        headers.update(
            {
                "webhook-id": due.id,
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": signature,
            }
        )
        return headers

    async def _attempt(self, due: Due) -> None:
        status: int | None = None
        error: str | None = None
        try:
            # the status is all that is read: an endpoint's body (however large) is never
            async with self._http().stream(
                "POST", due.url, content=due.body.encode(), headers=self._headers(due)
            ) as answer:
                status = answer.status_code
            if not 200 <= status < 300:  # noqa: PLR2004 - HTTP's success range
                error = f"the endpoint answered {status}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        attempts = due.attempts + 1
        retry_at = None
        if error is not None and attempts < self._config.attempts:
            wait = min(self._config.max_retry_s, self._config.retry_s * 2 ** (attempts - 1))
            retry_at = time.time() + wait * random.uniform(0.8, 1.0)  # noqa: S311 - jitter
        log.info(
            "webhook_attempt", delivery=due.id, webhook=due.webhook_id, attempt=attempts,
            status=status, error=error, retry_at=retry_at,
        )  # fmt: skip
        await asyncio.to_thread(
            self._store.attempted, due.id, status_code=status, error=error, retry_at=retry_at
        )
