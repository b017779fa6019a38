from __future__ import annotations

import json
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.api.types import DefaultEmbeddingFunction
from chromadb.config import Settings
from chromadb.utils.embedding_functions import known_embedding_functions
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

from raytroupe.actors.memory import embeddings
from raytroupe.actors.memory.embeddings import (
    DIMENSION,
    HashingEmbedding,
    MiniLMEmbedding,
    embedding_function,
)

ROOT = Path(__file__).resolve().parents[2]

CAT = "The cat is sleeping on the sofa."
FELINE = "A feline naps on the couch."
STOCKS = "Stock markets fell sharply after the interest rate announcement."

DOCS = {
    "pets": "Our cat sleeps on the sofa most of the afternoon.",
    "db": "The team chose PostgreSQL for the billing service.",
    "weather": "Heavy rain and strong wind are expected in Amsterdam tomorrow.",
    "tea": "Alice prefers green tea to coffee in the morning.",
}


def cos(a, b) -> float:
    return float(np.dot(a, b))


@pytest.fixture(scope="module")
def minilm():
    ef = MiniLMEmbedding()
    ef.load()
    return ef


@pytest.fixture
def no_network(monkeypatch):
    """Any non-loopback connection or name lookup, or Chroma's default model, is recorded and
    refused."""
    attempts: list[object] = []
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo
    loopback = {"127.0.0.1", "::1", "localhost"}

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in loopback:
            attempts.append(address)
            raise OSError(f"network disabled in tests: {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in loopback and host is not None:
            attempts.append(host)
            raise OSError(f"name lookup disabled in tests: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    def default_model(self, *args, **kwargs):
        attempts.append("chroma default embedding model")
        raise AssertionError("Chroma's default embedding model must never be loaded")

    def default_call(self, input):  # noqa: A002 - Chroma checks the parameter names
        attempts.append("chroma default embedding function")
        raise AssertionError("Chroma's default embedding function must never be used")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__init__", default_model)
    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", default_call)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return attempts


def client(path: Path):
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


# ---------------------------------------------------------------- hashing


def test_hashing_vectors_are_unit_length_and_float32():
    ef = HashingEmbedding()
    vectors = ef([CAT, STOCKS, "", "!!! ???", "the of and"])
    assert len(vectors) == 5
    for v in vectors:
        assert v.dtype == np.float32
        assert v.shape == (DIMENSION,)
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-6)


def test_hashing_is_deterministic_across_processes():
    text = "Deploy the billing service to staging on Friday, then run the smoke tests."
    code = (
        "import json; from actors.memory.embeddings import HashingEmbedding; "
        f"print(json.dumps(HashingEmbedding(dim=128).embed([{text!r}])[0].tolist()))"
    )
    vectors = []
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        vectors.append(json.loads(done.stdout))
    here = HashingEmbedding(dim=128).embed([text])[0].tolist()
    assert vectors[0] == vectors[1] == here


def test_hashing_similar_texts_are_closer_than_unrelated():
    ef = HashingEmbedding()
    a, b, c = ef.embed(
        [
            "The deploy pipeline failed on the staging server.",
            "Staging server deploy pipeline failed again this morning.",
            "Alice prefers green tea to coffee.",
        ]
    )
    assert cos(a, b) > 0.5
    assert cos(a, b) > cos(a, c) + 0.3


def test_hashing_counts_words_not_case_or_punctuation():
    ef = HashingEmbedding()
    a, b = ef.embed(["Rust, Python!", "rust python"])
    assert np.allclose(a, b)


def test_hashing_config_round_trip_and_validation():
    ef = HashingEmbedding(dim=256)
    rebuilt = HashingEmbedding.build_from_config(ef.get_config())
    assert rebuilt.dim == 256
    assert not ef.is_legacy()
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedding.build_from_config({"dim": 3})
    with pytest.raises(ValueError, match="version"):
        HashingEmbedding.build_from_config({"dim": 256, "version": 99})
    with pytest.raises(ValueError, match="cannot change"):
        ef.validate_config_update(ef.get_config(), {"dim": 512, "version": 1})


# ---------------------------------------------------------------- MiniLM


def test_minilm_gives_384d_unit_float32_vectors(minilm):
    vectors = minilm([CAT, FELINE, STOCKS])
    assert len(vectors) == 3
    for v in vectors:
        assert v.dtype == np.float32
        assert v.shape == (384,)
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)


