"""Knowledge bases on a real Ray, Serve and Chroma (MiniLM): ingestion over HTTP, the
driver and the CLI; a changed document replacing its passages; deletion; the tenant's
scoping over HTTP; agents shown passages and citing them, and the ``knowledge_search``
tool reaching only its own tenant's knowledge."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from raytroupe.runtime.knowledge import media_type_of
from tests.support.http_api import OTHER_KEY, USER_KEY
from tests.support.wire_server import Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "knowledge"
TROUPE = Path(sys.executable).parent / "troupe"
KEEPER = "lighthouse_history.txt"


def _troupe(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, joining this session's Ray by its address."""
    address = ray.get_runtime_context().gcs_address
    return subprocess.run(
        [str(TROUPE), *args, "--address", address],
        capture_output=True, text=True, timeout=180, check=False, cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": address, "COLUMNS": "200"},
    )  # fmt: skip


def _doc(name: str) -> dict[str, object]:
    path = DATA / name
    kind = media_type_of(path)
    if kind == "application/pdf":
        return {"source": name, "media_type": kind,
                "data_b64": base64.b64encode(path.read_bytes()).decode()}  # fmt: skip
    return {"source": name, "media_type": kind, "content": path.read_text()}


def test_http_ingest_search_replace_and_delete_belong_to_the_keys_tenant(api):
    names = ["lighthouse_history.txt", "beekeeping_course.pdf", "observatory.json"]
    with api.client(USER_KEY) as user, api.client(OTHER_KEY) as other:
        made = user.post("/v1/knowledge/ray-kb/documents",
                         json={"documents": [_doc(n) for n in names]})  # fmt: skip
        assert made.status_code == 200, made.text
        report = made.json()
        assert [d["source"] for d in report["documents"]] == names
        assert all(d["chunks"] > 0 and not d["unchanged"] for d in report["documents"])
        again = user.post("/v1/knowledge/ray-kb/documents", json={"documents": [_doc(names[0])]})
        assert again.json()["documents"][0]["unchanged"] is True
        question = {"query": "When was the lighthouse lamp automated?"}
        found = user.post("/v1/knowledge/ray-kb/search", json=question).json()
        top = found["passages"][0]
        assert top["source"] == KEEPER
        assert {"position", "section", "score", "text"} <= set(top)
        # another tenant: no such knowledge base, nothing found, nothing deletable
        assert other.get("/v1/knowledge").json() == []
        assert other.get("/v1/knowledge/ray-kb/documents").status_code == 404
        theirs = other.post("/v1/knowledge/ray-kb/search", json={"query": "lamp"})
        assert theirs.status_code == 404
        gone = other.delete("/v1/knowledge/ray-kb/documents", params={"source": KEEPER})
        assert gone.status_code == 404
        # a changed document replaces its passages
        changed = {
            "source": KEEPER,
            "media_type": "text/plain",
            "content": "The lighthouse was sold to a marmalade company in 1999.",
        }
        replaced = user.post("/v1/knowledge/ray-kb/documents", json={"documents": [changed]})
        assert replaced.json()["documents"][0]["replaced"] is True
        listed = {d["source"]: d["chunks"] for d in
                  user.get("/v1/knowledge/ray-kb/documents").json()}  # fmt: skip
        assert listed[KEEPER] == 1
        hit = user.post("/v1/knowledge/ray-kb/search", json={"query": "marmalade"}).json()
        assert hit["passages"][0]["text"].startswith("The lighthouse was sold")
        # bad input is refused, typed, and stores nothing
        broken = {"source": "broken.json", "media_type": "application/json", "content": "{no"}
        bad = user.post("/v1/knowledge/ray-kb/documents", json={"documents": [broken]})
        assert bad.status_code == 422
        assert "broken.json" in bad.json()["detail"]
        assert "broken.json" not in {
            d["source"] for d in user.get("/v1/knowledge/ray-kb/documents").json()
        }
        assert user.post("/v1/knowledge/Bad%20Name/search", json={"query": "x"}).status_code == 422
        # deleting a document removes its passages; dropping the base removes it
        deleted = user.delete("/v1/knowledge/ray-kb/documents", params={"source": KEEPER})
        assert deleted.status_code == 200, deleted.text
        assert deleted.json() == 1  # the passages that went
        left = user.post("/v1/knowledge/ray-kb/search", json={"query": "marmalade", "k": 50})
        assert KEEPER not in {p["source"] for p in left.json()["passages"]}
        dropped = user.delete("/v1/knowledge/ray-kb")
        assert dropped.status_code == 200, dropped.text
        assert dropped.json()["name"] == "ray-kb"
        assert user.get("/v1/knowledge/ray-kb/documents").status_code == 404


