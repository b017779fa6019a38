"""Knowledge-base benchmark: ingestion and search through the memory actor against Chroma direct.

The corpus is the retrieval-QA set of the tests (``tests/data/knowledge``: Markdown, HTML, text,
JSON and PDF), each document ingested several times under other sources; the queries are its
questions. Both sides embed with the offline MiniLM and use the same chunker, each in its own
fresh Chroma directory: the actor through ``MemoryStore.ingest`` and ``knowledge_search``
(one Ray call each), Chroma direct in this process (``collection.add`` of the same passages,
``collection.query``). Ingestion is timed per 100 passages; searches one at a time, each side
as one block, and 16 in flight through the actor. Time ratios: lower is better; the goal for
searches is <= 1.5x.

Usage: python bench/knowledge.py [--quick] [--json PATH]
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from _common import Figure, Section, main

from raytroupe.actors.lifecycle import with_lifecycle
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.documents import ChunkingConfig, chunk_document
from raytroupe.actors.memory.embeddings import MiniLMEmbedding, embedding_function
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.protocols.knowledge import KnowledgeDocument

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "knowledge"
MEDIA_TYPES = {
    ".md": "text/markdown",
    ".html": "text/html",
    ".txt": "text/plain",
    ".json": "application/json",
    ".pdf": "application/pdf",
}
TENANT, KB, K = "bench", "handbooks", 5
BATCH = 10
"""Documents per ingestion call (actor) and per ``add`` (direct)."""
WARM_UP = 5
"""Searches run on each side before timing."""


def _corpus(copies: int) -> list[KnowledgeDocument]:
    """Every document of the QA set, ``copies`` times (each copy its own source and hash)."""
    files = sorted(
        p for p in DATA.iterdir() if p.suffix in MEDIA_TYPES and p.name != "questions.json"
    )
    return [
        KnowledgeDocument(
            source=f"copy-{i}/{path.name}",
            media_type=MEDIA_TYPES[path.suffix],  # type: ignore[arg-type]
            data_b64=base64.b64encode(path.read_bytes()).decode(),
            metadata={"copy": i},
        )
        for i in range(copies)
        for path in files
    ]


def _queries(rounds: int) -> list[str]:
    questions = json.loads((DATA / "questions.json").read_text(encoding="utf-8"))
    return [q["question"] for _ in range(rounds) for q in questions]


def _direct_collection(root: Path) -> Any:
    import chromadb  # noqa: PLC0415 - imported here so the driver's start-up stays light

    client = chromadb.PersistentClient(
        path=str(root), settings=chromadb.config.Settings(anonymized_telemetry=False)
    )
    return client.get_or_create_collection(
        "direct", embedding_function=embedding_function("minilm"), metadata={"hnsw:space": "cosine"}
    )


def _direct_ingest(collection: Any, documents: list[KnowledgeDocument]) -> tuple[float, int]:
    """Seconds to chunk and add ``documents`` straight to Chroma; how many passages."""
    config = ChunkingConfig()
    collection.query(query_texts=["warm up the model"], n_results=1)
    start, passages = time.perf_counter(), 0
    for i in range(0, len(documents), BATCH):
        ids, texts, metadatas = [], [], []
        for document in documents[i : i + BATCH]:
            for chunk in chunk_document(document, config):
                ids.append(f"{document.source}:{chunk.position}")
                texts.append(chunk.text)
                metadatas.append({"source": document.source, "section": chunk.section})
        collection.add(ids=ids, documents=texts, metadatas=metadatas)
        passages += len(ids)
    return time.perf_counter() - start, passages


def _actor_ingest(store: Any, documents: list[KnowledgeDocument]) -> tuple[float, int]:
    """Seconds to ingest ``documents`` through the memory actor; how many passages."""
    warm = KnowledgeDocument(source="warm.txt", media_type="text/plain", content="Warm up.")
    ray.get(store.ingest.remote(TENANT, "warm-up", [warm]))  # loads the model in the actor
    start, passages = time.perf_counter(), 0
    for i in range(0, len(documents), BATCH):
        report = ray.get(store.ingest.remote(TENANT, KB, documents[i : i + BATCH]))
        passages += report.chunks
    return time.perf_counter() - start, passages


def _searches(store: Any, collection: Any, queries: list[str]) -> tuple[float, float, float]:
    """Median seconds of one search, actor and direct; per search, 16 in flight.

    Each side runs its searches as one block, the other side idle: alternating them measured
    the actor at 4x, because onnxruntime's threads in this process spin for a while after
    each run and took both cores from the actor's.
    """
    direct, actor = [], []
    for side, times in (("direct", direct), ("actor", actor)):
        for i, q in enumerate([*queries[:WARM_UP], *queries]):
            t = time.perf_counter()
            if side == "direct":
                collection.query(query_texts=[q], n_results=K)
            else:
                ray.get(store.knowledge_search.remote(TENANT, KB, q, K))
            if i >= WARM_UP:
                times.append(time.perf_counter() - t)
    start = time.perf_counter()
    for i in range(0, len(queries), 16):
        ray.get([store.knowledge_search.remote(TENANT, KB, q, K) for q in queries[i : i + 16]])
    in_flight = (time.perf_counter() - start) / len(queries)
    return statistics.median(actor), statistics.median(direct), in_flight


class _Embedder:
    """The baseline: one query's MiniLM embedding, alone in an actor (no Chroma, no store)."""

    def __init__(self) -> None:
        self._ef = MiniLMEmbedding()
        self._ef.load()

    async def embed(self, text: str) -> int:
        return len(self._ef.embed([text]))


