"""Scripts of the documentation run as a reader runs them: a Python process of their own.

``run_script`` writes the code to a file and runs it from the repository's root (the pages'
paths, ``examples/teams/research.yaml``, are the repository's) with a home of its own (its
``~/.raytroupe``: journal, memory). ``ray_address``: a Ray to join as a second driver (the
tests' own, ``ray.get_runtime_context().gcs_address``), which spares it a Ray of its own and
runs it against the deployment the other tests use; ``"local"``: a Ray of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300


def run_script(
    code: str, tmp_path: Path, ray_address: str = "local"
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a script (see the module); what it printed, and how it ended."""
    script = tmp_path / "script.py"
    script.write_text(code, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={
            **os.environ,
            "HOME": str(home),
            "RAY_ADDRESS": ray_address,
        },
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def readme() -> str:
    """README.md's text."""
    return (ROOT / "README.md").read_text(encoding="utf-8")


def block_after(text: str, marker: str, language: str) -> str:
    """The first fenced ``language`` block after ``marker`` in ``text``."""
    rest = text.split(marker, 1)[1]
    found = re.search(rf"^```{language}\n(.*?)^```$", rest, re.MULTILINE | re.DOTALL)
    assert found, f"no {language} block after {marker!r}"
    return found.group(1)
