"""The journal and resuming: a new orchestrator picks up where a dead one stopped."""

import pytest
from wiring import GatedPool, InProcessProvisioner, control_plane, gated_system, order, run

from raytroupe.actors import LLMAdapterPool, LocalRouterClient, MessageRouter
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    Attachment,
    ErrorCode,
    InvalidInput,
    JobEvent,
    RecipientUnavailable,
    StateUnavailable,
    SubtaskTaken,
    TaskRequest,
    TeamSpec,
    as_written,
    decode,
    encode,
    orchestrator_address,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.spend import SpendAlert
from raytroupe.runtime.operations import At, job_reads
from tests.support.inline import agent_name

TEAM = TeamSpec(name="j", agents=(AgentSpec(name="solo", role="w"),), max_parallel=1)
TASK = "Tasks:\n- first thing.\n- second thing.\n- third thing."


async def system(journal, allowed):
    pool = GatedPool(LLMAdapterPool(), allowed)
    desk, orchestrator = await gated_system(journal, pool)
    return desk, orchestrator, pool


def test_a_new_orchestrator_resumes_without_rerunning_finished_subtasks(tmp_path):
    path = tmp_path / "journal.sqlite"

    async def first_life():
        desk, orchestrator, pool = await system(Journal(path), allowed=1)
        job_id = await desk.submit(*order(TASK, TEAM))
        await pool.held.wait()  # s1 done, s2 held at the gate
        for task in list(orchestrator._tasks):  # the process dies here
            task.cancel()
        return job_id, list(pool.work)

    async def second_life(job_id):
        _, orchestrator, pool = await system(Journal(path), allowed=99)
        result = await orchestrator.wait(job_id, 10)
        return result, pool.work

    job_id, before = run(first_life())
    result, after = run(second_life(job_id))
    assert before == ["first thing.", "second thing."]
    assert after == ["second thing.", "third thing."]  # s1 came from the journal
    assert result.status == "succeeded"
    assert [s.id for s in result.subtasks] == ["s1", "s2", "s3"]
    # journaled with its actors' names; its caller reads them as the team wrote them
    assert as_written(Journal(path).load(job_id)[2], "default") == result


def test_a_finished_job_is_known_after_a_restart(tmp_path):
    path = tmp_path / "journal.sqlite"

    async def life():
        desk, orchestrator, _ = await system(Journal(path), allowed=99)
        job_id = await desk.submit(*order("- only thing.", TEAM))
        return job_id, await orchestrator.wait(job_id, 10)

    async def later(job_id):
        _, orchestrator, _ = await system(Journal(path), allowed=99)
        return await orchestrator.status(job_id), await orchestrator.wait(job_id, 0)

    job_id, result = run(life())
    status, again = run(later(job_id))
    assert (status, again) == ("succeeded", result)


def test_a_task_holding_a_nul_is_refused_before_anything_starts(tmp_path):
    """PostgreSQL keeps no NUL in text; the journal would fail half way: refused at once."""

    async def main():
        desk, orchestrator, pool = await system(Journal(tmp_path / "journal.sqlite"), allowed=99)
        text = Attachment(name="a.txt", media_type="text/plain", data_b64="YQBi")  # "a\0b"
        for task, attachments in (("say\x00hi", ()), ("Summarize a.txt.", (text,))):
            with pytest.raises(InvalidInput, match="NUL character"):
                await desk.submit(*order(task, TEAM, attachments=attachments))
        assert not await orchestrator.jobs()
        assert pool.work == []

    run(main())


# --- one event log per job, across restarts ---------------------------------------------------


async def _read_on(orchestrator, job_id, after):
    """The job's events after ``after`` until its last, read by the declared operation."""
    at = At(orchestrator, tenant="default", admin=True, source="driver", every_tenant=True)
    stream = await job_reads.events.run_for(at, {"job_id": job_id, "after": after})
    return [event async for event in stream if event is not None]


def test_a_restarted_job_goes_on_with_its_event_log_and_a_reader_misses_nothing(tmp_path):
    path = tmp_path / "journal.sqlite"

    async def first_life():
        desk, orchestrator, pool = await system(Journal(path), allowed=1)
        job_id = await desk.submit(*order(TASK, TEAM))
        await pool.held.wait()  # s1 done, s2 held at the gate
        seen = await orchestrator.events(job_id, 0, 0)
        for task in list(orchestrator._tasks):  # the process dies here
            task.cancel()
        return job_id, seen

    async def second_life(job_id, after):
        _, orchestrator, _ = await system(Journal(path), allowed=99)
        rest = await _read_on(orchestrator, job_id, after)  # Last-Event-ID: the last it had
        return rest, await orchestrator.events(job_id, 0, 0)

    async def third_life(job_id):
        _, orchestrator, _ = await system(Journal(path), allowed=99)
        return await orchestrator.events(job_id, 0, 0)

    job_id, seen = run(first_life())
    rest, whole = run(second_life(job_id, seen[-1].seq))
    again = run(third_life(job_id))

    assert [e.type for e in seen][:2] == ["job_submitted", "plan_ready"]
    assert "subtask_finished" in [e.type for e in seen]  # s1's
    assert whole[: len(seen)] == seen  # the log goes on: nothing renumbered or lost
    assert rest == whole[len(seen) :]  # every later event, once, in order
    assert [e.seq for e in whole] == list(range(1, len(whole) + 1))
    assert rest[-1].type == "job_succeeded"
    assert again == whole  # a finished job's whole log, after one more restart


