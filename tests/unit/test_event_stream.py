"""A job's events, the one streamed operation: declared once, alike on every surface.

The HTTP side is the real app behind the real guard, reached by the real async client (and by
raw requests) over httpx's ASGI transport; the control plane behind it is a job's event log
that answers as a shard does. Against a real cluster: tests/integration/test_http_api.py.
"""

from __future__ import annotations

import asyncio

import pytest
from surfaces import ADMIN, USER, Driver, over_http, sent

from raytroupe.deployments.api import create_api
from raytroupe.deployments.config import APIConfig
from raytroupe.protocols import (
    InvalidInput,
    JobEvent,
    JobNotFound,
    JobTimeout,
    StateUnavailable,
)
from raytroupe.runtime.operations import job_reads

TYPES = ["job_submitted", "plan_ready", "subtask_started", "subtask_finished", "job_succeeded"]


def _log(count=None):
    return [
        JobEvent(job_id="j1", seq=n, at=float(n), type=kind)
        for n, kind in enumerate(TYPES[:count], start=1)
    ]


class EventLog:
    """Job ``j1`` of tenant ``acme``: its events, read as a shard answers ``events``.

    Each read gives at most two events (the job is live); ``quiet`` reads first give none (a
    quiet spell); from ``fails_after`` on, a read fails as a store that went away does;
    ``stalls``: a read with nothing new waits as long as it was told to.
    """

    def __init__(self, events=None, *, quiet=0, fails_after=None, stalls=False):
        self.log = _log() if events is None else events
        self.quiet = quiet
        self.fails_after = fails_after
        self.stalls = stalls
        self.reads = []

    async def events(self, job_id, after, timeout, *, tenant=None):
        self.reads.append((after, timeout, tenant))
        if job_id != "j1" or tenant not in {None, "acme"}:
            raise JobNotFound(f"no job {job_id}", job_id=job_id)
        if self.fails_after is not None and after >= self.fails_after:
            raise StateUnavailable("the store is down", store="test")
        if self.quiet:
            self.quiet -= 1
            return []
        batch = [e for e in self.log if e.seq > after][:2]
        if not batch and self.stalls:
            await asyncio.sleep(timeout)
        return batch


def _http_events(system, key=ADMIN, **options):
    async def read(client):
        return [e async for e in client.events("j1", **options)]

    return over_http(system, key, read)


# --- every surface reads the same stream --------------------------------------------------------


def test_the_driver_and_both_clients_read_every_event_once_in_order():
    local, remote = EventLog(), EventLog()

    driven = list(Driver(local, admin=True).events("j1"))
    followed = _http_events(remote)

    assert driven == followed == _log()
    # the same reads of the control plane, each after the last event given, as the key's tenant
    assert local.reads == remote.reads == [
        (0, 0, "acme"), (2, job_reads.QUIET_S, "acme"), (4, job_reads.QUIET_S, "acme")
    ]  # fmt: skip


def test_an_admin_key_reads_its_own_tenants_events_not_every_tenants():
    log = EventLog()
    _http_events(log, ADMIN)
    _http_events(log, USER)
    assert {tenant for _, _, tenant in log.reads} == {"acme"}


def test_a_job_that_is_not_there_is_a_404_before_any_stream():
    (response,) = sent(EventLog(), [("GET", "/v1/jobs/nope/events", {})])

    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "job_not_found"
    with pytest.raises(JobNotFound):
        over_http(EventLog(), ADMIN, lambda client: anext(client.events("nope")))
    with pytest.raises(JobNotFound):
        next(Driver(EventLog(), admin=True).events("nope"))


# --- resuming -----------------------------------------------------------------------------------


def _ids(response):
    return [int(line[4:]) for line in response.text.splitlines() if line.startswith("id: ")]


def test_a_reader_resumes_after_last_event_id_or_after_and_the_query_wins():
    header, query, both, *garbled = sent(EventLog(), [
        ("GET", "/v1/jobs/j1/events", {"headers": {"Last-Event-ID": "2"}}),
        ("GET", "/v1/jobs/j1/events", {"params": {"after": 3}}),
        ("GET", "/v1/jobs/j1/events", {"params": {"after": 1}, "headers": {"Last-Event-ID": "4"}}),
        *(("GET", "/v1/jobs/j1/events", {"headers": {"Last-Event-ID": said.encode()}})
          for said in ("x; drop", "-1", "²", "9" * 5000, "1" * 19)),
    ])  # fmt: skip

    assert _ids(header) == [3, 4, 5]
    assert _ids(query) == [4, 5]
    assert _ids(both) == [2, 3, 4, 5]
    for response in garbled:  # not a place in the stream: from the start, not a 500
        assert (response.status_code, _ids(response)) == (200, [1, 2, 3, 4, 5])
    assert header.headers["content-type"].startswith("text/event-stream")
    assert "event: job_succeeded\ndata: {" in header.text


