"""Knowledge bases over a real Chroma on a temporary path, with the offline MiniLM."""

import asyncio

import chromadb
import pytest
from chromadb.api.client import SharedSystemClient
from wiring import run, started_now

from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.knowledge import (
    KnowledgeBases,
    collection_name,
    is_knowledge_collection,
)
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.protocols import (
    AgentMessage,
    Forbidden,
    InvalidInput,
    KnowledgeDocument,
    KnowledgeNotFound,
    KnowledgeQuery,
    MemoryQuery,
    MemoryWrite,
    Passages,
    QuotaExceeded,
    decode,
    encode,
)

LEAVE = """# Leave policy

## Annual leave

Every employee gets twenty-five days of paid annual leave, plus public holidays.
Unused days may be carried over into the first quarter of the next year.

## Sick leave

Tell your manager before ten in the morning on the first day you are ill.
"""
TRAVEL = """# Travel policy

Book train travel for trips under four hours; flights need a director's approval.
Hotels are reimbursed up to one hundred and forty pounds a night in London.
"""


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def md(source, text, **metadata):
    return KnowledgeDocument(
        source=source, media_type="text/markdown", content=text, metadata=metadata
    )


def client_at(path):
    settings = chromadb.config.Settings(anonymized_telemetry=False)
    return chromadb.PersistentClient(path=str(path), settings=settings)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def bases(tmp_path, clock):
    return KnowledgeBases(client_at(tmp_path), embedding="minilm", clock=clock)


def search(bases, query, tenant="acme", kb="policies", k=5):
    return run(bases.search(tenant, kb, query, k)).passages


def test_ingest_then_search_cites_source_position_and_section(bases):
    documents = [md("hr/leave.md", LEAVE, team="hr"), md("travel.md", TRAVEL)]
    report = run(bases.ingest("acme", "policies", documents))
    assert [(d.source, d.replaced, d.unchanged) for d in report.documents] == [
        ("hr/leave.md", False, False),
        ("travel.md", False, False),
    ]
    assert report.chunks == 3
    best, *rest = search(bases, "how many vacation days do staff get?")
    assert best.source == "hr/leave.md"
    assert best.section == "Leave policy > Annual leave"
    assert best.position == 0
    assert "twenty-five days" in best.text
    assert best.metadata == {"team": "hr"}
    assert 0.0 < best.score <= 1.0
    assert all(best.score >= p.score for p in rest)
    assert best.citation() == "hr/leave.md#0 (Leave policy > Annual leave)"
    assert search(bases, "which hotels can I claim", k=1)[0].source == "travel.md"


def test_reingesting_an_unchanged_document_writes_nothing(bases, clock):
    run(bases.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    first = run(bases.documents("acme", "policies"))
    clock.now += 60
    report = run(bases.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    assert [(d.unchanged, d.replaced, d.chunks) for d in report.documents] == [(True, False, 1)]
    assert run(bases.documents("acme", "policies")) == first  # same hash, same time


def test_a_changed_document_replaces_its_passages(bases, clock):
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE), md("travel.md", TRAVEL)]))
    before = {d.source: d for d in run(bases.documents("acme", "policies"))}
    clock.now += 60
    changed = LEAVE.replace("twenty-five days", "thirty days")
    report = run(bases.ingest("acme", "policies", [md("hr/leave.md", changed)]))
    assert [(d.replaced, d.unchanged) for d in report.documents] == [(True, False)]
    texts = [p.text for p in search(bases, "vacation days per year", k=10)]
    assert any("thirty days" in t for t in texts)
    assert not any("twenty-five" in t for t in texts)
    after = {d.source: d for d in run(bases.documents("acme", "policies"))}
    assert after["hr/leave.md"].hash != before["hr/leave.md"].hash
    assert after["hr/leave.md"].ingested_at == clock.now
    assert after["travel.md"] == before["travel.md"]
    assert len(search(bases, "policy", k=50)) == 3