def test_an_event_the_journal_cannot_keep_still_reaches_watchers(tmp_path):
    class Down(Journal):
        def event(self, event):  # noqa: ARG002 - refused whatever it is
            raise StateUnavailable("the store is down", store="test")

    async def main():
        desk, orchestrator, _ = await system(Down(tmp_path / "journal.sqlite"), allowed=99)
        job_id = await desk.submit(*order("- only thing.", TEAM))
        result = await orchestrator.wait(job_id, 10)
        return result, await orchestrator.events(job_id, 0, 0)

    result, events = run(main())
    assert result.status == "succeeded"
    assert [e.type for e in events][-1] == "job_succeeded"


def test_a_job_journaled_before_its_events_were_is_read_back_with_its_last():
    journal = Journal(":memory:")
    journal.job("old", context=JobContext(request="t"), team=TEAM, tenant="default",
                budget=None, submitted_at=1.0)  # fmt: skip
    job = journal.resumable()[0]
    assert job.events == []  # it numbers its events from 1 as it goes on
    journal.event(JobEvent(job_id="old", seq=1, at=2.0, type="job_submitted"))
    journal.event(JobEvent(job_id="old", seq=3, at=3.0, type="plan_ready"))  # not next: a gap
    assert [e.seq for e in journal.resumable()[0].events] == [1]


async def held_at_the_gate(team, journal=None):
    """A job of ``team`` on a shard the agents reach, its second model call held."""
    pool = GatedPool(LLMAdapterPool(), 1)
    router = MessageRouter()
    client = LocalRouterClient(router)
    await router.register("llm-0", pool, ["llm"])
    provisioner = InProcessProvisioner(router, pool.pool, client)
    desk, (orchestrator,) = await control_plane(client, provisioner, journal=journal)
    await router.register("orchestrator", orchestrator)  # as under Ray: agents reach it
    return pool, orchestrator, await desk.submit(*order(TASK, team))


def test_the_agent_that_took_each_subtask_is_journaled_and_only_it_may_say_so(tmp_path):
    """A shard that restarts sends an unfinished subtask to the agent that took it first."""
    path = tmp_path / "journal.sqlite"

    async def life():
        pool, orchestrator, job_id = await held_at_the_gate(TEAM, Journal(path))
        await pool.held.wait()  # s1 done, s2 held at the gate: both were taken by solo
        word = SubtaskTaken(task_id="s3", agent="solo")  # said by another: refused
        forged = AgentMessage(
            sender="mallory", recipient=orchestrator_address(job_id), job_id=job_id, payload=word
        )
        refused = decode(await orchestrator.receive(encode(forged))).payload
        mine = SubtaskTaken(task_id="s3", agent="mallory")  # an agent of no team of the job's
        outsider = forged.model_copy(update={"payload": mine})
        stranger = decode(await orchestrator.receive(encode(outsider))).payload
        for task in list(orchestrator._tasks):  # the process dies here
            task.cancel()
        return refused, stranger

    refused, stranger = run(life())
    assert refused.code is ErrorCode.INVALID_INPUT
    assert stranger.code is ErrorCode.INVALID_INPUT
    assert "'mallory' is not an agent of the job's team" in stranger.message
    (job,) = Journal(path).resumable()
    assert job.taken == {"s1": agent_name("solo"), "s2": agent_name("solo")}


