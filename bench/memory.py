"""Memory store benchmark: the memory actor (through Ray) against Chroma used directly.

Both sides use the same Chroma version, the same embedding function (the fast hashing one, so
the figures measure the store and not the model), the same batch size and the same layout (one
collection for the tenant, as the actor keeps one per tenant), each on its own fresh
directory. For 10,000 and 100,000 records (``--quick``: 10,000) it measures the time to write
them and the median latency of a top-5 query, one at a time and 16 in flight, each as a ratio
actor / direct (time ratios: lower is better; goal <= 1.5x).

Usage: python bench/memory.py [--quick] [--json PATH]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import ray
from _common import Figure, Section, main

from raytroupe.actors.lifecycle import with_lifecycle
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.embeddings import EmbeddingKind, embedding_function
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.protocols import MemoryQuery, MemoryWrite

BATCH = 100
"""Records per write call, on both sides."""

TOPICS = ["deploy", "budget", "customer", "incident", "design", "hiring", "security", "travel"]


def _texts(n: int) -> list[str]:
    return [
        f"Note {i} about {TOPICS[i % len(TOPICS)]}: item {i * 7 % 997} was reviewed by team "
        f"{i % 13} and marked {'urgent' if i % 5 == 0 else 'routine'}."
        for i in range(n)
    ]


def _queries(n: int) -> list[str]:
    return [f"what happened with {TOPICS[i % len(TOPICS)]} item {i * 11 % 997}" for i in range(n)]


def _direct(
    root: Path, kind: EmbeddingKind, texts: list[str], batch: int, queries: list[str]
) -> tuple[float, float]:
    import chromadb  # noqa: PLC0415 - imported here so the driver's start-up stays light

    client = chromadb.PersistentClient(
        path=str(root), settings=chromadb.config.Settings(anonymized_telemetry=False)
    )
    collection = client.get_or_create_collection(
        "direct", embedding_function=embedding_function(kind), metadata={"hnsw:space": "cosine"}
    )
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        chunk = texts[i : i + batch]
        collection.add(
            ids=[f"d{i + j}" for j in range(len(chunk))],
            documents=chunk,
            metadatas=[{"tenant": "bench", "importance": 0.5} for _ in chunk],
        )
    write_s = time.perf_counter() - start
    latencies = []
    for q in queries:
        t = time.perf_counter()
        collection.query(query_texts=[q], n_results=5)
        latencies.append(time.perf_counter() - t)
    return len(texts) / write_s, statistics.median(latencies)


@ray.remote(num_cpus=0)
class _Noop:
    async def ping(self) -> None:  # async, like the memory actor
        return None


def _ray_floor(calls: int) -> float:
    """Median time of a bare call to an async Ray actor: the floor of any actor query."""
    noop = _Noop.remote()  # type: ignore[attr-defined]
    ray.get(noop.ping.remote())
    latencies = []
    for _ in range(calls):
        t = time.perf_counter()
        ray.get(noop.ping.remote())
        latencies.append(time.perf_counter() - t)
    ray.kill(noop)
    return statistics.median(latencies)


def _actor(
    root: Path, kind: EmbeddingKind, texts: list[str], batch: int, queries: list[str]
) -> tuple[float, float, float]:
    remote = ray.remote(with_lifecycle(MemoryStore)).options(num_cpus=0, max_concurrency=64)
    store = remote.remote(MemoryConfig(path=root, embedding=kind))
    ray.get(store.count.remote("bench"))  # start it and open Chroma before timing
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        memories = [MemoryWrite(text=t) for t in texts[i : i + batch]]
        ray.get(store.write_many.remote("bench", memories))
    write_s = time.perf_counter() - start
    latencies = []
    for q in queries:
        t = time.perf_counter()
        ray.get(store.query.remote("bench", MemoryQuery(query=q, k=5)))
        latencies.append(time.perf_counter() - t)
    start = time.perf_counter()  # the same queries, 16 in flight at a time
    for i in range(0, len(queries), 16):
        batch_of = queries[i : i + 16]
        ray.get([store.query.remote("bench", MemoryQuery(query=q, k=5)) for q in batch_of])
    concurrent = (time.perf_counter() - start) / len(queries)
    ray.kill(store)
    return len(texts) / write_s, statistics.median(latencies), concurrent


def run(quick: bool) -> Section:
    """Measure writes and top-5 queries at each size, actor against Chroma direct."""
    sizes = [10_000] if quick else [10_000, 100_000]
    queries = _queries(100 if quick else 200)
    kind: EmbeddingKind = "hashing"
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    section = Section("Memory: the memory actor against Chroma used directly")
    try:
        floor = _ray_floor(len(queries))
        for n in sizes:
            texts = _texts(n)
            with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as d:
                direct_rate, direct_q = _direct(Path(d), kind, texts, BATCH, queries)
                actor_rate, actor_q, actor_tput = _actor(Path(a), kind, texts, BATCH, queries)
            section.figures += [
                Figure(f"{n:,} records: write, time per 1,000 records", 1e3 / actor_rate,
                       1e3 / direct_rate, "s", "Chroma direct", goal=1.5, direction="at_most"),
                Figure(f"{n:,} records: top-5 query, one at a time (median)", actor_q * 1e3,
                       direct_q * 1e3, "ms", "Chroma direct", goal=1.5, direction="at_most",
                       note="one actor call each: the Ray floor is in it"),
                Figure(f"{n:,} records: top-5 query, 16 in flight (time per query)",
                       actor_tput * 1e3, direct_q * 1e3, "ms", "Chroma direct, one at a time",
                       goal=1.5, direction="at_most",
                       note="queries arriving together go to Chroma as one call"),
                Figure(f"{n:,} records: top-5 query minus a bare Ray call", (actor_q - floor) * 1e3,
                       direct_q * 1e3, "ms", "Chroma direct"),
            ]  # fmt: skip
        section.notes.append(
            f"embedding {kind} (the same on both sides, so the figures measure the store), batch "
            f"{BATCH}, {len(queries)} queries; a bare call to an async Ray actor takes "
            f"{floor * 1e3:.2f} ms (median) on this machine"
        )
    finally:
        ray.shutdown()
    return section


if __name__ == "__main__":
    main(run)