def test_a_replacement_that_fails_leaves_the_old_version_searchable(bases, monkeypatch):
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE)]))
    collection_type = type(run(bases._existing("acme", "policies")))

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    changed = LEAVE.replace("twenty-five days", "thirty days")
    with monkeypatch.context() as patch:
        patch.setattr(collection_type, "upsert", broken)
        with pytest.raises(RuntimeError, match="disk full"):
            run(bases.ingest("acme", "policies", [md("hr/leave.md", changed)]))
    texts = [p.text for p in search(bases, "vacation days", k=10)]
    assert any("twenty-five days" in t for t in texts)
    assert not any("thirty days" in t for t in texts)

    with monkeypatch.context() as patch:  # new passages written, old ones not yet deleted
        patch.setattr(collection_type, "delete", broken)
        with pytest.raises(RuntimeError, match="disk full"):
            run(bases.ingest("acme", "policies", [md("hr/leave.md", changed)]))
    texts = [p.text for p in search(bases, "vacation days", k=10)]
    assert any("twenty-five days" in t for t in texts)  # still there, beside the new

    report = run(bases.ingest("acme", "policies", [md("hr/leave.md", changed)]))
    assert [(d.replaced, d.unchanged) for d in report.documents] == [(True, False)]
    texts = [p.text for p in search(bases, "vacation days", k=10)]
    assert any("thirty days" in t for t in texts)
    assert not any("twenty-five days" in t for t in texts)


def test_a_bad_document_fails_the_whole_ingestion_and_writes_nothing(bases):
    bad = KnowledgeDocument(source="bad.json", media_type="application/json", content="{oops")
    with pytest.raises(InvalidInput, match=r"bad\.json") as caught:
        run(bases.ingest("acme", "policies", [md("travel.md", TRAVEL), bad]))
    assert caught.value.detail["source"] == "bad.json"
    assert run(bases.bases("acme")) == []
    with pytest.raises(InvalidInput, match="more than once"):
        run(bases.ingest("acme", "policies", [md("a.md", TRAVEL), md("a.md", LEAVE)]))
    with pytest.raises(InvalidInput, match="not a knowledge base name"):
        run(bases.ingest("acme", "Bad Name", [md("a.md", TRAVEL)]))


def test_deleting_a_document_removes_its_passages(bases):
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE), md("travel.md", TRAVEL)]))
    assert run(bases.delete_document("acme", "policies", "hr/leave.md")) == 2
    assert run(bases.delete_document("acme", "policies", "hr/leave.md")) == 0
    assert {p.source for p in search(bases, "annual leave days", k=10)} == {"travel.md"}
    assert [d.source for d in run(bases.documents("acme", "policies"))] == ["travel.md"]


def test_dropping_a_base_deletes_it(bases):
    run(bases.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    run(bases.ingest("acme", "handbook", [md("hr/leave.md", LEAVE)]))
    assert [b.name for b in run(bases.bases("acme"))] == ["handbook", "policies"]
    assert run(bases.drop("acme", "policies")) is True
    assert run(bases.drop("acme", "policies")) is False
    assert [b.name for b in run(bases.bases("acme"))] == ["handbook"]
    with pytest.raises(KnowledgeNotFound, match="no knowledge base named 'policies'"):
        search(bases, "hotels")
    with pytest.raises(KnowledgeNotFound):
        run(bases.documents("acme", "policies"))
    with pytest.raises(KnowledgeNotFound):
        run(bases.delete_document("acme", "policies", "travel.md"))


def test_tenants_never_see_each_others_bases(bases):
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE)]))
    with pytest.raises(KnowledgeNotFound):
        search(bases, "annual leave", tenant="globex")
    run(bases.ingest("globex", "policies", [md("travel.md", TRAVEL)]))
    assert {p.source for p in search(bases, "annual leave", tenant="globex", k=10)} == {"travel.md"}
    assert {p.source for p in search(bases, "hotel costs", tenant="acme", k=10)} == {"hr/leave.md"}
    assert [b.chunks for b in run(bases.bases("globex"))] == [1]
    assert run(bases.delete_document("globex", "policies", "hr/leave.md")) == 0
    assert run(bases.drop("globex", "policies")) is True
    assert [b.name for b in run(bases.bases("acme"))] == ["policies"]
    assert collection_name("acme", "policies") != collection_name("globex", "policies")


