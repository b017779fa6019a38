"""Usage and dead letters, declared once: the same on the HTTP API, its clients, the driver and
a tenant's view. Usage is the caller's jobs'; dead letters are for admins and never carry an
envelope's payload over HTTP, while the driver keeps the envelope in hand. Against a real
Ray and Serve: test_console_api.py, test_trust_boundaries.py, test_router.py."""

from __future__ import annotations

import dataclasses

import pytest
from surfaces import ADMIN, USER, Driver, over_http

from raytroupe.protocols import (
    AgentMessage,
    DeadLetter,
    ErrorCode,
    Event,
    Forbidden,
    InvalidInput,
    JobNotFound,
    JobSummary,
    UsageRow,
)
from raytroupe.protocols.http import DailyUsage, DeadLetterView
from raytroupe.runtime.driver import Runtime

SECRET = "s3cret-payload"  # noqa: S105 - a payload that must not travel, no password


def _row(job_id):
    return UsageRow(job_id=job_id, agent="a", model="m", deployment="d", provider="offline",
                    calls=1, prompt_tokens=2, completion_tokens=3)  # fmt: skip


class Cluster:
    """The control plane's usage, jobs and dead-letter calls, recorded."""

    def __init__(self):
        self.calls = []
        self.owners = {"job-acme": "acme", "job-globex": "globex"}

    async def status(self, job_id, *, tenant=None):
        self.calls.append(("status", job_id, tenant))
        if job_id not in self.owners or tenant not in {None, self.owners[job_id]}:
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        return "succeeded"

    async def summary(self, job_id, *, tenant=None):
        self.calls.append(("summary", job_id, tenant))
        if job_id not in self.owners or tenant not in {None, self.owners[job_id]}:
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        owner = self.owners[job_id]
        return JobSummary(id=job_id, status="succeeded", tenant=owner, team="t", submitted_at=0.0)

    async def jobs(self, *, tenant=None):
        self.calls.append(("jobs", tenant))
        return {j: "succeeded" for j, t in self.owners.items() if tenant in {None, t}}

    async def usage(self, job_id=None):
        self.calls.append(("usage", job_id))
        no_job = [_row(None)] if job_id is None else []
        return [_row(j) for j in self.owners if job_id in {None, j}] + no_job

    async def summaries(self, query=None, *, tenant=None):
        self.calls.append(("summaries", query, tenant))
        return [
            JobSummary(id=j, status="succeeded", tenant=t, team="t", submitted_at=0.0)
            for j, t in self.owners.items()
            if tenant in {None, t}
        ]

    async def dead_letters(self, limit=100):
        self.calls.append(("dead_letters", limit))
        payload = Event(name="x", data={"secret": SECRET})
        stray = AgentMessage(
            sender="driver", recipient="nobody", job_id="job-acme", tenant="acme", payload=payload
        )
        return [
            DeadLetter(at=1.0, reason=ErrorCode.UNKNOWN_RECIPIENT, detail="old", message=stray),
            DeadLetter(at=2.0, reason=ErrorCode.MALFORMED_ENVELOPE, detail="new", raw=b"\xff"),
        ][-limit:]


def test_usage_is_the_callers_jobs_on_every_surface():
    async def read(client):
        every = await client.usage()
        one = await client.usage("job-acme")
        with pytest.raises(JobNotFound):
            await client.usage("job-globex")  # another tenant's: as if there were none
        return every, one

    every, one = over_http(Cluster(), USER, read)
    assert {r.job_id for r in every} == {"job-acme"}  # not globex's, not the no-job row
    assert {r.job_id for r in one} == {"job-acme"}
    tenant = Driver(Cluster(), admin=False)
    assert tenant.usage() == every
    with pytest.raises(JobNotFound):
        tenant.usage("job-globex")

    driver = Driver(Cluster(), admin=True)
    driver.at = dataclasses.replace(driver.at, every_tenant=True)  # as the Runtime's
    assert {r.job_id for r in driver.usage()} == {"job-acme", "job-globex", None}


def test_the_drivers_usage_of_no_job_still_answers_nothing_and_warns():
    class Old(Driver):
        usage = Runtime.__dict__["usage"]

    with pytest.warns(DeprecationWarning, match="will raise JobNotFound"):
        assert Old(Cluster(), admin=True).usage("job-nope") == []


def test_dead_letters_are_for_admins_newest_first_and_carry_no_payload_over_http():
    async def read(client):
        return await client.dead_letters(limit=5)

    with pytest.raises(Forbidden):
        over_http(Cluster(), USER, read)
    over = over_http(Cluster(), ADMIN, read)
    assert [d.detail for d in over] == ["new", "old"]
    assert over[1].recipient == "nobody"
    assert (over[1].job_id, over[1].tenant) == ("job-acme", "acme")
    assert over[1].message is None  # never sent
    assert SECRET not in repr(over)

    kept = Driver(Cluster(), admin=True).dead_letters(limit=5)
    assert [d.detail for d in kept] == ["new", "old"]
    assert kept[1].message.payload.data == {"secret": SECRET}  # in hand, in the driver
    assert kept[0].raw == b"\xff"
    assert SECRET not in DeadLetterView.model_validate(kept[1]).model_dump_json()


def test_a_job_id_holding_a_nul_is_refused_before_any_store_reads_it():
    """A NUL in a query's job id reached the journal's PostgreSQL: a 500 (schemathesis)."""
    cluster = Cluster()
    with pytest.raises(InvalidInput) as caught:
        Driver(cluster, admin=True).usage("job-\x00a", user="ana")
    assert "job_id" in str(caught.value)
    assert cluster.calls == []


@pytest.mark.parametrize("limit", [0, -1, 10_001])
def test_a_dead_letter_limit_out_of_range_is_refused_before_the_router_hears(limit):
    cluster = Cluster()
    with pytest.raises(InvalidInput):
        Driver(cluster, admin=True).dead_letters(limit)
    assert cluster.calls == []


def test_the_http_clients_older_daily_form_answers_daily_usage_and_warns():
    async def read(client):
        with pytest.warns(DeprecationWarning, match=r"daily_usage\(\) for usage by day"):
            daily = await client.usage(daily=True)
        with pytest.warns(DeprecationWarning, match="usage by day"):
            by_job = await client.usage(daily=False)
        with (
            pytest.warns(DeprecationWarning, match="usage by day"),
            pytest.raises(InvalidInput, match="no job_id"),
        ):
            await client.usage("job-acme", daily=True)
        return daily, by_job, await client.daily_usage()

    daily, by_job, today = over_http(Cluster(), USER, read)
    assert daily == today
    assert all(isinstance(row, DailyUsage) for row in daily)
    assert {row.tenant for row in daily} == {"acme"}
    assert {r.job_id for r in by_job} == {"job-acme"}