def test_the_cli_adds_and_searches_and_names_what_it_cannot_remove(rt):
    added = _troupe("kb", "add", "ray-cli-kb", str(DATA / "ferry_service.html"),
                    str(DATA / "sourdough_notes.txt"), "--tenant", "cli-tenant")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "ferry_service.html" in added.stdout
    assert "added" in added.stdout
    found = _troupe("kb", "search", "ray-cli-kb", "how long to proof the dough",
                    "--tenant", "cli-tenant")  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert "sourdough_notes.txt#" in found.stdout
    missing = _troupe("kb", "rm", "ray-cli-kb", "nothing.txt", "--tenant", "cli-tenant")
    assert missing.returncode == 1
    assert "has no document 'nothing.txt'" in missing.stderr + missing.stdout
    assert sorted(d.source for d in rt.as_tenant("cli-tenant").documents("ray-cli-kb")) == [
        str(DATA / "ferry_service.html"), str(DATA / "sourdough_notes.txt")
    ]  # fmt: skip
    # the default tenant has no such knowledge base
    assert rt.knowledge_bases() == [] or "ray-cli-kb" not in {b.name for b in rt.knowledge_bases()}


def _texts(request) -> str:
    return "\n".join(str(m.get("content")) for m in request.body["messages"])


def test_agents_see_passages_cite_them_and_search_only_their_tenants_knowledge(rt):
    rt.as_tenant("kb-tenant").ingest("ray-agent-kb", [DATA / KEEPER])
    rt.as_tenant("kb-intruder").ingest("ray-agent-kb", [DATA / "choir_handbook.md"])
    with WireServer() as server:
        server.script(
            Reply.tool("knowledge_search", {"kb": "ray-agent-kb", "query": "choir rehearsal"}),
            Reply(text="It was automated [lighthouse_history.txt#1]."),
        )
        team = runtime.Team(
            name="ray-kb-team",
            planner_model="offline",
            models={"reader": runtime.OpenAICompatibleModel(
                base_url=server.base_url_openai, model="wire-test-model")},
            agents=[runtime.AgentSpec(
                name="ray-kb-reader", role="reader", model="reader", tools=["knowledge_search"],
                memory=runtime.MemoryPolicy(knowledge=("ray-agent-kb",), knowledge_k=2),
            )],
        )  # fmt: skip
        job = rt.submit("When was the lighthouse lamp automated?", team, tenant="kb-tenant")
        result = job.result(timeout=120)
        first, second = server.requests[-2:]
    assert result.status == "succeeded", result.error
    assert "It was automated [lighthouse_history.txt#1]." in result.answer
    shown = _texts(first)
    assert "Passages from your knowledge bases" in shown
    assert f"[{DATA / KEEPER}#" in shown  # the passage, with the citation to give
    tool_result = [m for m in second.body["messages"] if m["role"] == "tool"]
    assert tool_result
    assert f"[{DATA / KEEPER}#" in tool_result[0]["content"]
    assert "choir" not in tool_result[0]["content"].lower()  # the other tenant's base


def test_a_tenants_key_cannot_hold_more_knowledge_bases_than_its_quota(api):
    """The worst a tenant's key can do to the shared Chroma is fill its own quota."""
    limit = runtime.MemoryConfig().knowledge_bases_per_tenant
    doc = {"documents": [{"source": "a.txt", "media_type": "text/plain", "content": "a lamp"}]}
    with api.client(OTHER_KEY) as other, api.client(USER_KEY) as user:
        try:
            for n in range(limit):
                made = other.post(f"/v1/knowledge/quota-{n}/documents", json=doc)
                assert made.status_code == 200, made.text
            refused = other.post(f"/v1/knowledge/quota-{limit}/documents", json=doc)
            assert refused.status_code == 403, refused.text
            assert refused.json()["code"] == "quota_exceeded"
            assert f"{limit} knowledge bases" in refused.json()["detail"]
            assert other.get(f"/v1/knowledge/quota-{limit}/documents").status_code == 404
            # another tenant's quota is its own
            mine = user.post("/v1/knowledge/quota-mine/documents", json=doc)
            assert mine.status_code == 200, mine.text
        finally:
            for n in range(limit):
                other.delete(f"/v1/knowledge/quota-{n}")
            user.delete("/v1/knowledge/quota-mine")
        assert other.get("/v1/knowledge").json() == []
