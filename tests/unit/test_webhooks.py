"""Webhooks without Ray: what is kept, what is queued with an event, and what reaches a server.

The store runs on SQLite and on a real PostgreSQL (``state_at``); the deliverer POSTs to a
real HTTP server on loopback, and a receiver checks each body with the ``standardwebhooks``
library, as a tenant's endpoint would.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseDict
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from raytroupe.actors.notify.bodies import MAX_DATA_BYTES
from raytroupe.actors.notify.deliverer import Deliverer
from raytroupe.actors.notify.desk import MAX_WEBHOOKS, WebhookDesk
from raytroupe.actors.notify.store import WebhookStore
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    AgentSpec,
    Conflict,
    Forbidden,
    JobEvent,
    QuotaExceeded,
    TeamSpec,
    WebhookNotFound,
)
from raytroupe.protocols.config.network import NetworkPolicy
from raytroupe.protocols.config.webhooks import WebhooksConfig
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.webhooks import A2APush, WebhookSpec
from tests.support.listener import listening

TEAM = TeamSpec(name="crew", agents=(AgentSpec(name="ada", role="writer"),))
LOOPBACK = WebhooksConfig(
    network=NetworkPolicy(allow=("127.0.0.1",)), attempts=3, retry_s=0.05, max_retry_s=0.1,
    timeout_s=5.0, poll_s=0.05,
)  # fmt: skip


@pytest.fixture
def journal(state_at):
    """A journal (and its webhooks) on each backend, with jobs of two tenants."""
    kept = Journal(state_at("journal"), shards=2)
    for job_id, tenant, session in (("job-a1-0", "acme", "chat-7"), ("job-b1-1", "blue", None)):
        kept.job(job_id, context=JobContext(request="t", session=session), team=TEAM,
                 tenant=tenant, budget=None, submitted_at=time.time())  # fmt: skip
    yield kept
    kept.close()


def _event(job_id: str, seq: int, kind: str, **data: object) -> JobEvent:
    return JobEvent.model_validate(
        {"job_id": job_id, "seq": seq, "at": 1_800_000_000.0 + seq, "type": kind, "data": data}
    )


def _pending(store: WebhookStore, shard: int) -> list:
    return store.due(shard, now=time.time() + 1)


# -- what a tenant asks for -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "https://user:secret@example.com/hook",  # credentials would be logged
        "https://example.com/hook#part",
        "file:///etc/passwd",
        "https:///no-host",
    ],
)
def test_a_webhook_url_is_http_with_a_host_and_no_credentials(url):
    with pytest.raises(ValidationError):
        WebhookSpec(url=url)


def test_a_webhook_hears_job_events_only_and_by_default_ends_and_waits():
    assert WebhookSpec(url="https://example.com/h").events == (
        "job_succeeded", "job_failed", "job_cancelled", "approval_requested", "graph_interrupted",
    )  # fmt: skip
    for noisy in ("llm_delta", "graph_step", "no_such_event"):
        with pytest.raises(ValidationError):
            WebhookSpec(url="https://example.com/h", events=(noisy,))


# -- the store, on both backends --------------------------------------------------------------


def test_webhooks_are_their_tenants_and_their_secret_is_shown_once(journal):
    store = journal.webhooks
    made = store.create("acme", WebhookSpec(url="https://example.com/a", description="ops"))
    assert made.secret.startswith("whsec_")
    assert made.id.startswith("wh-")
    assert "secret" not in store.webhook("acme", made.id).model_dump()
    assert [w.id for w in store.webhooks("acme")] == [made.id]
    assert store.webhooks("blue") == []
    for other in ("blue",):
        with pytest.raises(WebhookNotFound):
            store.webhook(other, made.id)
        with pytest.raises(WebhookNotFound):
            store.delete(other, made.id)
        with pytest.raises(WebhookNotFound):
            store.deliveries(other, made.id)
    assert store.delete("acme", made.id).id == made.id
    with pytest.raises(WebhookNotFound):
        store.webhook("acme", made.id)


def test_an_event_queues_one_delivery_per_webhook_that_hears_it_with_the_event(journal):
    store = journal.webhooks
    every = store.create("acme", WebhookSpec(url="https://example.com/every"))
    only = store.create("acme", WebhookSpec(url="https://example.com/one", job_id="job-zz-0"))
    blues = store.create("blue", WebhookSpec(url="https://example.com/blue"))
    woken = []
    journal.delivering = lambda: woken.append(1)

    journal.event(_event("job-a1-0", 1, "job_submitted"))  # not heard by default
    journal.event(_event("job-a1-0", 2, "llm_delta", text="x"))  # never heard
    assert _pending(store, 0) == []
    assert woken == []
    journal.event(_event("job-a1-0", 3, "job_failed", error="boom", code="model"))
    (due,) = _pending(store, 0)
    assert (due.webhook_id, due.kind, due.url) == (every.id, "webhook", every.url)
    assert woken == [1]
    body = json.loads(due.body)
    assert body["type"] == "job_failed"
    assert body["data"] == {
        "job_id": "job-a1-0", "seq": 3, "tenant": "acme", "subtask_id": None,
        "session": "chat-7", "event": {"error": "boom", "code": "model"},
    }  # fmt: skip
    assert store.deliveries("acme", only.id) == []

    with pytest.raises(Conflict):  # the same event again: no second delivery either
        journal.event(_event("job-a1-0", 3, "job_failed", error="boom", code="model"))
    assert len(_pending(store, 0)) == 1

    journal.event(_event("job-b1-1", 1, "job_succeeded", error=None))  # blue's, on shard 1
    assert [d.webhook_id for d in _pending(store, 1)] == [blues.id]
    assert len(_pending(store, 0)) == 1


def test_an_attempt_is_recorded_then_retried_or_failed_and_deleting_fails_whats_left(journal):
    store = journal.webhooks
    hook = store.create("acme", WebhookSpec(url="https://example.com/h"))
    journal.event(_event("job-a1-0", 1, "job_succeeded", error=None))
    journal.event(_event("job-a1-0", 2, "job_cancelled", error=None))  # (a made-up log)
    (first,) = _pending(store, 0)  # a job's events reach a webhook in order: one at a time
    store.attempted(first.id, status_code=500, error="the endpoint answered 500",
                    retry_at=time.time() + 60)  # fmt: skip
    assert _pending(store, 0) == []  # the first is not due for a minute, the second waits
    (first_again,) = store.due(0, now=time.time() + 61)
    assert first_again.id == first.id
    store.attempted(first.id, status_code=200, error=None, retry_at=None)
    (second,) = _pending(store, 0)
    assert second.id != first.id
    store.attempted(second.id, status_code=500, error="the endpoint answered 500",
                    retry_at=time.time() + 60)  # fmt: skip
    by_id = {d.id: d for d in store.deliveries("acme", hook.id)}
    assert (by_id[first.id].state, by_id[first.id].attempts) == ("delivered", 2)
    assert by_id[first.id].status_code == 200
    assert (by_id[second.id].state, by_id[second.id].attempts) == ("pending", 1)

    store.delete("acme", hook.id)
    kept = {d.id: d for d in store.deliveries(None, hook.id)}  # an admin's view: still listed
    assert (kept[second.id].state, kept[second.id].last_error) == ("failed", "webhook deleted")
    assert store.due(0, now=time.time() + 120) == []


def test_a_failed_delivery_lets_the_next_go_and_other_jobs_never_wait(journal):
    store = journal.webhooks
    journal.job("job-a2-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
                budget=None, submitted_at=time.time())  # fmt: skip
    events = ("subtask_finished", "job_succeeded")
    store.create("acme", WebhookSpec(url="https://example.com/h", events=events))
    for seq, kind in ((1, "subtask_finished"), (2, "job_succeeded")):
        journal.event(_event("job-a1-0", seq, kind, error=None))
    journal.event(_event("job-a2-0", 1, "job_succeeded", error=None))
    heads = _pending(store, 0)
    assert sorted(json.loads(d.body)["data"]["job_id"] for d in heads) == ["job-a1-0", "job-a2-0"]
    (started,) = [d for d in heads if json.loads(d.body)["type"] == "subtask_finished"]
    store.attempted(started.id, status_code=None, error="refused", retry_at=None)  # given up
    assert [json.loads(d.body)["type"] for d in _pending(store, 0)] == ["job_succeeded"] * 2


def test_an_a2a_config_is_kept_under_its_tasks_id_and_replaced_by_the_same_id(journal):
    store = journal.webhooks
    push = A2APush(config_id="cfg", token="tok-1", authorization="Bearer abc")  # noqa: S106
    spec = WebhookSpec(
        url="http://127.0.0.1:9/push", job_id="job-a1-0", description="cfg", a2a=push
    )
    desk = WebhookDesk(store, LOOPBACK)
    asyncio.run(desk.create("acme", spec))
    asyncio.run(desk.create("acme", spec.model_copy(update={"url": "http://127.0.0.1:9/v2"})))
    (kept,) = store.webhooks("acme", kind="a2a")
    assert (kept.id, kept.url) == (push.webhook_id("acme", "job-a1-0"), "http://127.0.0.1:9/v2")
    with pytest.raises(WebhookNotFound):  # another tenant's config id cannot be taken over
        store.create("blue", spec, kind="a2a", secret="x", webhook_id=kept.id)  # noqa: S106

    journal.event(_event("job-a1-0", 1, "approval_requested", tool="pay"))
    (due,) = _pending(store, 0)
    assert (due.kind, due.secret) == ("a2a", "tok-1")
    assert dict(due.headers) == {"Authorization": "Bearer abc"}
    sent = ParseDict(json.loads(due.body), a2a_pb2.StreamResponse())  # A2A's own type
    assert sent.status_update.task_id == "job-a1-0"
    assert sent.status_update.context_id == "chat-7"  # the job's session is its context
    assert sent.status_update.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED


def test_an_events_large_data_is_left_out_of_its_body(journal):
    journal.webhooks.create("acme", WebhookSpec(url="https://example.com/h",
                                                events=("graph_interrupted",)))  # fmt: skip
    journal.event(_event("job-a1-0", 1, "graph_interrupted", state="x" * (MAX_DATA_BYTES + 1)))
    (due,) = _pending(journal.webhooks, 0)
    assert len(due.body) < 1000
    assert "read the job" in json.loads(due.body)["data"]["event"]["omitted"]


# -- the desk: where a URL may point, and how many ----------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",  # the cluster's own services
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://10.0.0.5/hook",
        "http://[::1]/hook",
        "http://localhost/hook",
    ],
)
def test_a_webhook_aimed_inside_the_cluster_is_refused_when_made(tmp_path, url):
    journal = Journal(tmp_path / "j.sqlite")
    desk = WebhookDesk(journal.webhooks)  # the default policy: public addresses only
    with pytest.raises(Forbidden, match="webhook URL refused"):
        asyncio.run(desk.create("acme", WebhookSpec(url=url)))
    assert journal.webhooks.webhooks(None) == []
    journal.close()


def test_a_tenant_holds_a_bounded_number_of_webhooks(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    desk = WebhookDesk(journal.webhooks, LOOPBACK)
    spec = WebhookSpec(url="http://127.0.0.1:9/hook")

    async def fill() -> None:
        for _ in range(MAX_WEBHOOKS):
            await desk.create("acme", spec)
        with pytest.raises(QuotaExceeded):
            await desk.create("acme", spec)
        await desk.create("blue", spec)  # another tenant's count is its own

    asyncio.run(fill())
    journal.close()


# -- the deliverer, against a real server on loopback ------------------------------------------


def _deliver(journal: Journal, config: WebhooksConfig, until: float = 10.0) -> None:
    """Run shard 0's deliverer until nothing is due for a while (at most ``until`` s)."""

    async def run() -> None:
        deliverer = Deliverer(journal.webhooks, 0, config)
        deadline = time.monotonic() + until
        try:
            while time.monotonic() < deadline:
                await deliverer.send_due()
                if not journal.webhooks.due(0, now=time.time() + 5 * config.max_retry_s):
                    return
                await asyncio.sleep(0.02)
        finally:
            await deliverer.close()

    asyncio.run(run())


