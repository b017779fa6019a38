"""A job's scratchpad (working memory) in one process: the memory store keeps notes per
tenant and job in Chroma (so a restarted store still has them), the ``note`` and
``read_notes`` tools reach only the calling job's notes, every agent of the job sees them
in its prompt, and they go with the job unless its team keeps them."""

import asyncio
from pathlib import Path

import pytest
from wiring import build_troupe, order, run, started

from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    ErrorPayload,
    InvalidInput,
    LLMRequest,
    Notes,
    NotesQuery,
    NoteWrite,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
    decode,
    encode,
)
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.memory import MAX_NOTES

FINDING = "The vault's code word is HERON."


def _store(path: Path) -> MemoryStore:
    return MemoryStore(MemoryConfig(path=path, embedding="hashing"))


def test_notes_are_per_tenant_and_job_and_outlive_the_store(tmp_path):
    async def main():
        store = await started(_store(tmp_path))
        await store.note("acme", "job-1", "first", agent="ada")
        await store.note("acme", "job-1", "second", agent="bob")
        await store.note("acme", "job-2", "other job")
        await store.note("globex", "job-1", "other tenant")
        await store.close()
        again = await started(_store(tmp_path))  # a restarted memory actor
        return (
            await again.notes("acme", "job-1"),
            await again.notes("globex", "job-1"),
            await again.notes("acme", "job-3"),
        )

    mine, theirs, none = run(main())
    assert [(n.text, n.agent) for n in mine] == [("first", "ada"), ("second", "bob")]
    assert [n.text for n in theirs] == ["other tenant"]
    assert none == []


def test_the_scratchpad_is_bounded(tmp_path):
    async def main():
        store = await started(_store(tmp_path))
        for i in range(MAX_NOTES):
            await store.note("acme", "job", f"note {i}")
        with pytest.raises(InvalidInput, match="full"):
            await store.note("acme", "job", "one too many")
        return await store.notes("acme", "job")

    assert len(run(main(), 120)) == MAX_NOTES


def test_notes_go_with_the_job_or_become_memories(tmp_path):
    async def main():
        store = await started(_store(tmp_path))
        await store.note("acme", "dropped", "forget me")
        await store.note("acme", "kept", FINDING, agent="ada")
        dropped = await store.end_job("acme", "dropped")
        kept = await store.end_job("acme", "kept", keep=True)
        remembered = await store.listed("acme", tags=("note",))
        return dropped, kept, remembered, await store.notes("acme", "kept")

    dropped, kept, remembered, left = run(main())
    assert (dropped, kept, left) == (1, 1, [])
    assert [(m.text, m.agent, m.metadata["job_id"]) for m in remembered] == [
        (FINDING, "ada", "kept")
    ]


def test_a_job_known_to_have_no_notes_costs_no_chroma_read(tmp_path):
    """Every model call shows the job's notes; most jobs write none."""

    async def main():
        store = await started(_store(tmp_path))
        pads = store._scratchpads
        opened = []
        collection = pads._collection

        async def counting(name):
            opened.append(name)
            return await collection(name)

        pads._collection = counting
        first = await store.notes("acme", "job")  # unknown: read from Chroma
        read_once = len(opened)
        again = [await store.notes("acme", "job") for _ in range(5)]  # known: none
        after_known = len(opened)
        await store.note("acme", "job", FINDING)
        seen = await store.notes("acme", "job")
        # a read overtaken by a write does not record a stale count
        reading = asyncio.gather(store.notes("acme", "racing"), store.note("acme", "racing", "x"))
        await reading
        raced = await store.notes("acme", "racing")
        ended = await store.end_job("acme", "job")
        gone = await store.notes("acme", "job")
        await store.close()
        restarted = await started(_store(tmp_path))  # knows no counts: asks Chroma
        return (
            first,
            read_once,
            again,
            after_known,
            seen,
            raced,
            ended,
            gone,
            (await restarted.notes("acme", "racing")),
        )

    first, read_once, again, after_known, seen, raced, ended, gone, kept = run(main())
    assert (first, again, read_once, after_known) == ([], [[]] * 5, 1, 1)
    assert [n.text for n in seen] == [FINDING]
    assert [n.text for n in raced] == ["x"] == [n.text for n in kept]
    assert (ended, gone) == (1, [])


