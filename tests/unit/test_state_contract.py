"""The state stores' contract, on SQLite and on a real PostgreSQL: the same tests, both backends.

Every store (journal, team catalog and policies, approvals, the pool's ledger and usage, the
tools' idempotency records and grants) must behave the same whichever backend holds it, and a
second instance on the same location (a restarted actor, on another node for PostgreSQL)
must see everything the first wrote.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from raytroupe.actors.llm.budget import KeptCall, Reservation, Spend
from raytroupe.actors.llm.state import PoolState
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.state import open_database, redact_url, upsert
from raytroupe.actors.state.postgres import CHECK_IDLE_S
from raytroupe.actors.tools.grants import Grants
from raytroupe.actors.tools.idempotency import IdempotencyStore
from raytroupe.protocols import (
    AgentSpec,
    ApprovalDecision,
    ApprovalRequest,
    Budget,
    BudgetExceeded,
    ConfigError,
    Conflict,
    ImagePart,
    JobEvent,
    JobResult,
    JobsQuery,
    LLMResponse,
    Plan,
    StateUnavailable,
    SubtaskResult,
    TeamSpec,
    TenantPolicy,
    Timings,
    ToolResult,
    Usage,
    UsageRow,
)
from raytroupe.protocols.job_context import Example, History, JobContext, TextFile, Turn

TEAM = TeamSpec(name="crew", agents=(AgentSpec(name="ada", role="writer"),))
PLAN = Plan.model_validate(
    {"subtasks": [{"id": "s1", "role": "writer", "instructions": "draft"},
                  {"id": "s2", "role": "writer", "instructions": "edit", "depends_on": ["s1"]}]}
)  # fmt: skip
IMAGE = ImagePart(url="https://example.com/cat.png")
PAID = ToolResult(call_id="c1", tool="pay", ok=True, data={"paid": 3})


def _done(sid: str, output: str = "ok") -> SubtaskResult:
    return SubtaskResult(id=sid, role="writer", instructions="i", status="succeeded", output=output)


def _result(job_id: str) -> JobResult:
    return JobResult(
        job_id=job_id, task="t", team="crew", status="succeeded", answer="answer",
        subtasks=(_done("s1"), _done("s2")), timings=Timings(submitted_at=1.5, finished_at=2.5),
    )  # fmt: skip


# -- the journal: jobs, plans, subtasks, approvals, teams, policies, inline teams


CONTEXT = JobContext(
    request="And in Paris?",
    files=(TextFile(name="notes.md", media_type="text/markdown", text="é, ü: ☃"),),
    history=History(
        summary="Prices.",
        turns=(
            Turn(role="user", text="Rent in Lyon?"),
            Turn(role="assistant", text="900"),
        ),
    ),
    examples=(Example(request="Rent in Nice?", plan="a: look", tools="calculator", answer="1k"),),
    lessons=("Say the currency.",),
)


def test_an_unfinished_job_comes_back_whole_to_a_new_journal(state_at, keep):
    first = keep(Journal(state_at("journal")))
    first.job("j1", context=CONTEXT, team=TEAM, tenant="acme", budget=Budget(tokens=500),
              submitted_at=1700000000.123456, images=(IMAGE,))  # fmt: skip
    first.plan("j1", PLAN)
    first.subtask("j1", _done("s1", "draft v1"))
    first.subtask("j1", _done("s1", "draft v2"))  # a re-run replaces
    log = [
        JobEvent(job_id="j1", seq=n, at=1.5 + n, type=kind, data={"n": n, "text": "é"})
        for n, kind in enumerate(("job_submitted", "plan_ready", "llm_delta"), start=1)
    ]
    for event in log:
        first.event(event)
    with pytest.raises(Conflict, match="event 2 of job j1 was journaled already"):
        first.event(log[1])
    first.taken("j1", "s2", "ada")
    first.taken("j1", "s2", "grace")  # dispatched again, to another: the latest holds
    first.taken("j1", "s3", "alan")
    first.close()

    (found,) = keep(Journal(state_at("journal"))).unfinished()
    assert (found.job_id, found.team, found.tenant) == ("j1", TEAM, "acme")
    assert found.context == CONTEXT.model_copy(update={"lessons": ()})  # recalled, not kept
    assert found.budget == Budget(tokens=500)
    assert found.submitted_at == 1700000000.123456  # full precision, not a 4-byte float
    assert found.plan == PLAN
    assert found.done == {"s1": _done("s1", "draft v2")}
    assert found.images == (IMAGE,)
    (job,) = keep(Journal(state_at("journal"))).resumable()
    assert job.events == log  # its event log goes on after its last
    assert job.taken == {"s2": "grace", "s3": "alan"}  # where a dispatch again goes first


def test_a_job_journaled_before_contexts_were_resumes_with_its_task_as_the_request(state_at, keep):
    journal = keep(Journal(state_at("journal")))
    journal.job("old", context=CONTEXT, team=TEAM, tenant="acme", budget=None, submitted_at=1.0)
    glued = "And in Paris?\n\nThe conversation so far (...):\nuser: Rent in Lyon?"
    journal.db.execute("UPDATE jobs SET task = ?, context = NULL WHERE id = 'old'", (glued,))
    (found,) = journal.unfinished()
    assert found.context == JobContext(request=glued)  # the prompt it was given, whole
    (job,) = journal.resumable()
    assert job.prompt == glued


def test_a_job_recorded_twice_keeps_its_first_record_and_a_finished_one_is_not_resumed(
    state_at, keep
):
    journal = keep(Journal(state_at("journal")))
    journal.job(
        "j1",
        context=JobContext(request="first"),
        team=TEAM,
        tenant="a",
        budget=None,
        submitted_at=1.0,
    )
    journal.job(
        "j1",
        context=JobContext(request="again"),
        team=TEAM,
        tenant="b",
        budget=None,
        submitted_at=2.0,
    )
    assert [u.context.request for u in journal.unfinished()] == ["first"]
    journal.finish(_result("j1"))
    assert journal.unfinished() == []
    assert journal.load("j1") == (TEAM, "a", _result("j1"))
    assert journal.load("unknown") is None
    assert journal.finished("j1").result == _result("j1")
    # its events were not journaled: its last one stands for them, so a watcher stops
    (ended,) = journal.finished("j1").events
    assert (ended.seq, ended.type, ended.at, ended.terminal) == (1, "job_succeeded", 2.5, True)


def test_unfinished_jobs_come_back_oldest_first(state_at, keep):
    journal = keep(Journal(state_at("journal")))
    for job_id, at in (("late", 3.0), ("early", 1.0), ("mid", 2.0)):
        journal.job(
            job_id,
            context=JobContext(request="t"),
            team=TEAM,
            tenant="a",
            budget=None,
            submitted_at=at,
        )
    assert [u.job_id for u in journal.unfinished()] == ["early", "mid", "late"]


def test_the_jobs_list_is_newest_first_per_tenant_with_filters_search_and_paging(state_at, keep):
    journal = keep(Journal(state_at("journal")))
    rows = (("j1", "acme", 1.0, "Write 100% of the_report", "acme-user"),
            ("j2", "acme", 2.0, "summarize", "driver"),
            ("j3", "globex", 3.0, "GLOBEX secret plan", "globex-user"),
            ("j4", "acme", 4.0, "translate", None))  # fmt: skip
    for job_id, tenant, at, task, by in rows:
        journal.job(
            job_id,
            context=JobContext(request=task),
            team=TEAM,
            tenant=tenant,
            budget=None,
            submitted_at=at,
            submitted_by=by,
        )
    journal.finish(_result("j2").model_copy(update={"job_id": "j2"}))

    def ids(tenant=None, **filters):
        return [line.id for line in journal.summaries(tenant, JobsQuery(**filters))]

    assert ids() == ["j4", "j3", "j2", "j1"]
    assert ids(tenant="acme") == ["j4", "j2", "j1"]
    assert ids(tenant="acme", status="succeeded") == ["j2"]
    assert ids(tenant="acme", status="live") == ["j4", "j1"]
    assert ids(tenant="acme", status="running") == ["j4", "j1"]  # live statuses: the shard's
    assert ids(tenant="acme", text="100%") == ["j1"]  # LIKE's wildcards are text here
    assert ids(tenant="acme", text="_") == ["j1"]
    assert ids(tenant="acme", text="DRIVER") == ["j2"]
    assert ids(tenant="acme", text="secret") == []  # another tenant's task
    assert ids(tenant="acme", before=4.0, limit=1) == ["j2"]
    done = journal.summary("j2")
    assert (done.status, done.finished_at, done.tokens, done.subtasks) == ("succeeded", 2.5, 0, 2)
    assert (done.submitted_by, done.team, done.task) == ("driver", "crew", "summarize")
    waiting = journal.summary("j4")
    assert (waiting.status, waiting.cost_usd, waiting.submitted_by) == ("pending", None, None)
    assert journal.summary("unknown") is None
    long_task = "x" * 5000
    journal.job(
        "j5",
        context=JobContext(request=long_task),
        team=TEAM,
        tenant="acme",
        budget=None,
        submitted_at=5.0,
    )
    assert journal.summary("j5").task == "x" * 200


def test_an_approval_decision_is_kept_with_its_exact_call_and_may_be_replaced(state_at, keep):
    journal = keep(Journal(state_at("journal")))
    request = ApprovalRequest(
        approval_id="a1", task_id="s1", agent="ada", tool="pay", arguments={"amount": 3}
    )
    assert journal.decided("j1", "a1") is None
    journal.decide("j1", request, ApprovalDecision(approval_id="a1", approved=False, reason="no"))
    journal.decide("j1", request, ApprovalDecision(approval_id="a1", approved=True))
    again = keep(Journal(state_at("journal")))
    assert again.decided("j1", "a1") == (request, ApprovalDecision(approval_id="a1", approved=True))
    assert again.decided("j2", "a1") is None


def test_teams_policies_and_inline_teams_outlive_the_journal(state_at, keep):
    journal = keep(Journal(state_at("journal")))
    other = TeamSpec(name="band", agents=(AgentSpec(name="bo", role="r"),))
    journal.put_team(other)
    journal.put_team(TEAM)
    journal.put_team(TEAM.model_copy(update={"max_parallel": 2}))
    journal.put_policy("acme", TenantPolicy(max_turns=3))
    journal.put_policy("*", TenantPolicy(max_turns=9))
    journal.put_policy("*", None)
    journal.use_inline("acme", other, 5.0)
    journal.use_inline("acme", other, 6.0)
    journal.use_inline("zed", TEAM, 4.0)
    journal.drop_inline("nobody")

    again = keep(Journal(state_at("journal")))
    assert [t.name for t in again.teams()] == ["band", "crew"]
    assert again.teams()[1].max_parallel == 2
    assert again.policies() == {"acme": TenantPolicy(max_turns=3)}
    assert again.inline_teams() == [("zed", TEAM, 4.0), ("acme", other, 6.0)]
    again.drop_team("band")
    again.drop_inline("crew")
    assert [t.name for t in keep(Journal(state_at("journal"))).teams()] == ["crew"]
    assert keep(Journal(state_at("journal"))).inline_teams() == [("acme", other, 6.0)]


# -- the pool's ledger and usage


def test_spend_adds_up_per_account_and_open_holds_are_booked_by_the_next_pool(state_at, keep):
    state = keep(PoolState(state_at("llm"), replica="llm-0"))
    call = Reservation(id="r1", keys=("job:j1", "tenant:acme"), tokens=100, usd=0.5)
    state.hold(call)
    assert state.account("tenant:acme") == (Spend(0, 0.0), Spend(100, 0.5))
    state.settle(call, tokens=40, usd=0.25)
    state.settle(call, tokens=40, usd=0.25)  # settled already: nothing more
    second = Reservation(id="r2", keys=("tenant:acme",), tokens=9, usd=0.0)
    state.hold(second)
    state.settle(second, 10, 0.125)
    state.hold(Reservation(id="dead", keys=("tenant:acme",), tokens=1000, usd=2.0))
    state.close()

    restarted = keep(PoolState(state_at("llm"), replica="llm-0"))
    assert restarted.recover() == 1  # the dead pool's hold is booked in full, once
    assert restarted.recover() == 0
    expected = {"job:j1": Spend(40, 0.25), "tenant:acme": Spend(1050, 2.375)}
    assert restarted.spent() == expected
    assert restarted.account("tenant:acme") == (Spend(1050, 2.375), Spend(0, 0.0))


def test_a_calls_answer_is_kept_with_its_cost_once_and_read_back_by_any_replica(state_at, keep):
    """``settle(..., turn)`` bills the call and keeps its answer in one transaction."""
    first = keep(PoolState(state_at("llm"), replica="llm-0"))
    call = Reservation(id="t1", keys=("job:j1",), tokens=50, usd=0.0)
    answer = LLMResponse(text="42", model="m", provider="p", usage=Usage(prompt_tokens=7))
    first.hold(call)
    first.settle(call, 7, 0.0, KeptCall("turn-a", "j1", answer))
    other = answer.model_copy(update={"text": "43"})
    late = Reservation(id="t2", keys=("job:j1",), tokens=50, usd=0.0)
    first.hold(late)
    first.settle(late, 7, 0.0, KeptCall("turn-a", "j1", other))  # the same call again: first kept
    assert first.turn("turn-b") is None
    second = keep(PoolState(state_at("llm"), replica="llm-1"))
    assert second.turn("turn-a") == answer
    # a hold already booked in full by a recovering replica: the answer is kept all the same
    lost = Reservation(id="t3", keys=("job:j1",), tokens=50, usd=0.0)
    first.hold(lost)
    assert keep(PoolState(state_at("llm"), replica="llm-0")).recover() == 1
    first.settle(lost, 7, 0.0, KeptCall("turn-c", "j1", answer))
    assert second.turn("turn-c") == answer
    assert second.spent() == {"job:j1": Spend(64, 0.0)}  # 7 + 7 + 50 booked in full


def test_one_replica_at_a_time_makes_a_kept_call(state_at, keep):
    """``claim_turn``: the first replica makes the call, another is told who; a failed call is
    released, a kept answer ends the claim, a stale claim is taken over, a restarted replica
    clears its own."""
    zero = keep(PoolState(state_at("llm"), replica="llm-0"))
    one = keep(PoolState(state_at("llm"), replica="llm-1"))
    assert zero.claim_turn("k1", lease_s=60) is None
    assert one.claim_turn("k1", lease_s=60) == "llm-0"
    zero.release_turn("k1")  # the call failed
    assert one.claim_turn("k1", lease_s=60) is None
    call = Reservation(id="c1", keys=("job:j1",), tokens=5, usd=0.0)
    answer = LLMResponse(text="x", model="m", provider="p")
    one.hold(call)
    one.settle(call, 5, 0.0, KeptCall("k1", "j1", answer))  # answered: the claim ends
    assert zero.claim_turn("k1", lease_s=60) is None
    assert one.claim_turn("k2", lease_s=60) is None
    assert zero.claim_turn("k2", lease_s=0.0) is None  # older than its lease: taken over
    assert one.claim_turn("k3", lease_s=60) is None
    assert keep(PoolState(state_at("llm"), replica="llm-1")).recover() == 0  # llm-1 restarted
    assert zero.claim_turn("k3", lease_s=60) is None  # its claims went with it


def test_a_replica_books_its_own_holds_and_replica_0_those_of_replicas_gone(state_at, keep):
    location = state_at("llm")
    for owner in ("llm-0", "llm-1", "llm-5", ""):  # llm-5: scaled away; "": before replicas
        held = keep(PoolState(location, replica=owner))
        held.hold(Reservation(id=f"h-{owner}", keys=("tenant:t",), tokens=10, usd=0.0))
    assert keep(PoolState(location, replica="llm-1")).recover() == 1
    assert keep(PoolState(location, replica="llm-0")).recover(live=["llm-0", "llm-1"]) == 3
    assert keep(PoolState(location)).account("tenant:t") == (Spend(40, 0.0), Spend(0, 0.0))


def test_a_kept_calls_hold_left_by_a_dead_replica_is_taken_over_by_the_call_made_again(
    state_at, keep
):
    """Its hold stays held (not booked in full) until the call asked again at its place takes
    it over; then the two cost what the budget holds for one, and the orphan is booked at the
    new call's cost, at most its hold."""
    dead = keep(PoolState(state_at("llm"), replica="llm-0"))
    keys = ("job:j1", "tenant:t")
    dead.hold(Reservation(id="lost", keys=keys, tokens=1000, usd=1.0, turn="k"))
    dead.hold(Reservation(id="plain", keys=("tenant:t",), tokens=100, usd=0.0))
    dead.hold(Reservation(id="other", keys=keys, tokens=1000, usd=1.0, turn="k2"))
    again = keep(PoolState(state_at("llm"), replica="llm-0"))
    assert again.recover() == 1  # only the call not kept is booked
    assert again.account("job:j1") == (Spend(0, 0.0), Spend(2000, 2.0))
    limit = {"job:j1": Budget(tokens=2100), "tenant:t": None}
    remade = Reservation(id="remade", keys=keys, tokens=1000, usd=1.0, turn="k")
    again.hold(remade, limit)  # 2,000 held + 1,000 more would not fit 2,100
    assert again.account("job:j1") == (Spend(0, 0.0), Spend(2000, 2.0))
    with pytest.raises(BudgetExceeded):  # another call: no hold to take over
        again.hold(Reservation(id="new", keys=keys, tokens=1000, usd=1.0, turn="k3"), limit)
    answer = LLMResponse(text="x", model="m", provider="p")
    again.settle(remade, 300, 0.25, KeptCall("k", "j1", answer))
    assert again.account("job:j1") == (Spend(600, 0.5), Spend(1000, 1.0))  # 300 + 300
    # the other one's call is made again and fails: its orphan is booked in full
    failed = Reservation(id="failed", keys=keys, tokens=1000, usd=1.0, turn="k2")
    again.hold(failed, limit)
    again.settle(failed, 0, 0.0)
    assert again.account("job:j1") == (Spend(1600, 1.5), Spend(0, 0.0))
    assert again.account("tenant:t") == (Spend(1700, 1.5), Spend(0, 0.0))


