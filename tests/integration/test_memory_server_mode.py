"""Chroma server mode (for clusters): `chroma run` on 127.0.0.1, the store as its client."""

from __future__ import annotations

import asyncio

import pytest

from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.protocols import MemoryQuery, MemoryWrite
from tests.support.chroma import chroma_server


@pytest.fixture
def chroma(tmp_path):
    with chroma_server(tmp_path / "db") as address:
        yield address


def test_the_store_uses_a_chroma_server_when_configured(chroma, tmp_path):
    async def main():
        config = MemoryConfig(server=chroma, embedding="hashing", path=tmp_path / "unused")
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
