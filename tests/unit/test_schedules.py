"""Schedules without Ray: the spec's checks, the store on both backends, firing once per time.

The firing loop's ``submit`` here records what it is asked (the desk's admission is tested on
Ray, in ``tests/integration/test_schedules_http.py``); two stores on one location stand for two
desks on one database.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from raytroupe.actors.desk.schedules import MAX_SCHEDULES, Scheduler, ScheduleStore
from raytroupe.actors.state import open_database
from raytroupe.protocols import Budget, Forbidden, QuotaExceeded, ScheduleNotFound
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.schedules import ScheduleSpec, next_firing

EVERY_5S = ScheduleSpec(cron="*/5 * * * * *", task="Summarise the day.", team="crew")


class Recorder:
    """A submit that records each order and its caller, and answers a new job id."""

    def __init__(self, refuse: Exception | None = None) -> None:
        self.orders: list[tuple[JobOrder, Submitter]] = []
        self.refuse = refuse

    async def __call__(self, order: JobOrder, caller: Submitter) -> str:
        if self.refuse is not None:
            raise self.refuse
        self.orders.append((order, caller))
        return f"job-{len(self.orders):04d}"


@pytest.fixture
def stores(state_at):
    """Two stores on one location: two desks on one database."""
    opened = [open_database(state_at("journal"), "journal", ()) for _ in range(2)]
    yield [ScheduleStore(db) for db in opened]
    for db in opened:
        db.close()


# -- what a schedule may say ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("* * * * * *", "at most every 5 s"),
        ("*/2 * * * * *", "at most every 5 s"),
        ("61 * * * *", "not a cron expression"),
        ("0 0 30 2 *", "not a cron expression"),  # February 30th never comes
        ("* * *", "5 fields"),
        ("0 9 * * MON; rm -rf /", "5 fields"),
    ],
)
def test_a_cron_expression_is_checked_and_fires_at_most_every_5_seconds(cron, said):
    with pytest.raises(ValidationError, match=said):
        ScheduleSpec(cron=cron, task="t")


def test_a_schedule_names_a_real_time_zone_and_a_job_with_a_task_or_input():
    with pytest.raises(ValidationError, match="not a time zone"):
        ScheduleSpec(cron="0 9 * * *", task="t", timezone="Mars/Olympus")
    with pytest.raises(ValidationError, match="not a time zone"):
        ScheduleSpec(cron="0 9 * * *", task="t", timezone="../../etc/passwd")
    with pytest.raises(ValidationError, match="needs a task"):
        ScheduleSpec(cron="0 9 * * *", task="  ")
    assert ScheduleSpec(cron="0 9 * * *", skill="sentiment", input={"text": "ok"}).task == ""


def test_the_next_firing_is_read_in_the_schedules_time_zone_across_daylight_saving():
    paris = ZoneInfo("Europe/Paris")
    before = datetime.datetime(2027, 3, 26, 12, 0, tzinfo=paris).timestamp()  # CET, UTC+1
    first = next_firing("0 9 * * *", "Europe/Paris", before)
    second = next_firing("0 9 * * *", "Europe/Paris", first)  # the clocks moved overnight
    assert datetime.datetime.fromtimestamp(first, tz=paris).hour == 9
    assert datetime.datetime.fromtimestamp(second, tz=paris).hour == 9
    assert second - first == 23 * 3600


# -- the store, on both backends ----------------------------------------------------------------


def test_schedules_are_their_tenants_and_replacing_one_keeps_its_count(stores):
    store, _ = stores
    made, created = store.put("acme", "daily", EVERY_5S)
    assert created
    assert made.next_at is not None
    assert made.next_at > time.time()
    assert [s.name for s in store.schedules("acme")] == ["daily"]
    assert store.schedules("globex") == []
    for other in ("globex",):
        with pytest.raises(ScheduleNotFound):
            store.schedule(other, "daily")
        with pytest.raises(ScheduleNotFound):
            store.delete(other, "daily")
    paused, created = store.put("acme", "daily", EVERY_5S.model_copy(update={"enabled": False}))
    assert not created
    assert paused.next_at is None
    assert paused.created_at == made.created_at
    assert store.delete("acme", "daily").name == "daily"
    assert store.schedules(None) == []


def test_a_tenant_holds_a_bounded_number_of_schedules(stores):
    store, _ = stores
    for n in range(MAX_SCHEDULES):
        store.put("acme", f"s{n}", EVERY_5S)
    with pytest.raises(QuotaExceeded):
        store.put("acme", "one-more", EVERY_5S)
    store.put("acme", "s0", EVERY_5S)  # replacing one is not holding one more
    store.put("globex", "s0", EVERY_5S)


def test_two_desks_firing_at_once_submit_each_firing_once(stores):
    first, second = stores
    first.put("acme", "daily", EVERY_5S)
    due_at = first.schedule("acme", "daily").next_at
    assert due_at is not None
    recorders = [Recorder(), Recorder()]

    async def race(now: float) -> None:
        await asyncio.gather(
            Scheduler(first, recorders[0]).fire_due(now),
            Scheduler(second, recorders[1]).fire_due(now),
        )

    for n in range(5):  # five firings in a row, each raced by both desks
        asyncio.run(race(due_at + 5 * n + 0.5))
    orders = recorders[0].orders + recorders[1].orders
    assert len(orders) == 5
    info = first.schedule("acme", "daily")
    assert info.fired == 5
    assert [r.fire_at for r in info.runs] == [due_at + 5 * n for n in range(4, -1, -1)]
    assert all(r.job_id is not None for r in info.runs)


def test_a_firing_submits_as_the_tenant_never_as_an_admin(stores):
    store, _ = stores
    store.put("acme", "daily", EVERY_5S.model_copy(update={"budget": Budget(tokens=500)}))
    recorder = Recorder()
    due_at = store.schedule("acme", "daily").next_at
    (job_id,) = asyncio.run(Scheduler(store, recorder).fire_due(due_at))
    ((order, caller),) = recorder.orders
    assert (order.task, order.team, order.budget.tokens) == ("Summarise the day.", "crew", 500)
    assert (caller.tenant, caller.admin, caller.by) == ("acme", False, "schedule:daily")
    assert store.schedule("acme", "daily").runs[0].job_id == job_id


def test_a_desk_that_was_down_fires_a_missed_time_once_then_goes_on_from_now(stores):
    store, _ = stores
    store.put("acme", "daily", EVERY_5S)
    recorder = Recorder()
    much_later = time.time() + 3600
    asyncio.run(Scheduler(store, recorder).fire_due(much_later))
    asyncio.run(Scheduler(store, recorder).fire_due(much_later))  # nothing due again yet
    assert len(recorder.orders) == 1
    assert store.schedule("acme", "daily").next_at > much_later


def test_a_disabled_schedule_does_not_fire_and_a_refused_job_is_recorded(stores):
    store, _ = stores
    store.put("acme", "off", EVERY_5S.model_copy(update={"enabled": False}))
    store.put("acme", "refused", EVERY_5S)
    refusing = Recorder(refuse=Forbidden("team 'crew' is not in the tenant's policy"))
    later = time.time() + 60
    assert asyncio.run(Scheduler(store, refusing).fire_due(later)) == []
    (run,) = store.schedule("acme", "refused").runs
    assert run.job_id is None
    assert run.error == "forbidden: team 'crew' is not in the tenant's policy"
    assert store.schedule("acme", "off").runs == ()
    assert store.schedule("acme", "refused").next_at > later  # it goes on