def test_a_delivery_is_signed_and_verifies_with_the_secret_shown_at_creation(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    journal.job("job-a1-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
                budget=None, submitted_at=time.time())  # fmt: skip
    with listening() as server:
        made = journal.webhooks.create("acme", WebhookSpec(url=f"{server.url}/hook"))
        journal.event(_event("job-a1-0", 1, "job_succeeded", error=None))
        _deliver(journal, LOOPBACK)
    (seen,) = server.requests
    assert (seen.method, seen.path) == ("POST", "/hook")
    body = Webhook(made.secret).verify(seen.body, seen.headers)
    assert (body["type"], body["data"]["job_id"]) == ("job_succeeded", "job-a1-0")
    (delivery,) = journal.webhooks.deliveries("acme", made.id)
    assert seen.headers["webhook-id"] == delivery.id
    assert (delivery.state, delivery.attempts, delivery.status_code) == ("delivered", 1, 200)
    with pytest.raises(WebhookVerificationError):  # another secret, or a changed body: no
        Webhook("whsec_" + "A" * 43 + "=").verify(seen.body, seen.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(made.secret).verify(seen.body.replace(b"succeeded", b"failed"), seen.headers)
    journal.close()


def test_a_failing_endpoint_is_tried_again_with_the_same_id_until_it_answers(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    journal.job("job-a1-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
                budget=None, submitted_at=time.time())  # fmt: skip
    with listening(answers=(500, 429)) as server:
        made = journal.webhooks.create("acme", WebhookSpec(url=server.url))
        journal.event(_event("job-a1-0", 1, "job_succeeded", error=None))
        _deliver(journal, LOOPBACK)
    assert len(server.requests) == 3
    assert len({r.headers["webhook-id"] for r in server.requests}) == 1
    (delivery,) = journal.webhooks.deliveries("acme", made.id)
    assert (delivery.state, delivery.attempts, delivery.status_code) == ("delivered", 3, 200)
    journal.close()


def test_an_endpoint_that_never_answers_2xx_fails_after_the_attempts_and_says_why(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    journal.job("job-a1-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
                budget=None, submitted_at=time.time())  # fmt: skip
    with listening(redirect_to="http://169.254.169.254/latest/meta-data/") as server:
        made = journal.webhooks.create("acme", WebhookSpec(url=server.url))
        journal.event(_event("job-a1-0", 1, "job_succeeded", error=None))
        _deliver(journal, LOOPBACK)
    assert len(server.requests) == LOOPBACK.attempts  # the redirect was never followed
    (delivery,) = journal.webhooks.deliveries("acme", made.id)
    assert (delivery.state, delivery.attempts) == ("failed", LOOPBACK.attempts)
    assert delivery.last_error == "the endpoint answered 307"
    assert journal.webhooks.due(0, now=time.time() + 3600) == []
    journal.close()


def test_a_url_the_policy_refuses_at_send_time_gets_no_byte(tmp_path):
    """Made while allowed (or pointed at a name that now resolves inside): refused on send."""
    journal = Journal(tmp_path / "j.sqlite")
    journal.job("job-a1-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
                budget=None, submitted_at=time.time())  # fmt: skip
    with listening() as server:
        made = journal.webhooks.create("acme", WebhookSpec(url=server.url))
        journal.event(_event("job-a1-0", 1, "job_succeeded", error=None))
        _deliver(journal, WebhooksConfig(attempts=2, retry_s=0.05, max_retry_s=0.1))
    assert not server.reached
    (delivery,) = journal.webhooks.deliveries("acme", made.id)
    assert delivery.state == "failed"
    assert delivery.status_code is None
    assert "not a public address" in (delivery.last_error or "")
    journal.close()


def test_an_a2a_push_carries_its_token_and_authorization_not_a_signature(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    journal.job("job-a1-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
                budget=None, submitted_at=time.time())  # fmt: skip
    push = A2APush(config_id="c1", token="tok-9", authorization="Bearer xyz")  # noqa: S106
    with listening() as server:
        spec = WebhookSpec(url=server.url, job_id="job-a1-0", events=("job_failed",), a2a=push)
        asyncio.run(WebhookDesk(journal.webhooks, LOOPBACK).create("acme", spec))
        journal.event(_event("job-a1-0", 1, "job_failed", error="no budget", code="budget"))
        _deliver(journal, LOOPBACK)
    (seen,) = server.requests
    assert seen.headers["x-a2a-notification-token"] == "tok-9"
    assert seen.headers["authorization"] == "Bearer xyz"
    assert "webhook-signature" not in seen.headers
    sent = ParseDict(json.loads(seen.body), a2a_pb2.StreamResponse())
    assert sent.status_update.status.state == a2a_pb2.TaskState.TASK_STATE_FAILED
    assert sent.status_update.context_id == "job-a1-0"  # no session: the task is its context
    assert sent.status_update.status.message.parts[0].text == "budget: no budget"
    journal.close()


def test_a_delivery_left_pending_by_a_stopped_shard_is_sent_by_the_next(tmp_path):
    """Its row outlives the process: a restarted shard (a new journal and deliverer) sends it."""
    path = tmp_path / "j.sqlite"
    first = Journal(path)
    first.job("job-a1-0", context=JobContext(request="t"), team=TEAM, tenant="acme",
              budget=None, submitted_at=time.time())  # fmt: skip
    with listening(answers=(503,)) as server:
        made = first.webhooks.create("acme", WebhookSpec(url=server.url))
        first.event(_event("job-a1-0", 1, "job_succeeded", error=None))

        async def one_attempt() -> None:
            deliverer = Deliverer(first.webhooks, 0, LOOPBACK)
            await deliverer.send_due()
            await deliverer.close()

        asyncio.run(one_attempt())  # 503: left pending, then the process "stops"
        first.close()
        second = Journal(path)
        _deliver(second, LOOPBACK)
    assert len(server.requests) == 2
    assert len({r.headers["webhook-id"] for r in server.requests}) == 1
    (delivery,) = second.webhooks.deliveries("acme", made.id)
    assert (delivery.state, delivery.attempts) == ("delivered", 2)
    second.close()
