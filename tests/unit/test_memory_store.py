"""The memory store without Ray: Chroma on a temporary path, the hashing embedding."""

import asyncio

import pytest
from wiring import build_troupe, order, run, started_now

from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.protocols import (
    AgentSpec,
    InvalidInput,
    LLMRequest,
    MemoryPolicy,
    MemoryQuery,
    MemoryWrite,
    TeamSpec,
)
from raytroupe.protocols.memory import EVERY_USER

DAY = 86_400.0


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    memory = started_now(MemoryStore(MemoryConfig(path=tmp_path, embedding="hashing"), clock=clock))
    yield memory
    run(memory.close())


def ask(store, tenant, text, **fields):
    return run(store.query(tenant, MemoryQuery(query=text, **fields))).hits


def test_write_then_recall_best_first(store):
    run(store.write("acme", MemoryWrite(text="The staging database runs on host db-two.")))
    run(store.write("acme", MemoryWrite(text="Lunch is served at noon on Fridays.")))
    hits = ask(store, "acme", "which host runs the staging database")
    assert hits[0].text == "The staging database runs on host db-two."
    assert hits[0].score >= hits[-1].score


def test_first_requests_arriving_together_share_one_client(store):
    """Parallel subtasks' first recalls used to open Chroma twice at once, and one failed."""

    async def together():
        writes = [
            store.write("acme", MemoryWrite(text=f"Fact {i} about the staging host."))
            for i in range(3)
        ]
        queries = [store.query("acme", MemoryQuery(query="staging host")) for _ in range(3)]
        return await asyncio.gather(*writes, *queries)

    answers = run(together())
    assert len(set(answers[:3])) == 3
    assert len(ask(store, "acme", "staging host", k=5)) == 3


def test_queries_arriving_together_are_one_chroma_call_each_with_its_own_answer(store):
    facts = {
        "host": "The staging database runs on host db-two.",
        "lunch": "Lunch is served at noon on Fridays.",
        "deploy": "Deploys happen every Tuesday after review.",
    }
    run(store.write_many("acme", [MemoryWrite(text=t) for t in facts.values()]))
    run(store.write("globex", MemoryWrite(text="Globex ships on Tuesdays.")))
    collection = run(store._collection("acme"))
    calls = []
    real = type(collection).query

    def counted(self, *args, **kwargs):
        calls.append(len(kwargs["query_texts"]))
        return real(self, *args, **kwargs)

    async def together():
        questions = [
            store.query("acme", MemoryQuery(query="which host runs the staging database", k=1)),
            store.query("acme", MemoryQuery(query="when is lunch served", k=1)),
            store.query("acme", MemoryQuery(query="how often do deploys happen", k=1)),
            store.query("acme", MemoryQuery(query="staging", k=1, tags=("x",))),  # its own call
            store.query("globex", MemoryQuery(query="ships", k=1)),  # another collection
        ]
        return await asyncio.gather(*questions)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(collection), "query", counted)
        host, lunch, deploy, tagged, other = run(together())
    assert sorted(calls) == [1, 1, 3]  # three alike in one call; another filter, another tenant
    assert [h.text for h in host.hits] == [facts["host"]]
    assert [h.text for h in lunch.hits] == [facts["lunch"]]
    assert [h.text for h in deploy.hits] == [facts["deploy"]]
    assert tagged.hits == ()
    assert [h.text for h in other.hits] == ["Globex ships on Tuesdays."]


def test_tenants_never_see_each_other(store):
    run(store.write("acme", MemoryWrite(text="Acme's secret recipe uses cardamom.")))
    run(store.write("globex", MemoryWrite(text="Globex ships on Tuesdays.")))
    assert [h.text for h in ask(store, "globex", "secret recipe cardamom")] == [
        "Globex ships on Tuesdays."
    ]
    assert run(store.count("acme")) == 1
    with pytest.raises(InvalidInput):
        run(store.delete("globex"))  # deleting everything must be explicit
    assert run(store.delete("globex", agent="")) == 1
    assert run(store.count("acme")) == 1


def test_filters_by_agent_and_tags(store):
    run(store.write("t", MemoryWrite(text="ada notes the deadline is friday", agent="ada",
                                     tags=("deadline",))))  # fmt: skip
    run(store.write("t", MemoryWrite(text="grace notes the deadline is monday", agent="grace",
                                     tags=("deadline", "draft"))))  # fmt: skip
    assert [h.agent for h in ask(store, "t", "deadline", agent="ada")] == ["ada"]
    assert [h.agent for h in ask(store, "t", "deadline", tags=("draft",))] == ["grace"]
    assert run(store.delete("t", tags=("draft",))) == 1
    assert [h.agent for h in ask(store, "t", "deadline")] == ["ada"]