def _embedding_floor(queries: list[str]) -> tuple[float, float]:
    """Median seconds of a query's embedding through an actor call, and in this process.

    What a search through any actor pays on this machine besides the search: the Ray call
    and handing CPU-bound work (onnxruntime's threads) to another process and back.
    """
    local = MiniLMEmbedding()
    local.load()
    actor = ray.remote(_Embedder).options(num_cpus=0, max_concurrency=64).remote()
    ray.get(actor.embed.remote("warm up"))
    here, there = [], []
    for side, times in (("here", here), ("actor", there)):
        for i, q in enumerate([*queries[:WARM_UP], *queries]):
            t = time.perf_counter()
            if side == "here":
                local.embed([q])
            else:
                ray.get(actor.embed.remote(q))
            if i >= WARM_UP:
                times.append(time.perf_counter() - t)
    ray.kill(actor)
    return statistics.median(there), statistics.median(here)


def run(quick: bool) -> Section:
    """Ingest the corpus on both sides, then search it on both sides."""
    documents = _corpus(2 if quick else 8)
    queries = _queries(2 if quick else 4)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    section = Section("Knowledge bases: the memory actor against Chroma used directly")
    try:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as d:
            collection = _direct_collection(Path(d))
            direct_s, direct_n = _direct_ingest(collection, documents)
            remote = ray.remote(with_lifecycle(MemoryStore)).options(num_cpus=0, max_concurrency=64)
            store = remote.remote(MemoryConfig(path=Path(a), embedding="minilm"))
            actor_s, actor_n = _actor_ingest(store, documents)
            actor_q, direct_q, in_flight = _searches(store, collection, queries)
            ray.kill(store)
            embed_actor, embed_here = _embedding_floor(queries)
        n = len(documents)
        section.figures += [
            Figure(f"ingest {n} documents ({actor_n} passages): time per 100 passages",
                   100 * actor_s / actor_n, 100 * direct_s / direct_n, "s", "Chroma direct",
                   direction="at_most", note="parse, chunk, embed (MiniLM), write"),
            Figure(f"top-{K} search over {actor_n} passages, one at a time (median)",
                   actor_q * 1e3, direct_q * 1e3, "ms", "Chroma direct", goal=1.5,
                   direction="at_most", note="one actor call each: the Ray floor is in it"),
            Figure("baseline: one query's embedding through an actor call (median)",
                   embed_actor * 1e3, embed_here * 1e3, "ms", "the same in this process",
                   direction="at_most", note="the floor of any actor doing this CPU work"),
            Figure(f"top-{K} search, 16 in flight (time per search)", in_flight * 1e3,
                   direct_q * 1e3, "ms", "Chroma direct, one at a time", goal=1.5,
                   direction="at_most", note="searches arriving together: one Chroma call"),
        ]  # fmt: skip
        section.notes.append(
            f"ingestion through the actor: {actor_n / actor_s:.0f} passages/s, "
            f"{n / actor_s:.1f} documents/s (Chroma direct: {direct_n / direct_s:.0f} "
            f"passages/s, {n / direct_s:.1f} documents/s); {len(queries)} searches; MiniLM "
            "(int8 ONNX, 2 threads) on both sides"
        )
    finally:
        ray.shutdown()
    return section


if __name__ == "__main__":
    main(run)