def test_only_the_pools_word_of_the_jobs_own_tenant_is_a_spend_alert_event():
    """A spend alert is the pool's (sender ``llm``) about the job's tenant: any other sender,
    or an alert naming another tenant, is refused, and the job's events do not show it."""

    def alert(tenant: str) -> SpendAlert:
        return SpendAlert(limit="daily", tenant=tenant, window="d2026-12-07", threshold=0.8,
                          measure="usd", spent=8.0, allowed=10.0, hard=True)  # fmt: skip

    async def life():
        pool, orchestrator, job_id = await held_at_the_gate(TEAM)
        await pool.held.wait()
        answers = []
        for sender, tenant in (("mallory", "default"), ("llm", "acme"), ("llm", "default")):
            message = AgentMessage(sender=sender, recipient=orchestrator_address(job_id),
                                   job_id=job_id, payload=alert(tenant))  # fmt: skip
            answers.append(decode(await orchestrator.receive(encode(message))).payload)
        events = await orchestrator.events(job_id, 0, 0)
        for task in list(orchestrator._tasks):
            task.cancel()
        return answers, events

    (forged, elsewhere, told), events = run(life())
    assert forged.code is ErrorCode.INVALID_INPUT
    assert "'mallory' cannot raise a spend alert" in forged.message
    assert elsewhere.code is ErrorCode.INVALID_INPUT
    assert told.kind == "ack"
    (shown,) = [e for e in events if e.type == "spend_alert"]
    assert shown.data["tenant"] == "default"
    assert shown.data["limit"] == "daily"


def test_a_dispatch_a_second_agent_of_the_role_gets_again_is_run_by_the_first():
    """A router that dies with a dispatch in flight sends it again, to the role: the shard
    names the agent that took it first, unless the dispatcher sent a later attempt, or
    sent it by name (its own choice)."""
    agents = tuple(AgentSpec(name=n, role="w") for n in ("solo", "bob", "carl"))
    trio = TeamSpec(name="j3", agents=agents, max_parallel=1)

    async def life():
        pool, orchestrator, job_id = await held_at_the_gate(trio)
        await pool.held.wait()  # s2 taken, its model call held at the gate
        taker = orchestrator._held.job(job_id).taken["s2"]
        one, two = sorted({agent_name(n) for n in ("solo", "bob", "carl")} - {taker})

        async def say(agent, attempt, *, by_role):
            word = SubtaskTaken(task_id="s2", agent=agent, by_role=by_role)
            message = AgentMessage(sender=agent, recipient=orchestrator_address(job_id),
                                   job_id=job_id, attempt=attempt, payload=word)  # fmt: skip
            return decode(await orchestrator.receive(encode(message))).payload.agent

        answers = [await say(one, 1, by_role=True), await say(two, 2, by_role=True),
                   await say(one, 2, by_role=True), await say(one, 2, by_role=False)]  # fmt: skip
        for task in list(orchestrator._tasks):
            task.cancel()
        return taker, one, two, answers

    taker, one, two, answers = run(life())
    # the first dispatch again, to the role: its taker has it; a later attempt: the one it
    # reached; that one again, to the role: that agent has it; sent by name: its agent's
    assert answers == [taker, two, two, one]


class _LosingFirstAnswer(LocalRouterClient):
    """The shard's router client: the router dies holding the first subtask's answer."""

    def __init__(self, router):
        super().__init__(router)
        self.dispatched = []

    async def request(self, message, /):
        reply = await super().request(message)
        if isinstance(message.payload, TaskRequest):
            self.dispatched.append(message.recipient)
            if len(self.dispatched) == 1:
                raise RecipientUnavailable("router is unavailable: the actor was restarted")
        return reply


def test_a_subtask_whose_answer_the_router_lost_goes_back_to_the_agent_that_took_it():
    """The agent ran it and said so (``SubtaskTaken``); the router died with its answer. Sent
    again to that agent, the run's model calls are answered from the pool's record; sent to
    the role, another agent would start it over and pay for every call again."""
    duo = TeamSpec(name="j4", agents=tuple(AgentSpec(name=n, role="w") for n in ("ann", "bob")))

    async def life():
        pool = LLMAdapterPool()
        router = MessageRouter()
        await router.register("llm-0", pool, ["llm"])
        losing = _LosingFirstAnswer(router)
        provisioner = InProcessProvisioner(router, pool, LocalRouterClient(router))
        desk, (orchestrator,) = await control_plane(losing, provisioner)
        await router.register("orchestrator", orchestrator)  # as under Ray: agents reach it
        job_id = await desk.submit(*order("Tasks:\n- first thing.", duo))
        result = await orchestrator.wait(job_id, 10)
        taker = orchestrator._held.job(job_id).taken["s1"]
        return result, losing.dispatched, taker, await pool.usage(job_id)

    result, dispatched, taker, usage = run(life())
    assert result.status == "succeeded"
    assert dispatched == [f"role:{agent_name('j4')}.w", taker]  # the role, then its taker
    (sub,) = result.subtasks
    assert (sub.attempt, agent_name(sub.agent)) == (2, taker)  # the second, to its taker
    team = {agent_name(n) for n in ("ann", "bob")}
    billed = sum(row.calls for row in usage if row.agent in team)
    assert billed == sub.usage.calls  # each model call of the subtask made and billed once