def test_an_orphaned_hold_passes_on_through_a_second_death_and_waits_only_so_long(state_at, keep):
    location = state_at("llm")
    keys = ("job:j1",)
    keep(PoolState(location, replica="llm-0")).hold(
        Reservation(id="one", keys=keys, tokens=500, usd=0.0, turn="k")
    )
    assert keep(PoolState(location, replica="llm-0")).recover() == 0
    second = keep(PoolState(location, replica="llm-1"))
    second.hold(Reservation(id="two", keys=keys, tokens=600, usd=0.0, turn="k"))
    assert keep(PoolState(location, replica="llm-1")).recover() == 0  # it died too
    third = keep(PoolState(location, replica="llm-0"))
    made = Reservation(id="three", keys=keys, tokens=600, usd=0.0, turn="k")
    third.hold(made)
    assert third.account("job:j1") == (Spend(0, 0.0), Spend(600, 0.0))
    third.settle(
        made, 400, 0.0, KeptCall("k", "j1", LLMResponse(text="x", model="m", provider="p"))
    )
    assert third.account("job:j1") == (Spend(400 + 800, 0.0), Spend(0, 0.0))  # 2 x 400 <= 1,100
    # one not taken over: another job's call at that place does not take it; time does
    keep(PoolState(location, replica="llm-1")).hold(
        Reservation(id="four", keys=keys, tokens=50, usd=0.0, turn="k4")
    )
    assert keep(PoolState(location, replica="llm-1")).recover() == 0
    third.hold(Reservation(id="elsewhere", keys=("job:j2",), tokens=50, usd=0.0, turn="k4"))
    assert third.book_orphans(wait_s=60) == 0
    assert third.account("job:j1") == (Spend(1200, 0.0), Spend(50, 0.0))
    assert third.book_orphans(wait_s=0) == 1
    assert third.account("job:j1") == (Spend(1250, 0.0), Spend(0, 0.0))