def test_recency_and_importance_break_ties(store, clock):
    old = MemoryWrite(text="the build server password rotates monthly", importance=0.2)
    run(store.write("t", old))
    clock.now += 30 * DAY
    run(store.write("t", MemoryWrite(text="the build server password rotates monthly",
                                     importance=0.9)))  # fmt: skip
    first, second = ask(store, "t", "build server password")
    assert first.similarity == pytest.approx(second.similarity)
    assert (first.importance, second.importance) == (0.9, 0.2)
    assert first.created_at > second.created_at


def test_forgetting_by_ttl_and_by_decayed_importance(store, clock):
    run(store.write("t", MemoryWrite(text="a temporary access code 4411", ttl_s=3600)))
    run(store.write("t", MemoryWrite(text="trivia about the office plant", importance=0.06)))
    run(store.write("t", MemoryWrite(text="the company was founded in 1999", importance=1.0)))
    assert run(store.forget()) == 0
    clock.now += 2 * 3600
    # expired memories are never returned, even before forgetting runs
    assert "a temporary access code 4411" not in [h.text for h in ask(store, "t", "access code")]
    assert run(store.forget()) == 1
    clock.now += 31 * DAY  # 0.06 halves below the 0.05 floor; 1.0 is still 0.5
    assert run(store.forget()) == 1
    assert [h.text for h in ask(store, "t", "founded")] == ["the company was founded in 1999"]


def test_agents_write_results_and_recall_them_later():
    async def main():
        troupe = await build_troupe()
        memory = await troupe.router.registry()
        assert "memory" in memory
        writer = AgentSpec(name="scribe", role="w", memory=MemoryPolicy(write_results=True))
        team = TeamSpec(name="one", agents=(writer,))
        task = "The offsite is in Lisbon this year.\n- Where is the offsite?\n- Who organises it?"
        first = await troupe.run(task, team)
        reader = AgentSpec(name="reader", role="r", memory=MemoryPolicy(min_score=0.1))
        await troupe.run("Where is the offsite?", TeamSpec(name="two", agents=(reader,)))
        return first, troupe

    first, troupe = run(main())
    assert first.status == "succeeded"
    asked = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    recalled = [
        m.text for r in asked[-1:] for m in r.messages if m.text.startswith("Relevant memories")
    ]
    assert recalled
    assert "Lisbon" in recalled[0]


# -- end users: what a user's job writes is that user's --------------------------------------


def test_a_users_memories_are_found_by_that_users_jobs_and_the_tenant_only(store):
    run(store.write("acme", MemoryWrite(text="The office wifi password rotates monthly.")))
    run(store.write("acme", MemoryWrite(text="Ana's wifi password is ana-secret-wifi."), "ana"))
    run(store.write("acme", MemoryWrite(text="Bo's wifi password is bo-secret-wifi."), "bo"))

    def seen(viewer, **fields):
        hits = run(store.query("acme", MemoryQuery(query="wifi password", **fields), viewer)).hits
        return sorted((h.user or "", h.text.split()[0]) for h in hits)

    assert seen("ana") == [("", "The"), ("ana", "Ana's")]
    assert seen("bo") == [("", "The"), ("bo", "Bo's")]
    assert seen(None) == [("", "The")]  # a job of no end user: the tenant's only
    assert len(seen(EVERY_USER)) == 3  # the tenant itself (the driver's recall)
    assert seen("carol") == [("", "The")]
    assert seen("ana", agent="") == [("", "The"), ("ana", "Ana's")]  # with other filters
    assert seen("ana", tags=("none",)) == []


def test_a_users_job_writes_and_recalls_that_users_memories_never_anothers():
    async def main():
        troupe = await build_troupe()
        writer = AgentSpec(name="scribe", role="w", memory=MemoryPolicy(write_results=True))
        reader = AgentSpec(name="reader", role="r", memory=MemoryPolicy(min_score=0.1))
        task = "My locker code is 4471.\n- What is the locker code?\n- Repeat it."
        first = await troupe.desk.submit(*order(task, TeamSpec(name="w", agents=(writer,)),
                                                tenant="acme", user="ana"))  # fmt: skip
        assert (await troupe.orchestrator.wait(first, 30)).status == "succeeded"
        recalls = {}
        for user in ("bo", None, "ana"):
            before = len(troupe.llm.payloads(LLMRequest))
            job = await troupe.desk.submit(*order("What is my locker code?",
                                                  TeamSpec(name="r", agents=(reader,)),
                                                  tenant="acme", user=user))  # fmt: skip
            await troupe.orchestrator.wait(job, 30)
            asked = [r for r in troupe.llm.payloads(LLMRequest)[before:] if r.purpose == "work"]
            recalls[user] = " ".join(m.text for r in asked for m in r.messages)
        return recalls

    recalls = run(main(), 60)
    assert "4471" in recalls["ana"]
    assert "4471" not in recalls["bo"]
    assert "4471" not in recalls[None]
