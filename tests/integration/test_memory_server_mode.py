"""Chroma server mode (for clusters): `chroma run` on 127.0.0.1, the store as its client."""

from __future__ import annotations

import asyncio
import selectors
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.memory.config import MemoryConfig
from actors.memory.store import MemoryStore
from protocols import MemoryQuery, MemoryWrite

CHROMA = shutil.which("chroma", path=str(Path(sys.executable).parent))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path):
    assert CHROMA, "the chroma command comes with chromadb"
    port = _free_port()
    process = subprocess.Popen(
        [CHROMA, "run", "--path", str(tmp_path / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline, seen = time.monotonic() + 60, []
        while time.monotonic() < deadline:  # bounded: the server reports when it listens
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "listening on address" in line:
                break
        else:
            pytest.fail("chroma run did not start in 60 s")
        assert any("listening on address" in s for s in seen), "".join(seen)[-2000:]
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_the_store_uses_a_chroma_server_when_configured(chroma_server, tmp_path):
    async def main():
        config = MemoryConfig(server=chroma_server, embedding="hashing", path=tmp_path / "unused")
        store = MemoryStore(config)
        await store.on_start()
        await store.write("acme", MemoryWrite(text="The cluster's memory lives in one server."))
        await store.write("acme", MemoryWrite(text="Coffee is on the third floor."))
        hits = (await store.query("acme", MemoryQuery(query="where does memory live"))).hits
        count = await store.count("acme")
        await store.close()
        return hits, count

    hits, count = asyncio.run(main())
    assert count == 2
    assert hits[0].text == "The cluster's memory lives in one server."
    assert not (tmp_path / "unused").exists()  # nothing was written locally
