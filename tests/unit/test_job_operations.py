"""A running job's operations, declared once: cancel, approvals, feedback, checkpoints,
interrupts and resume are the same over HTTP, its client and the driver; a key reaches its
tenant's jobs (an admin's key too), the driver every tenant's; bad arguments never reach a
shard. Against a real Ray and Serve: test_graphs_ray.py, test_console_api.py and
test_http_client_against_serve.py."""

from __future__ import annotations

import pytest
from surfaces import ADMIN, USER, Driver, over_http
from wiring import run

from raytroupe.protocols import (
    ApprovalRequest,
    Conflict,
    Feedback,
    InvalidInput,
    JobNotFound,
    JobResult,
    JobSummary,
    Timings,
    UsageRow,
)
from raytroupe.protocols.graph_checkpoints import GraphInterrupt
from raytroupe.protocols.trace import Span
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.handle import JobHandle
from raytroupe.runtime.operations import At
from raytroupe.runtime.operations import job_reads as read_ops
from raytroupe.runtime.operations import jobs as job_ops
from raytroupe.runtime.tenant import TenantView

WAITS = GraphInterrupt(id="/1/review/before", node="review", when="before")
HELD = ApprovalRequest(approval_id="a1", agent="ops", tool="deploy", arguments={"to": "prod"})


class Shard:
    """A job shard's calls, recorded: one job ``j1`` of tenant ``acme``, finished or not."""

    def __init__(self, *, finished=False):
        self.calls = []
        self.finished = finished

    def _mine(self, job_id, tenant):
        if job_id != "j1" or tenant not in (None, "acme"):
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)

    async def cancel(self, job_id, *, tenant=None):
        self.calls.append(("cancel", job_id, tenant))
        self._mine(job_id, tenant)
        return not self.finished

    async def status(self, job_id, *, tenant=None):
        self._mine(job_id, tenant)
        return "succeeded" if self.finished else "cancelled"

    async def feedback(self, job_id, score, comment="", *, by="", tenant=None):
        self.calls.append(("feedback", job_id, score, comment, by, tenant))
        self._mine(job_id, tenant)
        return Feedback(score=score, comment=comment, by=by, at=1.0)

    async def feedbacks(self, job_id, *, tenant=None):
        self.calls.append(("feedbacks", job_id, tenant))
        self._mine(job_id, tenant)
        return [Feedback(score=1.0, by="x", at=1.0)]

    async def checkpoints(self, job_id, *, tenant=None):
        self.calls.append(("checkpoints", job_id, tenant))
        self._mine(job_id, tenant)
        return []

    async def waiting(self, *, tenant=None):
        self.calls.append(("waiting", tenant))
        return [("j1", HELD)], [("j1", WAITS, {"draft": "x"})]

    async def approvals(self, job_id, *, tenant=None):
        self.calls.append(("approvals", job_id, tenant))
        self._mine(job_id, tenant)
        return [HELD]

    async def decide(self, job_id, approval_id, *, approved, reason="", tenant=None):
        self.calls.append(("decide", job_id, approval_id, approved, reason, tenant))
        self._mine(job_id, tenant)
        return approval_id == "a1"

    async def resume(self, job_id, *, value=None, state=None, interrupt=None, tenant=None):
        self.calls.append(("resume", job_id, value, state, interrupt, tenant))
        self._mine(job_id, tenant)
        return WAITS


def test_http_and_the_driver_reach_the_shard_alike_and_a_key_only_its_tenants_jobs():
    async def acts(client):
        return [
            await client.cancel("j1"),
            await client.feedback("j1", 0.5, "close"),
            await client.feedbacks("j1"),
            await client.checkpoints("j1"),
            await client.interrupts(),
            await client.resume("j1", {"ok": True}, state={"draft": "y"}, interrupt=WAITS.id),
            await client.approvals(),
            await client.approvals("j1"),
            await client.approve("j1", "a1", "looks right"),
            await client.reject("j1", "a1", "not today"),
        ]

    remote = Shard()
    said = over_http(remote, ADMIN, acts)
    local = Shard()
    view = Driver(local, admin=False)  # a tenant's view of the driver: acme's jobs
    done = [
        view.cancel("j1"),
        view.feedback("j1", 0.5, "close"),
        view.feedbacks("j1"),
        view.checkpoints("j1"),
        view.interrupts(),
        view.resume("j1", {"ok": True}, state={"draft": "y"}, interrupt=WAITS.id),
        view.approvals(),
        view.approvals("j1"),
        view.approve("j1", "a1", "looks right"),
        view.reject("j1", "a1", "not today"),
    ]
    assert (done[1].by, said[1].by) == ("driver", "boss")
    assert done[:1] + done[2:] == said[:1] + said[2:]
    by_key = [tuple("driver" if x == "boss" else x for x in call) for call in remote.calls]
    assert by_key == local.calls
    assert {call[-1] for call in remote.calls} == {"acme"}  # the admin key: its tenant's jobs
    assert remote.calls[1] == ("feedback", "j1", 0.5, "close", "boss", "acme")
    assert said[4][0].state == {"draft": "x"}
    assert said[6] == said[7]
    assert (said[7][0].job_id, said[7][0].tool, said[7][0].arguments) == (
        "j1",
        "deploy",
        HELD.arguments,
    )
    assert [d.approved for d in said[8:]] == [True, False]
    assert remote.calls[-1] == ("decide", "j1", "a1", False, "not today", "acme")


