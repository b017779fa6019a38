"""The knowledge-base operations, declared once: the same on the HTTP API, its client and the
driver; always the caller's tenant's; bad names and oversized requests refused before the
memory store hears of them. Against a real Ray, Serve and Chroma: test_knowledge_ray.py."""

from __future__ import annotations

import warnings

import pytest
from surfaces import ADMIN, USER, Driver, over_http
from wiring import run

from raytroupe.protocols import InvalidInput, KnowledgeNotFound
from raytroupe.protocols.http import MAX_DOCUMENTS
from raytroupe.protocols.knowledge import (
    IngestedDocument,
    IngestReport,
    KnowledgeBaseInfo,
    KnowledgeDocument,
    Passages,
)
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.tenant import TenantView


def _doc(source: str) -> KnowledgeDocument:
    return KnowledgeDocument(source=source, media_type="text/plain", content=f"text of {source}")


class Shelf:
    """The memory store's knowledge calls, recorded, over one in-memory set of bases."""

    @property
    def memory(self):  # the memory store's calls: recorded by the same object
        return self

    def __init__(self):
        self.calls = []
        self.bases: dict[tuple[str, str], list[str]] = {}

    async def ingest(self, tenant, kb, documents, user=None):
        self.calls.append(("ingest", tenant, kb, len(documents)) + ((user,) if user else ()))
        self.bases.setdefault((tenant, kb), []).extend(d.source for d in documents)
        done = tuple(
            IngestedDocument(source=d.source, chunks=1, replaced=False, unchanged=False)
            for d in documents
        )
        return IngestReport(kb=kb, documents=done)

    async def knowledge_bases(self, tenant, user=None):
        self.calls.append(("knowledge_bases", tenant) + ((user,) if user else ()))
        return [
            KnowledgeBaseInfo(name=kb, chunks=len(docs), created_at=1.0)
            for (t, kb), docs in self.bases.items()
            if t == tenant
        ]

    async def knowledge_delete(self, tenant, kb, source):
        self.calls.append(("knowledge_delete", tenant, kb, source))
        docs = self.bases.get((tenant, kb), [])
        if source not in docs:
            return 0
        docs.remove(source)
        return 3

    async def knowledge_drop(self, tenant, kb):
        self.calls.append(("knowledge_drop", tenant, kb))
        return self.bases.pop((tenant, kb), None) is not None

    async def knowledge_search(self, tenant, kb, query, k):
        self.calls.append(("knowledge_search", tenant, kb, query, k))
        return Passages(kb=kb, passages=())


def test_http_and_the_driver_do_the_same_for_the_callers_tenant():
    async def session(client):
        made = await client.ingest("notes", [_doc("a.txt"), _doc("b.txt")])
        found = await client.search("notes", "lamp", k=2)
        bases = await client.knowledge_bases()
        removed = await client.delete_document("notes", "a.txt")
        dropped = await client.drop_knowledge_base("notes")
        return made, found, bases, removed, dropped

    remote = Shelf()
    made, found, bases, removed, dropped = over_http(remote, ADMIN, session)
    local = Shelf()
    driver = Driver(local, admin=True)
    assert driver.ingest("notes", [_doc("a.txt"), _doc("b.txt")]) == made
    assert driver.search("notes", "lamp", k=2) == found
    assert driver.knowledge_bases() == bases
    assert driver.delete_document("notes", "a.txt") == removed == 3
    assert driver.drop_knowledge_base("notes") == dropped
    assert dropped.name == "notes"
    assert remote.calls == local.calls
    assert {call[1] for call in remote.calls} == {"acme"}  # an admin key's own tenant too


def test_an_end_users_base_is_made_and_listed_alike_over_http_and_by_the_driver():
    async def session(client):
        made = await client.ingest("ana-notes", [_doc("a.txt")], user="ana")
        listed = await client.knowledge_bases(user="ana")
        return made, listed

    remote = Shelf()
    made, listed = over_http(remote, USER, session)
    local = Shelf()
    driver = Driver(local, admin=False)
    assert driver.ingest("ana-notes", [_doc("a.txt")], user="ana") == made
    assert driver.knowledge_bases(user="ana") == listed
    assert remote.calls == local.calls
    assert remote.calls[0][-1] == remote.calls[1][-1] == "ana"  # the user reached the store
    with pytest.raises(InvalidInput):  # an end user id is checked at the door
        driver.ingest("notes", [_doc("a.txt")], user="not a user")