def test_minilm_paraphrases_score_higher_than_unrelated(minilm):
    cat, feline, stocks = minilm.embed([CAT, FELINE, STOCKS])
    assert cos(cat, feline) > 0.4
    assert cos(cat, feline) > cos(cat, stocks) + 0.3
    assert cos(cat, feline) > cos(feline, stocks) + 0.3


def test_minilm_batches_give_the_same_vectors_as_one_by_one(minilm):
    texts = [
        " ".join(["word"] * (i % 23 + 1)) + f" number {i} about {DOCS['db' if i % 2 else 'tea']}"
        for i in range(40)
    ] + ["", "ok", STOCKS]
    batched = MiniLMEmbedding(batch_size=8).embed(texts)
    single = np.stack([minilm.embed([t])[0] for t in texts])
    whole = MiniLMEmbedding(batch_size=128).embed(texts)
    assert batched.shape == (43, 384)
    assert np.allclose(batched, single, atol=1e-5)
    assert np.allclose(whole, single, atol=1e-5)


def test_minilm_embeds_empty_and_long_texts(minilm):
    empty, long = minilm(["", "tokens " * 2000])
    assert np.linalg.norm(empty) == pytest.approx(1.0, abs=1e-5)
    assert np.linalg.norm(long) == pytest.approx(1.0, abs=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_loads_once_per_process_under_concurrent_first_use(monkeypatch):
    monkeypatch.setattr(embeddings, "_SESSIONS", {})
    monkeypatch.setattr(embeddings, "_TOKENIZERS", {})
    loads = []
    real_model_file, real_tokenizer_file = embeddings._model_file, embeddings._tokenizer_file
    monkeypatch.setattr(
        embeddings, "_model_file", lambda: loads.append("model") or real_model_file()
    )
    monkeypatch.setattr(
        embeddings, "_tokenizer_file", lambda: loads.append("tokenizer") or real_tokenizer_file()
    )
    ef = MiniLMEmbedding(intra_op_threads=1)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: ef.embed([CAT, STOCKS]), range(6)))
    assert sorted(loads) == ["model", "tokenizer"]
    for result in results[1:]:
        assert np.array_equal(result, results[0])


def test_minilm_writes_nothing_into_the_accounts_home(tmp_path):
    """onnxruntime's telemetry writes ~/.cache/Microsoft/DeveloperTools/.onnxruntime/ as it
    loads unless ``ORT_DISABLE_TELEMETRY`` is set; the embedding function sets it."""
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "from raytroupe.actors.memory.embeddings import MiniLMEmbedding; "
        "print(len(MiniLMEmbedding().embed(['hello'])[0]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(DIMENSION)
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == []


def test_minilm_truncates_to_max_length(minilm):
    head = "The quarterly budget review moved to Thursday. " * 60  # well over 256 tokens
    a, b = minilm.embed([head, head + "Completely different trailing words about volcanoes."])
    assert np.allclose(a, b, atol=1e-6)


def test_minilm_config_round_trip_and_validation():
    ef = MiniLMEmbedding(max_length=128, batch_size=16, intra_op_threads=1)
    rebuilt = MiniLMEmbedding.build_from_config(ef.get_config())
    assert rebuilt.get_config() == ef.get_config()
    assert ef.get_config()["model"] == "all-MiniLM-L6-v2-onnx-int8"
    assert not ef.is_legacy()
    assert ef.default_space() == "cosine"
    assert set(ef.supported_spaces()) == {"cosine", "ip", "l2"}
    with pytest.raises(ValueError, match="model"):
        MiniLMEmbedding.build_from_config({"model": "text-embedding-3-small"})
    with pytest.raises(ValueError, match="max_length"):
        MiniLMEmbedding(max_length=1000)
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbedding.build_from_config({"batch_size": 0})


