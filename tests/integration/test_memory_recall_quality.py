"""Recall@5 of the memory embeddings on a small labelled set of agent memories (no Ray)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings

from raytroupe.actors.memory.embeddings import embedding_function

DATA = Path(__file__).resolve().parents[1] / "data" / "memory_recall.json"
K = 5


@pytest.fixture(scope="module")
def recall_set():
    data = json.loads(DATA.read_text(encoding="utf-8"))
    ids = [m["id"] for m in data["memories"]]
    assert len(ids) == len(set(ids)) >= 60
    assert 25 <= len(data["queries"]) <= 40
    for query in data["queries"]:
        assert query["relevant"], query["id"]
        assert set(query["relevant"]) <= set(ids), query["id"]
    return data


def recall_at_k(kind, data, path: Path) -> tuple[float, float]:
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection(
        f"recall-{kind}", embedding_function=embedding_function(kind)
    )
    started = time.perf_counter()
    collection.add(
        ids=[m["id"] for m in data["memories"]],
        documents=[m["text"] for m in data["memories"]],
        metadatas=[{"topic": m["topic"]} for m in data["memories"]],
    )
    found = collection.query(query_texts=[q["text"] for q in data["queries"]], n_results=K)
    elapsed = time.perf_counter() - started
    scores = []
    for query, top in zip(data["queries"], found["ids"], strict=True):
        relevant = set(query["relevant"])
        scores.append(len(relevant & set(top)) / len(relevant))
    texts = len(data["memories"]) + len(data["queries"])
    return sum(scores) / len(scores), texts / elapsed


def test_minilm_recalls_paraphrased_memories_and_beats_hashing(recall_set, tmp_path):
    minilm, minilm_rate = recall_at_k("minilm", recall_set, tmp_path / "minilm")
    hashing, hashing_rate = recall_at_k("hashing", recall_set, tmp_path / "hashing")
    print(  # noqa: T201 - the figures are the point of this test (pytest -s)
        f"\nrecall@{K} on {len(recall_set['queries'])} queries over "
        f"{len(recall_set['memories'])} memories: minilm {minilm:.3f} "
        f"({minilm_rate:.0f} texts/s, add + query through Chroma), "
        f"hashing {hashing:.3f} ({hashing_rate:.0f} texts/s)"
    )
    assert minilm >= 0.8
    assert minilm > hashing