def test_what_is_not_there_is_knowledge_not_found_on_every_surface():
    async def missing(client):
        raised = []
        for call in (client.delete_document("notes", "x.txt"), client.drop_knowledge_base("x")):
            with pytest.raises(KnowledgeNotFound):
                await call
            raised.append(True)
        return raised

    assert over_http(Shelf(), USER, missing) == [True, True]
    driver = Driver(Shelf(), admin=False)
    with pytest.raises(KnowledgeNotFound, match=r"has no document 'x\.txt'"):
        driver.delete_document("notes", "x.txt")
    with pytest.raises(KnowledgeNotFound, match=r"no knowledge base 'x'"):
        driver.drop_knowledge_base("x")


def test_bad_names_and_oversized_requests_never_reach_the_store():
    shelf = Shelf()

    async def bad(client):
        http = client._http
        return [
            (await http.post("/v1/knowledge/Bad%20Name/search", json={"query": "x"})).status_code,
            (await http.post("/v1/knowledge/kb/search", json={"query": ""})).status_code,
            (await http.post("/v1/knowledge/kb/search", json={"query": "x", "k": 51})).status_code,
            (await http.post("/v1/knowledge/kb/documents", json={"documents": []})).status_code,
            (
                await http.post(
                    "/v1/knowledge/kb/documents",
                    json={"documents": [_doc(f"{n}.txt").model_dump() for n in range(65)]},
                )
            ).status_code,
            (await http.delete("/v1/knowledge/kb/documents", params={"source": ""})).status_code,
            (
                await http.post("/v1/knowledge/kb/search", json={"query": "x", "kb": "other"})
            ).status_code,
        ]

    assert over_http(shelf, USER, bad) == [422] * 7
    driver = Driver(shelf, admin=True)
    for call in (
        lambda: driver.search("../other", "x"),
        lambda: driver.ingest("kb", [_doc(f"{n}.txt") for n in range(MAX_DOCUMENTS + 1)]),
        lambda: driver.documents("UPPER"),
    ):
        with pytest.raises(InvalidInput):
            call()
    assert shelf.calls == []


class _Connected(Runtime):
    """A Runtime's knowledge surface without Ray: its control plane is a Shelf."""

    def __init__(self, shelf):  # no Ray, no portal: the declared operations need only these
        self.client = shelf

    def _run(self, coroutine):
        return run(coroutine)


def test_the_driver_ingests_any_number_of_documents_a_request_at_a_time(tmp_path):
    shelf = Shelf()
    rt = _Connected(shelf)
    (tmp_path / "one.md").write_text("# One\n\ntext")
    documents = [_doc(f"{n}.txt") for n in range(2 * MAX_DOCUMENTS + 1)]
    report = rt.ingest("many", [*documents, tmp_path / "one.md"], base=tmp_path)
    assert [c[3] for c in shelf.calls] == [MAX_DOCUMENTS, MAX_DOCUMENTS, 2]
    assert [d.source for d in report.documents] == [d.source for d in documents] + ["one.md"]
    with pytest.raises(InvalidInput):
        rt.ingest("many", [])  # nothing to ingest is refused as a request of none is


def test_the_tenant_keyword_still_works_warns_and_a_tenant_view_is_its_tenants():
    shelf = Shelf()
    rt = _Connected(shelf)
    with pytest.warns(DeprecationWarning, match=r"as_tenant\(tenant\)\.search"):
        rt.search("kb", "x", tenant="globex")
    with pytest.warns(DeprecationWarning, match=r"as_tenant\(tenant\)\.ingest"):
        rt.ingest("kb", [_doc("a.txt")], tenant="globex")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        view = TenantView("initech", shelf, portal=None)
        view._run = rt._run
        view.ingest("kb", [_doc("b.txt")])
        assert [b.name for b in view.knowledge_bases()] == ["kb"]
        rt.knowledge_bases()  # the driver's own tenant: default
    assert [c[1] for c in shelf.calls] == ["globex", "globex", "initech", "initech", "default"]
    assert not hasattr(TenantView, "tenant_keyword")
    with pytest.raises(InvalidInput):
        view.search("kb", "x", tenant="globex")  # a tenant's view cannot name another


def test_the_driver_still_answers_false_for_a_missing_base_and_warns_that_it_will_raise():
    rt = _Connected(Shelf())
    with pytest.warns(DeprecationWarning, match="will raise KnowledgeNotFound"):
        assert rt.drop_knowledge_base("never") is False
    with pytest.warns(DeprecationWarning, match="will raise KnowledgeNotFound"):
        assert rt.delete_document("never", "x.txt") == 0
    rt.ingest("kept", [_doc("a.txt")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rt.delete_document("kept", "a.txt") == 3
        assert rt.drop_knowledge_base("kept").name == "kept"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidInput):  # only what is not there answers the old way
            rt.drop_knowledge_base("Not A Name")
