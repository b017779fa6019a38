"""The front desk's part for webhooks: make, list and drop a tenant's, and read deliveries.

A webhook's URL is checked when it is made, as every attempt to send to it is: under the
operator's webhooks network policy (no loopback, private, link-local or cluster address unless
allowed), so a tenant cannot aim the cluster's requests at its own insides. A tenant holds at
most ``MAX_WEBHOOKS`` of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final

from raytroupe.actors.notify.store import WebhookStore
from raytroupe.actors.outbound import Outbound, OutboundRefused
from raytroupe.protocols import Forbidden, QuotaExceeded, StateUnavailable
from raytroupe.protocols.config.webhooks import WebhooksConfig
from raytroupe.protocols.webhooks import Delivery, WebhookCreated, WebhookInfo, WebhookSpec

__all__ = ["MAX_WEBHOOKS", "WebhookDesk"]

MAX_WEBHOOKS: Final = 100
"""Webhooks (A2A push configs included) one tenant may hold."""


class WebhookDesk:
    """A tenant's webhooks in ``store`` (None: no journal, so none can be kept)."""

    def __init__(self, store: WebhookStore | None, config: WebhooksConfig | None = None) -> None:
        self._store = store
        self._outbound = Outbound((config or WebhooksConfig()).network)

    @property
    def store(self) -> WebhookStore:
        """Where they are kept.

        Raises:
            StateUnavailable: the desk runs without a journal.
        """
        if self._store is None:
            raise StateUnavailable("webhooks are kept in the journal, and this desk has none")
        return self._store

    async def create(self, tenant: str, spec: WebhookSpec) -> WebhookCreated:
        """Keep a webhook of ``tenant`` (an A2A push config when ``spec.a2a`` is given).

        Raises:
            Forbidden: the URL points where the webhooks' network policy refuses.
            QuotaExceeded: the tenant holds ``MAX_WEBHOOKS`` already.
        """
        try:
            await self._outbound.check_url(spec.url)
        except OutboundRefused as exc:
            raise Forbidden(f"webhook URL refused: {exc}", field="url") from None
        store = self.store
        a2a = spec.a2a
        webhook_id = None if a2a is None else a2a.webhook_id(tenant, spec.job_id or "")
        held = await asyncio.to_thread(store.webhooks, tenant)
        if len(held) >= MAX_WEBHOOKS and all(w.id != webhook_id for w in held):
            raise QuotaExceeded(
                f"tenant {tenant!r} holds {MAX_WEBHOOKS} webhooks: delete one first",
                limit=MAX_WEBHOOKS,
            )
        if a2a is None:
            return await asyncio.to_thread(store.create, tenant, spec)
        headers: Mapping[str, str] = (
            {} if a2a.authorization is None else {"Authorization": a2a.authorization}
        )
        return await asyncio.to_thread(
            lambda: store.create(
                tenant, spec, kind="a2a", secret=a2a.token, headers=headers,
                webhook_id=webhook_id,
            )
        )  # fmt: skip

    async def webhooks(
        self, tenant: str | None, *, job_id: str | None = None, kind: str | None = None
    ) -> list[WebhookInfo]:
        """The tenant's webhooks (None: every tenant's)."""
        return await asyncio.to_thread(self.store.webhooks, tenant, job_id=job_id, kind=kind)

    async def webhook(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """See :meth:`WebhookStore.webhook`."""
        return await asyncio.to_thread(self.store.webhook, tenant, webhook_id)

    async def delete(self, tenant: str | None, webhook_id: str) -> WebhookInfo:
        """See :meth:`WebhookStore.delete`."""
        return await asyncio.to_thread(self.store.delete, tenant, webhook_id)

    async def deliveries(
        self, tenant: str | None, webhook_id: str, limit: int = 100
    ) -> list[Delivery]:
        """See :meth:`WebhookStore.deliveries`."""
        return await asyncio.to_thread(self.store.deliveries, tenant, webhook_id, limit)