def test_a_tenant_cannot_hold_more_bases_or_passages_than_its_quota(tmp_path, clock):
    """The worst a tenant's key can do is fill its own quota: Chroma is shared."""
    bases = KnowledgeBases(client_at(tmp_path), embedding="hashing", clock=clock,
                           max_bases=2, max_passages=4)  # fmt: skip
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE)]))  # 2 passages
    run(bases.ingest("acme", "handbook", [md("travel.md", TRAVEL)]))  # 1
    with pytest.raises(QuotaExceeded, match="2 knowledge bases") as caught:
        run(bases.ingest("acme", "third", [md("travel.md", TRAVEL)]))
    assert caught.value.detail == {"quota": "knowledge_bases", "limit": 2}
    assert caught.value.code.value == "quota_exceeded"
    # past the passages: refused whole, nothing of it written
    with pytest.raises(QuotaExceeded, match="6 passages") as caught:
        run(bases.ingest("acme", "policies", [md("a.md", LEAVE), md("b.md", TRAVEL)]))
    assert caught.value.detail["quota"] == "passages"
    assert [d.source for d in run(bases.documents("acme", "policies"))] == ["hr/leave.md"]
    assert [b.name for b in run(bases.bases("acme"))] == ["handbook", "policies"]
    # a replacement counts what it replaces; a full tenant can still re-ingest unchanged
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE), md("b.md", TRAVEL)]))
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE + "\nNew line.")]))
    # a quota lowered below what the tenant holds: what adds no passage still goes through
    lowered = KnowledgeBases(client_at(tmp_path), embedding="hashing", clock=clock,
                             max_bases=2, max_passages=1)  # fmt: skip
    run(lowered.ingest("acme", "policies", [md("b.md", TRAVEL)]))
    with pytest.raises(QuotaExceeded):
        run(lowered.ingest("acme", "policies", [md("c.md", TRAVEL)]))
    # another tenant has its own quota; deleting makes room
    run(bases.ingest("globex", "policies", [md("hr/leave.md", LEAVE), md("t.md", TRAVEL)]))
    assert run(bases.drop("acme", "handbook")) is True
    run(bases.ingest("acme", "third", [md("travel.md", TRAVEL)]))