def test_after_is_checked_before_the_stream_opens():
    log = EventLog()
    (response,) = sent(log, [("GET", "/v1/jobs/j1/events", {"params": {"after": -1}})])
    assert response.status_code == 422
    assert log.reads == []


def test_the_clients_and_the_driver_resume_after_a_place_they_are_given():
    assert [e.seq for e in _http_events(EventLog(), after=3)] == [4, 5]
    assert [e.seq for e in Driver(EventLog(), admin=True).events("j1", after=3)] == [4, 5]


# --- the stream's end, quiet spells and failures ------------------------------------------------


def test_follow_false_gives_the_events_so_far_and_ends_without_waiting():
    running = _log(3)  # no last event yet
    log = EventLog(running)

    local = list(Driver(log, admin=True).events("j1", follow=False))
    (raw,) = sent(EventLog(running), [("GET", "/v1/jobs/j1/events", {"params": {"follow": False}})])
    remote = _http_events(EventLog(running), follow=False)

    assert local == remote == running[:2]  # the first read's: a job's first read gives all
    assert _ids(raw) == [1, 2]
    assert log.reads == [(0, 0, "acme")]  # one read, no wait for more


def test_a_quiet_spell_is_a_comment_on_the_wire_and_no_item_to_a_reader():
    (raw,) = sent(EventLog(quiet=2), [("GET", "/v1/jobs/j1/events", {})])
    assert raw.text.startswith(": waiting\n\n: waiting\n\nid: 1\n")
    assert _http_events(EventLog(quiet=2)) == _log()
    assert list(Driver(EventLog(quiet=2), admin=True).events("j1")) == _log()


def test_a_failure_after_the_stream_began_is_said_in_band_and_raised_typed():
    (raw,) = sent(EventLog(fails_after=2), [("GET", "/v1/jobs/j1/events", {})])
    assert _ids(raw) == [1, 2]
    assert raw.text.endswith(
        'event: error\ndata: {"code": "state_unavailable", "detail": "the store is down"}\n\n'
    )

    seen = []

    async def read(client):
        async for event in client.events("j1"):
            seen.append(event.seq)  # noqa: PERF401 - what came before the error

    with pytest.raises(StateUnavailable, match="the store is down"):
        over_http(EventLog(fails_after=2), ADMIN, read)
    assert seen == [1, 2]
    with pytest.raises(StateUnavailable):
        list(Driver(EventLog(fails_after=2), admin=True).events("j1"))


def test_a_reader_that_waits_past_its_timeout_gets_job_timeout_and_the_stream_is_closed():
    log = EventLog(_log(2), stalls=True)
    driver = Driver(log, admin=True)
    stream = driver.events("j1", timeout=0.3)

    assert [next(stream).seq, next(stream).seq] == [1, 2]
    with pytest.raises(JobTimeout, match=r"j1 still running after 0\.3 s"):
        next(stream)
    with pytest.raises(StopIteration):
        next(stream)  # given up: the stream behind it is closed, not read on


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_a_timeout_that_is_no_number_of_seconds_is_refused(timeout):
    with pytest.raises(InvalidInput, match="timeout"):
        Driver(EventLog(), admin=True).events("j1", timeout=timeout)


# --- one declaration ----------------------------------------------------------------------------


def test_the_route_is_documented_as_the_declaration_says():
    paths = create_api(EventLog(), APIConfig()).openapi()["paths"]
    route = paths["/v1/jobs/{job_id}/events"]["get"]

    assert route["operationId"] == "stream_job_events"  # generated clients keep their name
    assert set(route["responses"]["200"]["content"]) == {"text/event-stream"}
    assert "`id` is the JobEvent's seq" in route["responses"]["200"]["description"]
    params = {p["name"]: p for p in route["parameters"]}
    assert set(params) == {"job_id", "after", "follow", "last-event-id"}
    assert params["after"]["description"] == "Resume after this seq (else after Last-Event-ID's)."
    assert params["last-event-id"]["in"] == "header"
    assert route["description"] == job_reads.events.doc