def test_nothing_waiting_under_an_id_is_not_found_and_the_old_route_still_decides():
    shard = Shard()

    async def decide(client):
        with pytest.raises(JobNotFound, match="no tool call waiting under 'a9'"):
            await client.approve("j1", "a9")
        old = await client._http.post(
            "/v1/jobs/j1/approvals/a1", json={"approved": False, "reason": "old client"}
        )
        listed = await client._http.get("/v1/jobs/j1/approvals")
        return old, listed

    old, listed = over_http(shard, USER, decide)
    assert (old.status_code, old.json()["approved"]) == (200, False)
    assert listed.json()[0]["approval_id"] == "a1"
    assert shard.calls[-2] == ("decide", "j1", "a1", False, "old client", "acme")


def test_the_driver_reaches_every_tenants_jobs():
    shard = Shard()
    driver = Driver(shard, admin=True)
    driver.at = At(shard, tenant="default", admin=True, source="driver", every_tenant=True)
    driver.cancel("j1")
    driver.interrupts()
    assert shard.calls == [("cancel", "j1", None), ("waiting", None)]


def test_another_tenants_job_is_not_found_and_a_finished_one_cannot_be_cancelled():
    async def elsewhere(client):
        with pytest.raises(JobNotFound):
            await client.cancel("j2")
        with pytest.raises(Conflict, match="already finished"):
            await client.cancel("j1")
        return True

    assert over_http(Shard(finished=True), USER, elsewhere)
    other = Driver(Shard(), admin=False, tenant="globex")
    with pytest.raises(JobNotFound):
        other.feedback("j1", 1.0)


def test_bad_arguments_never_reach_a_shard():
    shard = Shard()

    async def bad(client):
        http = client._http
        return [
            (await http.post("/v1/jobs/j1/feedback", json={"score": 1.5})).status_code,
            (await http.post("/v1/jobs/j1/feedback", json={"score": 1, "by": "ceo"})).status_code,
            (await http.post("/v1/jobs/j1/resume", json={"state": [1, 2]})).status_code,
            (await http.post("/v1/jobs/j1/resume", json={"interrupt": ""})).status_code,
            (await http.get(f"/v1/jobs/{'j' * 65}/checkpoints")).status_code,
        ]

    assert over_http(shard, USER, bad) == [422] * 5
    driver = Driver(shard, admin=True)
    for call in (
        lambda: driver.feedback("j1", -0.1),
        lambda: driver.feedback("j1", 1.0, "x" * 4001),
        lambda: driver.resume("j1", state="not an object"),
        lambda: driver.cancel(""),
    ):
        with pytest.raises(InvalidInput):
            call()
    assert shard.calls == []


def test_feedback_says_who_gave_it():
    shard = Shard()
    given = run(
        job_ops.feedback.run_for(
            At(shard, tenant="acme", admin=False, source="api:reviewer"),
            job_ops.feedback.bind("j1", 0.9),
        )
    )
    assert given.by == "reviewer"


class Ledger(Shard):
    """A shard that also lists jobs, traces them, forks them, and the pool's usage."""

    JOBS = (
        JobSummary(id="j1", status="succeeded", tenant="acme", team="t", submitted_at=86_400.0),
        JobSummary(id="j0", status="running", tenant="globex", team="t", submitted_at=0.0),
    )

    async def summaries(self, query, *, tenant=None):
        self.calls.append(("summaries", query.status, query.text, query.limit, tenant))
        return [j for j in self.JOBS if tenant in (None, j.tenant)]

    async def summary(self, job_id, *, tenant=None):
        self._mine(job_id, tenant)
        return self.JOBS[0]

    async def trace(self, job_id, *, tenant=None):
        self._mine(job_id, tenant)
        return (Span(span_id="s1", trace_id="t" * 32, name="job", kind="job", start=1.0, end=2.0),)

    async def usage(self, job_id=None):  # noqa: ARG002 - every job's: what daily usage asks
        return [
            UsageRow(job_id=j, agent="a", model="m", deployment="d", provider="p", calls=1)
            for j in ("j1", "j0", None)
        ]

    async def fork(self, job_id, step, *, state=None, tenant=None, admin=False):
        self.calls.append(("fork", job_id, step, state, tenant, admin))
        self._mine(job_id, tenant)
        return "j2"