def test_an_envelope_reaches_only_its_own_jobs_notes(tmp_path):
    async def main():
        store = await started(_store(tmp_path))
        await store.note("acme", "job-a", FINDING)

        async def ask(payload, job_id, tenant="acme"):
            message = AgentMessage(sender="x", recipient="memory", tenant=tenant,
                                   job_id=job_id, payload=payload)  # fmt: skip
            return decode(await store.receive(encode(message))).payload

        return (
            await ask(NotesQuery(), "job-b"),
            await ask(NotesQuery(), "job-a", tenant="globex"),
            await ask(NoteWrite(text="x"), None),
            await ask(NotesQuery(), "job-a"),
        )

    other_job, other_tenant, no_job, own = run(main())
    assert other_job == Notes()
    assert other_tenant == Notes()
    assert isinstance(no_job, ErrorPayload)
    assert "names no job" in no_job.message
    assert [n.text for n in own.notes] == [FINDING]


def _call(tool, arguments, call_id):
    return ScriptedTurn(tool_calls=(ToolCall(call_id=call_id, tool=tool, arguments=arguments),))


def _team(*, keep_notes: bool = False) -> TeamSpec:
    graph = {
        "start": "find",
        "nodes": [
            {"id": "find", "role": "finder", "instructions": "Find the code word: {task}"},
            {"id": "use", "role": "user", "instructions": "Use the code word."},
        ],
        "edges": [{"source": "find", "target": "use"}],
    }
    models = {
        "finder": ScriptedModel(turns=(
            _call("note", {"text": FINDING}, "c1"),
            ScriptedTurn(text="Noted it."),
        )),
        "user": ScriptedModel(turns=(
            _call("read_notes", {}, "c2"),
            ScriptedTurn(text="The code word is HERON."),
        )),
    }  # fmt: skip
    return TeamSpec(
        name="vault",
        planner_model="finder",
        models=models,
        agents=(
            AgentSpec(name="vault-finder", role="finder", model="finder", tools=("note",)),
            AgentSpec(name="vault-user", role="user", model="user", tools=("read_notes",)),
        ),
        graph=GraphSpec.model_validate(graph),
        keep_notes=keep_notes,
    )


def _work(troupe, job_id, model):
    return [
        m.payload
        for m in troupe.llm.seen
        if m.job_id == job_id and isinstance(m.payload, LLMRequest) and m.payload.model == model
    ]


async def _dropped(store, tenant, job_id):
    for _ in range(200):  # the end of the job reaches the memory actor in the background
        if not await store.notes(tenant, job_id):
            return True
        await asyncio.sleep(0.01)
    return False


def test_a_note_written_by_one_agent_is_seen_and_read_by_the_next():
    async def main():
        troupe = await build_troupe()
        job_id = await troupe.desk.submit(*order("the vault", _team(), tenant="acme"))
        result = await troupe.orchestrator.wait(job_id, 30)
        return troupe, result, await _dropped(troupe.memory, "acme", job_id)

    troupe, result, dropped = run(main(), 60)
    assert result.status == "succeeded", result.error
    assert result.answer == "The code word is HERON."
    asked = _work(troupe, result.job_id, "user")
    shown = [m.text for m in asked[0].messages if m.role == "system"]
    assert any("scratchpad" in text and FINDING in text for text in shown)
    read = [r.messages[-1].text for r in asked[1:] if r.messages[-1].role == "tool"]
    assert read
    assert FINDING in str(read[0])
    assert dropped, "the job's notes went with it"


def test_a_team_that_keeps_notes_finds_them_among_its_memories():
    async def main():
        troupe = await build_troupe()
        job_id = await troupe.desk.submit(*order("the vault", _team(keep_notes=True),
                                                  tenant="acme"))  # fmt: skip
        await troupe.orchestrator.wait(job_id, 30)
        await _dropped(troupe.memory, "acme", job_id)
        for _ in range(200):
            kept = await troupe.memory.listed("acme", tags=("note",))
            if kept:
                return job_id, kept
            await asyncio.sleep(0.01)
        return job_id, []

    job_id, kept = run(main(), 60)
    assert [(m.text, m.metadata["job_id"]) for m in kept] == [(FINDING, job_id)]