def test_functions_are_registered_with_chroma_under_their_names():
    assert known_embedding_functions["raytroupe-minilm"] is MiniLMEmbedding
    assert known_embedding_functions["raytroupe-hashing"] is HashingEmbedding
    assert isinstance(embedding_function("minilm"), MiniLMEmbedding)
    assert isinstance(embedding_function("hashing"), HashingEmbedding)
    with pytest.raises(ValueError, match="unknown embedding kind"):
        embedding_function("openai")  # type: ignore[arg-type]


# ---------------------------------------------------------------- with Chroma


def test_network_guard_catches_chromas_default(no_network):
    with pytest.raises(AssertionError, match="must never be used"):
        DefaultEmbeddingFunction()(["hello"])
    with pytest.raises(OSError, match="disabled"):
        socket.create_connection(("example.com", 443), timeout=1)
    assert no_network == ["chroma default embedding function", "example.com"]
    no_network.clear()


@pytest.mark.parametrize("kind", ["minilm", "hashing"])
def test_chroma_collection_stores_and_queries(kind, tmp_path, no_network):
    collection = client(tmp_path).create_collection(
        "memories", embedding_function=embedding_function(kind)
    )
    collection.add(ids=list(DOCS), documents=list(DOCS.values()))
    found = collection.query(query_texts=["PostgreSQL billing service"], n_results=2)
    assert found["ids"][0][0] == "db"
    assert collection.configuration_json["hnsw"]["space"] == "cosine"
    assert no_network == []


def test_minilm_finds_paraphrases_in_chroma(tmp_path, no_network):
    collection = client(tmp_path).create_collection(
        "memories", embedding_function=MiniLMEmbedding()
    )
    collection.add(ids=list(DOCS), documents=list(DOCS.values()))
    found = collection.query(query_texts=["Which database backs our invoicing?"], n_results=1)
    assert found["ids"] == [["db"]]
    found = collection.query(
        query_texts=["What will the weather be like in the Netherlands?"], n_results=1
    )
    assert found["ids"] == [["weather"]]
    assert no_network == []


@pytest.mark.parametrize(
    ("ef", "cls"),
    [
        (MiniLMEmbedding(batch_size=16, intra_op_threads=1), MiniLMEmbedding),
        (HashingEmbedding(dim=256), HashingEmbedding),
    ],
)
def test_reopened_collection_rebuilds_its_function_from_config(
    ef, cls, tmp_path, no_network, monkeypatch
):
    first = client(tmp_path).create_collection("memories", embedding_function=ef)
    first.add(ids=list(DOCS), documents=list(DOCS.values()))
    stored = first.configuration_json["embedding_function"]
    assert stored == {"type": "known", "name": cls.name(), "config": ef.get_config()}

    SharedSystemClient.clear_system_cache()  # a fresh client reads the collection from disk
    builds = []
    real_build = cls.build_from_config

    def build(config):
        builds.append(config)
        return real_build(config)

    monkeypatch.setattr(cls, "build_from_config", staticmethod(build))
    again = client(tmp_path).get_collection("memories")
    rebuilt = again.configuration["embedding_function"]
    assert type(rebuilt) is cls
    assert rebuilt is not ef
    assert rebuilt.get_config() == ef.get_config()
    assert ef.get_config() in builds

    found = again.query(query_texts=["PostgreSQL billing service"], n_results=1)
    assert found["ids"] == [["db"]]
    again.add(ids=["new"], documents=["Ben owns the search ranking code."])
    assert again.count() == len(DOCS) + 1
    assert no_network == []
    SharedSystemClient.clear_system_cache()
