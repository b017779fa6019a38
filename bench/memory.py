"""Memory store benchmark: the memory actor (through Ray) against Chroma used directly.

Both sides use the same Chroma version, the same embedding function (the fast hashing one by
default, so the figures measure the store and not the model; ``--embedding minilm`` for the
real one), the same batch size and the same layout (one collection for the tenant, as the
actor keeps one per tenant), each on its own fresh directory. For N records it prints
write throughput (records/s) and the median latency of a top-5 query, and the ratio
actor / direct (time ratios: lower is better; goal <= 1.5x).

Usage: python bench/memory.py [--sizes 10000 100000] [--batch 100] [--queries 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import ray

from actors.lifecycle import with_lifecycle
from actors.memory.config import MemoryConfig
from actors.memory.embeddings import EmbeddingKind, embedding_function
from actors.memory.store import MemoryStore
from protocols import MemoryQuery, MemoryWrite

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


def main() -> None:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedding", choices=["hashing", "minilm"], default="hashing")
    args = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; embedding {args.embedding}, "
        f"batch {args.batch}, {args.queries} queries"
    )
    print(f"{'records':>8}  {'measure':<22}{'actor':>12}{'direct':>12}{'ratio':>8}  goal")
    queries = _queries(args.queries)
    floor = _ray_floor(args.queries)
    for n in args.sizes:
        texts = _texts(n)
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as d:
            direct_rate, direct_q = _direct(Path(d), args.embedding, texts, args.batch, queries)
            actor_rate, actor_q, actor_tput = _actor(
                Path(a), args.embedding, texts, args.batch, queries
            )
        print(
            f"{n:>8}  {'write (records/s)':<22}{actor_rate:>12.0f}{direct_rate:>12.0f}"
            f"{direct_rate / actor_rate:>7.2f}x  <= 1.5x (time)"
        )
        print(
            f"{n:>8}  {'top-5 query, median':<22}{actor_q * 1e3:>9.2f} ms{direct_q * 1e3:>9.2f} ms"
            f"{actor_q / direct_q:>7.2f}x  <= 1.5x"
        )
        print(
            f"{n:>8}  {'query, 16 in flight':<22}{actor_tput * 1e3:>9.2f} ms"
            f"{direct_q * 1e3:>9.2f} ms{actor_tput / direct_q:>7.2f}x  (time per query)"
        )
        print(
            f"{n:>8}  {'query minus Ray floor':<22}{(actor_q - floor) * 1e3:>9.2f} ms"
            f"{direct_q * 1e3:>9.2f} ms{(actor_q - floor) / direct_q:>7.2f}x  "
            f"(floor: a bare Ray call, {floor * 1e3:.2f} ms)"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()
