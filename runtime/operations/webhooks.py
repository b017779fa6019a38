"""Webhooks: a tenant's HTTP endpoints, told of its jobs' events (see ``protocols.webhooks``).

A webhook is its tenant's (an admin key's too): another tenant's is ``WebhookNotFound``, as if
there were none. Its URL must be one the operator's webhooks network policy lets the cluster
reach (public addresses only, unless allowed), when it is made and on every attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from raytroupe.protocols import InvalidInput
from raytroupe.protocols.webhooks import (
    Delivery,
    WebhookCreated,
    WebhookId,
    WebhookInfo,
    WebhookSpec,
)
from raytroupe.runtime.operations.declare import At, JobId, given, operation

__all__ = ["create_webhook", "delete_webhook", "webhook", "webhook_deliveries", "webhooks"]

TAG: Final = "webhooks"


@operation("POST", "/v1/webhooks", cli="webhooks create", status=201)
async def create_webhook(at: At, webhook: WebhookSpec | Mapping[str, Any]) -> WebhookCreated:
    """Make a webhook of the caller's tenant; its signing secret is in this answer only.

    Each event it names of the tenant's jobs (of ``job_id``'s only, when given) is POSTed to
    its URL as JSON, signed as Standard Webhooks are, and retried with backoff until the
    endpoint answers 2xx. With ``a2a`` it is that A2A push config of the task ``job_id``
    (made again under the same config id, it replaces it): A2A's bodies, its token header.

    Raises:
        Forbidden: the URL points where the operator's webhooks network policy refuses.
        JobNotFound: ``job_id`` is not a job of the caller's.
        QuotaExceeded: the tenant holds as many webhooks as it may.
    """
    spec = given(WebhookSpec, webhook)
    if spec.a2a is not None and spec.job_id is None:
        raise InvalidInput("an A2A push config is one task's: give its job_id", field="job_id")
    if spec.job_id is not None:
        await at.system.status(spec.job_id, tenant=at.jobs_of)  # one of the caller's jobs
    return await at.system.put_webhook(at.tenant, spec)


@operation("GET", "/v1/webhooks", cli="webhooks list")
async def webhooks(
    at: At, job_id: JobId | None = None, kind: Literal["webhook", "a2a"] | None = None
) -> list[WebhookInfo]:
    """The tenant's webhooks and A2A push configs, oldest first (without their secrets).

    ``job_id``: those of that job only; ``kind``: of that kind only.
    """
    return await at.system.webhooks(at.tenant, job_id=job_id, kind=kind)


@operation("GET", "/v1/webhooks/{webhook_id}", cli="webhooks show")
async def webhook(at: At, webhook_id: WebhookId) -> WebhookInfo:
    """The tenant's webhook.

    Raises:
        WebhookNotFound: the tenant has no webhook of that id.
    """
    return await at.system.webhook(at.tenant, webhook_id)


@operation("DELETE", "/v1/webhooks/{webhook_id}", cli="webhooks delete")
async def delete_webhook(at: At, webhook_id: WebhookId) -> WebhookInfo:
    """Drop the tenant's webhook; its deliveries not yet made fail (``webhook deleted``).

    Raises:
        WebhookNotFound: the tenant has no webhook of that id.
    """
    return await at.system.delete_webhook(at.tenant, webhook_id)


@operation("GET", "/v1/webhooks/{webhook_id}/deliveries", cli="webhooks deliveries")
async def webhook_deliveries(
    at: At, webhook_id: WebhookId, limit: Annotated[int, Field(ge=1, le=1000)] = 100
) -> list[Delivery]:
    """The webhook's latest deliveries, newest first: state, attempts, last answer or error.

    Raises:
        WebhookNotFound: the tenant has no webhook of that id.
    """
    return await at.system.deliveries(at.tenant, webhook_id, limit)