def test_a_limit_holds_however_many_replicas_reserve_at_once(state_at, keep):
    """8 replicas (connections) race for one tenant's 1,000 tokens, 10 at a time."""
    location = state_at("llm")
    limit = {"tenant:t": Budget(tokens=1000, usd=1.0), "job:j": None}
    replicas = [keep(PoolState(location, replica=f"llm-{n}")) for n in range(8)]
    start = threading.Barrier(len(replicas))
    taken: list[list[Reservation]] = [[] for _ in replicas]
    refused: list[BaseException] = []

    def race(n: int) -> None:
        start.wait()
        for i in range(200):  # more than fit: each stops at its first refusal
            call = Reservation(id=f"{n}-{i}", keys=("tenant:t", "job:j"), tokens=10, usd=0.004)
            try:
                replicas[n].hold(call, limit)
            except BudgetExceeded as exc:
                refused.append(exc)
                return
            taken[n].append(call)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(len(replicas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    held = [call for calls in taken for call in calls]
    # tokens allow 100 holds, dollars 250: the token limit binds, exactly
    assert len(held) == 100, len(held)
    assert len(refused) == len(replicas)
    assert "tenant:t token budget" in str(refused[0])
    assert replicas[0].account("tenant:t") == (Spend(0, 0.0), Spend(1000, pytest.approx(0.4)))
    for n, calls in enumerate(taken):
        for call in calls:
            replicas[n].settle(call, tokens=7, usd=0.001)
    spent, still = replicas[0].account("tenant:t")
    assert (spent.tokens, still.tokens) == (700, 0)
    assert replicas[0].account("job:j")[0].tokens == 700


def test_usage_rows_of_replicas_add_up(state_at, keep):
    location = state_at("llm")
    row = UsageRow(job_id="j1", agent="ada", model="m", deployment="d", provider="p", calls=2,
                   prompt_tokens=10, completion_tokens=5, cost_usd=0.5)  # fmt: skip
    keep(PoolState(location, replica="llm-0")).book(row)
    keep(PoolState(location, replica="llm-1")).book(row.model_copy(update={"calls": 1}))
    keep(PoolState(location, replica="llm-1")).book(row.model_copy(update={"job_id": "j2"}))
    state = keep(PoolState(location))
    (both,) = state.usage(job_id="j1")
    assert (both.calls, both.prompt_tokens, both.cost_usd) == (3, 20, 1.0)
    assert [r.calls for r in state.usage(replica="llm-0")] == [2]
    assert len(state.usage()) == 2


def test_a_usage_row_replaces_its_last_for_the_same_job_agent_and_model(state_at, keep):
    state = keep(PoolState(state_at("llm")))
    row = UsageRow(job_id="j1", agent="ada", model="m", deployment="d", provider="p", calls=1)
    state.book(row)
    state.book(row.model_copy(update={"calls": 2}))
    state.book(row.model_copy(update={"agent": "bo"}))
    state.book(row.model_copy(update={"job_id": None}))
    rows = keep(PoolState(state_at("llm"))).usage()
    assert sorted((r.job_id or "", r.agent, r.calls) for r in rows) == [
        ("", "ada", 1), ("j1", "ada", 2), ("j1", "bo", 1)
    ]  # fmt: skip


# -- the tools' idempotency records and grants


def test_a_claim_is_taken_once_recorded_released_or_left_abandoned(state_at, keep):
    store = keep(IdempotencyStore(state_at("tools")))
    assert store.claim("k", lease_s=60) == "claimed"
    assert store.claim("k", lease_s=60) == "held"
    assert store.claim("k", lease_s=0) == "abandoned"  # its holder never came back
    store.release("k")
    assert store.claim("k", lease_s=60) == "claimed"  # a clean failure may run again
    store.finish("k", PAID)
    assert store.claim("k", lease_s=0) == "held"  # done is done, whatever the lease
    assert keep(IdempotencyStore(state_at("tools"))).recorded("k") == PAID
    assert store.recorded("other") is None


def test_of_many_racing_claimers_exactly_one_wins(state_at, keep):
    location = state_at("tools")
    stores = [keep(IdempotencyStore(location)) for _ in range(8)]  # 8 connections, as 8 sandboxes
    start = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def claim(store: IdempotencyStore) -> None:
        start.wait()
        outcomes.append(store.claim("pay-once", lease_s=60))

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["claimed"] + ["held"] * 7


def test_grants_and_peers_outlive_the_sandbox(state_at, keep):
    grants = keep(Grants(state_at("grants")))
    grants.set("ada", ["calculator", "echo"], ["bo"])
    grants.set("ada", ["calculator"], ["bo", "cy"])
    grants.close()
    again = keep(Grants(state_at("grants")))
    assert again.get("ada") == {"calculator"}
    assert again.peers("ada") == {"bo", "cy"}
    assert again.get("nobody") == frozenset()


# -- schema migrations


def test_migrations_apply_once_in_order_and_a_newer_schema_is_refused(state_at):
    location = state_at("x")
    one = ("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)",)
    two = ("ALTER TABLE notes ADD COLUMN at DOUBLE PRECISION",)
    db = open_database(location, "notes", (one,))
    db.execute("INSERT INTO notes (id, body) VALUES (?, ?)", ("n1", "hi"))
    db.close()
    db = open_database(location, "notes", (one, two))  # upgrade: only step two runs
    db.execute(upsert("notes", ("id", "body", "at"), key=("id",)), ("n1", "hello", 2.5))
    assert db.execute("SELECT id, body, at FROM notes") == [("n1", "hello", 2.5)]
    db.close()
    open_database(location, "notes", (one, two)).close()  # nothing left to do
    with pytest.raises(ConfigError, match="schema version 2, newer than this raytroupe knows"):
        open_database(location, "notes", (one,))


def test_a_failing_migration_leaves_nothing_behind(state_at):
    location = state_at("x")
    broken = ("CREATE TABLE half (id TEXT)", "CREATE TABLE broken (")
    with pytest.raises(Exception):  # noqa: B017, PT011 - each backend's own syntax error
        open_database(location, "half", (broken,))
    db = open_database(location, "half", (("CREATE TABLE half (id TEXT PRIMARY KEY)",),))
    db.execute("INSERT INTO half (id) VALUES (?)", ("made by the good step",))
    db.close()


def test_stores_opening_at_once_migrate_once(state_at, keep):
    location = state_at("journal")
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one() -> None:
        start.wait()
        try:
            Journal(location).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def test_a_journal_file_from_before_migrations_opens_with_its_jobs(tmp_path):
    path = tmp_path / "journal.sqlite"
    old = sqlite3.connect(path)  # what raytroupe wrote before the state store had versions
    old.executescript(
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, task TEXT NOT NULL, team TEXT NOT NULL, "
        "tenant TEXT NOT NULL, budget TEXT, submitted_at REAL NOT NULL, result TEXT);"
        "CREATE TABLE teams (name TEXT PRIMARY KEY, spec TEXT NOT NULL);"
    )
    old.execute("INSERT INTO jobs VALUES ('j0', 't', ?, 'a', NULL, 1.0, NULL)",
                (TEAM.model_dump_json(),))  # fmt: skip
    old.execute("INSERT INTO teams VALUES ('crew', ?)", (TEAM.model_dump_json(),))
    old.commit()
    old.close()
    old = sqlite3.connect(path)
    old.execute("INSERT INTO jobs VALUES ('j9', 't', ?, 'a', NULL, 2.0, ?)",
                (TEAM.model_dump_json(), _result("j9").model_dump_json()))  # fmt: skip
    old.commit()
    old.close()
    journal = Journal(path)
    assert [u.job_id for u in journal.unfinished()] == ["j0"]
    assert journal.teams() == [TEAM]
    # the jobs list reads their results once, when the columns it reads are added
    assert [(j.id, j.status, j.subtasks) for j in journal.summaries(None, JobsQuery())] == [
        ("j9", "succeeded", 2),
        ("j0", "pending", None),
    ]


def test_upsert_takes_identifiers_only():
    with pytest.raises(ValueError, match="not SQL identifiers"):
        upsert("t; DROP TABLE jobs", ("a",), key=("a",))


# -- PostgreSQL: reaching it, losing it, and never showing its password


def test_an_unreachable_server_is_state_unavailable_without_its_password(postgres, keep):
    url = f"postgresql://troupe:{postgres.password}@127.0.0.1:1/nowhere"
    with pytest.raises(StateUnavailable) as caught:
        keep(Journal(url))
    assert postgres.password not in str(caught.value)
    assert postgres.password not in repr(caught.value.detail)
    assert caught.value.detail["store"] == "postgresql://troupe:***@127.0.0.1:1/nowhere"
    assert caught.value.retryable


def test_a_wrong_password_is_state_unavailable_and_the_guess_is_not_repeated(postgres, keep):
    url = postgres.database().replace(postgres.password, "guess-Secret-123")
    with pytest.raises(StateUnavailable, match="password authentication failed") as caught:
        keep(Grants(url))
    assert "guess-Secret-123" not in str(caught.value)
    assert "troupe:***@127.0.0.1" in str(caught.value)


def test_the_password_may_come_from_the_environment_instead_of_the_url(postgres, monkeypatch, keep):
    url = postgres.database()
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    bare = url.replace(f":{postgres.password}@", "@")
    assert redact_url(bare) == bare
    grants = keep(Grants(bare))
    grants.set("ada", ["echo"], [])
    assert keep(Grants(url)).get("ada") == {"echo"}


def test_a_store_reconnects_after_the_server_cut_its_connections(postgres, keep):
    url = postgres.database()
    journal = keep(Journal(url))
    journal.put_team(TEAM)
    database = url.rsplit("/", 1)[1]
    cut = postgres.sql(
        postgres.url(),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    )
    assert cut  # the journal's pooled connection was among them
    time.sleep(CHECK_IDLE_S + 0.2)  # idle now: it is checked before its next use
    assert journal.teams() == [TEAM]  # the dead connection is replaced, not raised


def test_a_connection_cut_while_busy_fails_that_call_typed_and_the_next_one_works(postgres, keep):
    url = postgres.database()
    journal = keep(Journal(url))
    journal.put_team(TEAM)
    database = url.rsplit("/", 1)[1]
    postgres.sql(
        postgres.url(),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    )
    with pytest.raises(StateUnavailable, match=r"the state store .* failed"):
        journal.teams()  # used a moment ago: not pinged, and found dead
    assert journal.teams() == [TEAM]


# -- graph checkpoints, resumes, child jobs and forks


def test_graph_checkpoints_resumes_children_and_forks_outlive_the_orchestrator(state_at, keep):
    from raytroupe.actors.orchestrator.graphs.checkpoints import CheckpointStore  # noqa: PLC0415
    from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt, GraphTask  # noqa: PLC0415

    def point(step: int, namespace: str = "", **fields: object) -> GraphCheckpoint:
        return GraphCheckpoint.model_validate({
            "job_id": "g1", "namespace": namespace, "step": step, "at": 1.0 + step,
            "state": {"log": ["x"] * step}, "next": [{"node": "n", "item": {"k": step}}],
            **fields,
        })  # fmt: skip

    first = CheckpointStore(keep(open_database(state_at("journal"), "journal", ())))
    paused = GraphInterrupt(id="2/n/before", node="n", when="before")
    for step in range(3):
        first.put(point(step))
    first.put(point(2, interrupt=paused))  # the same step again: replaced
    first.put(point(1, namespace="sub.2/"))
    assert first.resume("g1", "2/n/before", {"ok": True}, {"log": []})
    assert not first.resume("g1", "2/n/before", "again", None)  # answered once
    first.child("g1", "n.2", "child-1")
    first.child("g1", "n.2", "child-2")  # the first child recorded stays
    first.child("child-1", "m.1", "grandchild")
    first.fork("f1", point(1).model_copy(update={"job_id": "f1"}), ("g1", 1, {"log": ["y"]}))

    again = CheckpointStore(keep(open_database(state_at("journal"), "journal", ())))
    assert again.latest("g1") == point(2, interrupt=paused)
    assert again.latest("g1", "sub.2/") == point(1, namespace="sub.2/")
    assert again.get("g1", 1) == point(1)
    assert again.get("g1", 7) is None
    assert [(p.namespace, p.step) for p in again.all("g1")] == [
        ("", 0), ("", 1), ("", 2), ("sub.2/", 1)]  # fmt: skip
    assert again.all("g1")[0].next == (GraphTask(node="n", item={"k": 0}),)
    assert again.resumed("g1", "2/n/before") == ({"ok": True}, {"log": []})
    assert again.resumed("g1", "3/n/after") is None
    assert again.child("g1", "n.2") == "child-1"
    assert again.depth("grandchild", 4) == 2
    assert again.depth("g1", 4) == 0
    assert again.forked_from("f1") == ("g1", 1, {"log": ["y"]})
    assert again.forked_from("g1") is None
    assert again.latest("f1").step == 1


def test_threads_sharing_one_sqlite_store_never_mix_their_transactions(tmp_path):
    """An actor's loop and its ``to_thread`` workers share one connection: each transaction
    is one thread's, whole (a second BEGIN would fail, another's statement would join it)."""
    db = open_database(tmp_path / "shared.sqlite", "shared", (
        ("CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL)",),
    ))  # fmt: skip
    db.execute("INSERT INTO counters (name, n) VALUES ('a', 0)")
    failures: list[BaseException] = []

    def bump(times: int) -> None:
        try:
            for _ in range(times):
                with db.transaction() as tx:
                    (n,) = tx.execute("SELECT n FROM counters WHERE name = 'a'")[0]
                    time.sleep(0.0005)  # another thread would step in here
                    tx.execute("UPDATE counters SET n = ? WHERE name = 'a'", (n + 1,))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    workers = [threading.Thread(target=bump, args=(50,)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert failures == []
    assert db.execute("SELECT n FROM counters WHERE name = 'a'") == [(200,)]
    db.close()