def test_the_jobs_list_a_job_its_trace_usage_by_day_and_who_asks_are_the_same_everywhere():
    async def reads(client):
        return [
            await client.summaries("live", "t", limit=1),
            await client.summary("j1"),
            await client.trace("j1"),
            await client.daily_usage(),
            await client.me(),
        ]

    remote = Ledger()
    page, line, trace, daily, me = over_http(remote, USER, reads)
    assert (page.more, [j.id for j in page.jobs]) == (False, ["j1"])
    assert remote.calls[0] == ("summaries", "live", "t", 2, "acme")  # one more: is there more?
    assert (line.id, trace.trace_id, trace.spans[0].name) == ("j1", "t" * 32, "job")
    assert [(d.tenant, d.day, d.calls) for d in daily] == [("acme", "1970-01-02", 1)]
    assert (me.name, me.tenant, me.admin) == ("user", "acme", False)
    local = Ledger()
    view = Driver(local, admin=False)
    assert [view.summaries("live", "t", limit=1), view.summary("j1"), view.trace("j1")] == [
        page, line, trace
    ]  # fmt: skip
    assert view.daily_usage() == daily
    admin = Driver(Ledger(), admin=True)
    assert {d.tenant for d in admin.daily_usage()} == {"acme", "globex"}  # an admin: everyone's
    assert view.me().tenant == "acme"


def test_a_fork_answers_202_with_the_new_jobs_location_and_a_tenant_forks_under_its_policy():
    remote = Ledger()

    async def fork(client):
        answer = await client._http.post("/v1/jobs/j1/fork", json={"step": 1, "state": {"n": 2}})
        typed = await client.fork("j1", 0)
        with pytest.raises(JobNotFound):
            await client.fork("j0", 0)  # globex's job
        return answer, typed

    answer, typed = over_http(remote, USER, fork)
    assert (answer.status_code, answer.headers["location"]) == (202, "/v1/jobs/j2")
    assert answer.json() == {"job_id": "j2", "forked_from": "j1", "step": 1}
    assert typed.job_id == "j2"
    assert remote.calls[0] == ("fork", "j1", 1, {"n": 2}, "acme", False)
    with pytest.raises(InvalidInput):
        Driver(remote, admin=True).fork("j1", -1)


class Finished(Ledger):
    """A ledger whose job ``j1`` has its result, and that lists every job's status."""

    async def wait(self, job_id, timeout=None, *, tenant=None):
        self.calls.append(("wait", job_id, timeout, tenant))
        self._mine(job_id, tenant)
        if not self.finished:
            return None
        timings = Timings(submitted_at=1.0, finished_at=2.0)
        return JobResult(job_id=job_id, task="t", team="t", status="succeeded", answer="42",
                         timings=timings)  # fmt: skip

    async def jobs(self, *, tenant=None):
        self.calls.append(("jobs", tenant))
        return {j.id: j.status for j in self.JOBS if tenant in (None, j.tenant)}


def test_a_job_and_the_jobs_statuses_read_alike_and_only_the_callers():
    async def reads(client):
        view = await client.job("j1")
        statuses = await client.statuses()
        listed = await client.summaries()  # a literal route, tried before /v1/jobs/{job_id}
        with pytest.raises(JobNotFound):
            await client.job("j0")  # globex's
        return view, statuses, listed

    view, statuses, listed = over_http(Finished(finished=True), USER, reads)
    assert (view.id, view.status, view.result.answer) == ("j1", "succeeded", "42")
    assert statuses == {"j1": "succeeded"}
    assert [j.id for j in listed.jobs] == ["j1"]

    tenant = Driver(Finished(finished=True), admin=False)
    assert tenant.job("j1") == view
    assert tenant.statuses() == statuses
    shard = Finished()
    running = Driver(shard, admin=True)
    running.at = At(shard, tenant="default", admin=True, source="driver", every_tenant=True)
    assert running.job("j1").result is None  # no result yet: status only
    assert running.statuses() == {"j1": "succeeded", "j0": "running"}


def test_a_handles_info_is_the_operations_answer():
    assert getattr(Runtime.job, "handle_of", None) is read_ops.job
    assert getattr(TenantView.job, "handle_of", None) is read_ops.job
    shard = Finished(finished=True)
    portal = Portal()
    try:
        handle = JobHandle("j1", shard, portal, tenant="acme")
        assert handle.info() == Driver(shard, admin=False).job("j1")
        with pytest.raises(JobNotFound):
            JobHandle("j0", shard, portal, tenant="acme").info()
    finally:
        portal.close()