def test_bases_and_documents_survive_a_new_client_on_the_same_path(tmp_path, clock):
    first = KnowledgeBases(client_at(tmp_path), clock=clock)
    run(first.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    SharedSystemClient.clear_system_cache()  # the next client reads the directory afresh
    again = KnowledgeBases(client_at(tmp_path), clock=clock)
    (info,) = run(again.bases("acme"))
    assert (info.name, info.chunks, info.created_at) == ("policies", 1, clock.now)
    assert [d.source for d in run(again.documents("acme", "policies"))] == ["travel.md"]
    assert search(again, "hotel in London", k=1)[0].source == "travel.md"
    report = run(again.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    assert report.documents[0].unchanged


def test_searches_arriving_together_share_one_chroma_call(bases, monkeypatch):
    run(bases.ingest("acme", "policies", [md("hr/leave.md", LEAVE), md("travel.md", TRAVEL)]))
    collection = run(bases._existing("acme", "policies"))
    calls = []
    real = type(collection).query

    def counted(self, *args, **kwargs):
        calls.append(len(kwargs["query_texts"]))
        return real(self, *args, **kwargs)

    async def together():
        return await asyncio.gather(
            bases.search("acme", "policies", "how many vacation days", 1),
            bases.search("acme", "policies", "hotel costs in London", 1),
            bases.search("acme", "policies", "hotel costs in London", 3),  # another k
        )

    monkeypatch.setattr(type(collection), "query", counted)
    leave, travel, more = run(together())
    assert sorted(calls) == [1, 2]
    assert leave.passages[0].source == "hr/leave.md"
    assert travel.passages[0].source == "travel.md"
    assert len(more.passages) == 3


def test_bad_searches_are_invalid_input(bases):
    run(bases.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    for query, k in (("  ", 5), ("hotels", 0), ("hotels", 51)):
        with pytest.raises(InvalidInput):
            search(bases, query, k=k)
    with pytest.raises(InvalidInput, match="not a knowledge base name"):
        search(bases, "hotels", kb="../etc")


# -- through the memory store -----------------------------------------------------------


@pytest.fixture
def store(tmp_path, clock):
    memory = started_now(MemoryStore(MemoryConfig(path=tmp_path, embedding="hashing"), clock=clock))
    yield memory
    run(memory.close())


def test_the_memory_store_answers_knowledge_queries_by_envelope(store):
    run(store.ingest("acme", "policies", [md("travel.md", TRAVEL), md("hr/leave.md", LEAVE)]))
    query = KnowledgeQuery(kb="policies", query="hotels reimbursed in London", k=2)
    message = AgentMessage(sender="agent-1", recipient="memory", tenant="acme", payload=query)
    reply = decode(run(store.receive(encode(message))))
    assert isinstance(reply.payload, Passages)
    assert reply.payload.passages[0].source == "travel.md"
    other = AgentMessage(sender="agent-1", recipient="memory", tenant="globex", payload=query)
    refused = decode(run(store.receive(encode(other))))
    assert refused.payload.kind == "error"
    assert "no knowledge base" in refused.payload.message


def test_forgetting_never_touches_knowledge(store, clock, monkeypatch):
    run(store.ingest("acme", "policies", [md("travel.md", TRAVEL)]))
    run(store.write("acme", MemoryWrite(text="a passing remark", importance=0.06)))
    clock.now += 365 * 86_400.0
    opened = []
    real = store._collection_by_name

    async def watched(name):
        opened.append(name)
        return await real(name)

    monkeypatch.setattr(store, "_collection_by_name", watched)
    assert run(store.forget()) == 1
    assert opened
    assert not [name for name in opened if is_knowledge_collection(name)]
    assert [b.chunks for b in run(store.knowledge_bases("acme"))] == [1]
    assert [d.source for d in run(store.knowledge_documents("acme", "policies"))] == ["travel.md"]
    assert run(store.knowledge_search("acme", "policies", "hotels")).passages
    assert run(store.knowledge_delete("acme", "policies", "travel.md")) == 1
    assert run(store.knowledge_drop("acme", "policies")) is True


def test_an_end_users_base_is_searched_by_that_users_jobs_only(store):
    run(store.ingest("acme", "ana-notes", [md("locker.md", "Ana's locker code is 4471.")], "ana"))
    run(store.ingest("acme", "policies", [md("travel.md", TRAVEL)]))  # the tenant's own

    def ask(kb, user):
        query = KnowledgeQuery(kb=kb, query="locker code", k=1)
        message = AgentMessage(sender="agent-1", recipient="memory", tenant="acme", user=user,
                               job_id="job-1", payload=query)  # fmt: skip
        return decode(run(store.receive(encode(message)))).payload

    assert ask("ana-notes", "ana").passages[0].source == "locker.md"
    for someone in ("bo", None):  # another user's job, a job of no user: no such base
        refused = ask("ana-notes", someone)
        assert (refused.kind, refused.code) == ("error", "knowledge_not_found")
    assert ask("policies", "bo").passages[0].source == "travel.md"  # the tenant's: everyone's
    # the tenant itself reaches it; bo cannot add to it, nor ana to the tenant's own
    assert run(store.knowledge_search("acme", "ana-notes", "locker")).passages
    with pytest.raises(Forbidden):
        run(store.ingest("acme", "ana-notes", [md("bo.md", "Bo was here.")], "bo"))
    with pytest.raises(Forbidden):
        run(store.ingest("acme", "policies", [md("ana.md", "Ana was here.")], "ana"))
    assert [(b.name, b.user) for b in run(store.knowledge_bases("acme"))] == [
        ("ana-notes", "ana"),
        ("policies", None),
    ]
    assert [b.name for b in run(store.knowledge_bases("acme", "ana"))] == ["ana-notes"]
    assert [d.source for d in run(store.knowledge_documents("acme", "ana-notes"))] == ["locker.md"]


def test_a_users_memory_policy_recalls_their_base_and_not_anothers(store):
    run(store.ingest("acme", "ana-notes", [md("locker.md", "Ana's locker code is 4471.")], "ana"))
    query = MemoryQuery(query="locker code", knowledge=("ana-notes",))

    def recalled(user):
        message = AgentMessage(sender="agent-1", recipient="memory", tenant="acme", user=user,
                               job_id="job-1", payload=query)  # fmt: skip
        return [p.source for p in decode(run(store.receive(encode(message)))).payload.passages]

    assert recalled("ana") == ["locker.md"]
    assert recalled("bo") == []
    assert recalled(None) == []
