"""The journal and resuming: a new orchestrator picks up where a dead one stopped."""

import pytest
from wiring import GatedPool, gated_system, order, run

from raytroupe.actors import LLMAdapterPool
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import AgentSpec, Attachment, InvalidInput, TeamSpec

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
    assert Journal(path).load(job_id)[2] == result


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
