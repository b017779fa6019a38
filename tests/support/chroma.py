"""A real Chroma server (``chroma run``, from the chromadb wheel) on 127.0.0.1 for the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from raytroupe.runtime.cli._local import free_port

CHROMA = shutil.which("chroma", path=str(Path(sys.executable).parent))
START_S = 60.0


@contextmanager
def chroma_server(folder: Path) -> Iterator[str]:
    """Serve a Chroma database in ``folder`` on a free loopback port; yield ``host:port``.

    Its output goes to ``folder``/../chroma.log (a pipe that nobody reads would fill up and
    stall the server mid-request). Stopped by PID at the end (terminate, then kill).
    """
    if CHROMA is None:
        raise RuntimeError("the chroma command comes with chromadb: pip install -e '.[dev]'")
    port = free_port()
    log = folder.parent / "chroma.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [CHROMA, "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_S
        while "listening on address" not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"chroma run did not start in {START_S} s: {tail}")
            time.sleep(0.2)  # bounded: the server reports when it listens
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
