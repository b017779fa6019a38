"""Retrieval quality of knowledge bases: the QA set in tests/data/knowledge, offline MiniLM.

Every question names its source document and a short quote of the passage that answers it;
the right passage is any passage of that source containing the quote. Recall@5 must be at
least 0.9.
"""

import base64
import json
from pathlib import Path

import chromadb
import pytest
from wiring import run

from raytroupe.actors.memory.documents import ChunkingConfig, chunk_document
from raytroupe.actors.memory.knowledge import KnowledgeBases
from raytroupe.protocols.knowledge import KnowledgeDocument

DATA = Path(__file__).resolve().parents[1] / "data" / "knowledge"
MEDIA_TYPES = {
    ".md": "text/markdown",
    ".html": "text/html",
    ".txt": "text/plain",
    ".json": "application/json",
    ".pdf": "application/pdf",
}
QUESTIONS = json.loads((DATA / "questions.json").read_text(encoding="utf-8"))


def documents():
    found = []
    for path in sorted(DATA.iterdir()):
        media_type = MEDIA_TYPES.get(path.suffix)
        if media_type is None or path.name == "questions.json":
            continue
        data = base64.b64encode(path.read_bytes()).decode()
        found.append(KnowledgeDocument(source=path.name, media_type=media_type, data_b64=data))
    return found


def squash(text):
    return " ".join(text.split())


def test_the_set_has_every_format_and_enough_questions():
    names = [d.source for d in documents()]
    assert len(names) >= 10
    for suffix in MEDIA_TYPES:
        assert sum(name.endswith(suffix) for name in names) >= 2, suffix
    assert len(QUESTIONS) >= 36
    assert {q["source"] for q in QUESTIONS} == set(names)


def test_every_quote_is_in_a_passage_of_its_source():
    chunks = {d.source: chunk_document(d, ChunkingConfig()) for d in documents()}
    for q in QUESTIONS:
        holding = [c for c in chunks[q["source"]] if squash(q["quote"]) in squash(c.text)]
        assert holding, q
        elsewhere = [
            source
            for source, found in chunks.items()
            if source != q["source"] and any(squash(q["quote"]) in squash(c.text) for c in found)
        ]
        assert not elsewhere, q


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """For each question, the 1-based rank of the first right passage in the top 5 (or 0)."""
    client = chromadb.PersistentClient(
        path=str(tmp_path_factory.mktemp("kb")),
        settings=chromadb.config.Settings(anonymized_telemetry=False),
    )
    bases = KnowledgeBases(client, embedding="minilm")

    async def ask_all():
        await bases.ingest("acme", "handbooks", documents())
        found = []
        for q in QUESTIONS:
            passages = (await bases.search("acme", "handbooks", q["question"], 5)).passages
            right = [
                i + 1
                for i, p in enumerate(passages)
                if p.source == q["source"] and squash(q["quote"]) in squash(p.text)
            ]
            found.append(right[0] if right else 0)
        return found

    return run(ask_all(), 300.0)


def test_recall_at_5_of_the_right_passage_is_at_least_0_9(ranks):
    n = len(ranks)
    recall_1 = sum(r == 1 for r in ranks) / n
    recall_5 = sum(r > 0 for r in ranks) / n
    mrr = sum(1 / r for r in ranks if r) / n
    missed = [q["question"] for q, r in zip(QUESTIONS, ranks, strict=True) if not r]
    print(  # noqa: T201 - the figures are the point of this test (pytest -s)
        f"\n{n} questions: recall@1 {recall_1:.3f}, recall@5 {recall_5:.3f}, MRR {mrr:.3f}",
        "missed:",
        *missed,
        sep="\n  ",
    )
    assert recall_5 >= 0.9
