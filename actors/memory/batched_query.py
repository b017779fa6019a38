"""Chroma queries that arrive in one loop turn and ask alike, run as one ``query`` call.

Agents recalling before their model calls query together; those that ask the same
collection the same way (filter, result count) are embedded and searched in one call. The
call runs inline, not in a thread: measured here, a thread hop cost ~1 ms a query, more than
the overlap it bought (a top-5 query takes ~2 ms).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

__all__ = ["BatchedQueries", "Found"]

Found = tuple[list[str], list[Any], list[Any], list[float]]
"""One query's ids, documents, metadatas and distances, best first."""


class BatchedQueries:
    """The queries of one owner (the memory store, the knowledge bases) waiting for Chroma."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str, int], _Batch] = {}

    async def query(
        self, collection: Collection, text: str, n: int, where: dict[str, Any] | None = None
    ) -> Found:
        """Chroma's nearest ``n`` to ``text`` in ``collection`` (those that pass ``where``)."""
        key = (collection.name, json.dumps(where, sort_keys=True), n)
        batch = self._waiting.get(key)
        if batch is None:
            batch = self._waiting[key] = _Batch(collection, where, n)
            asyncio.get_running_loop().call_soon(self._run, key)
        return await batch.add(text)

    def _run(self, key: tuple[str, str, int]) -> None:
        self._waiting.pop(key).run()


class _Batch:
    """Queries waiting for one Chroma call: same collection, filter and result count."""

    def __init__(self, collection: Collection, where: dict[str, Any] | None, n: int) -> None:
        self.collection, self.where, self.n = collection, where, n
        self.texts: list[str] = []
        self._waiting: list[asyncio.Future[Found]] = []

    def add(self, text: str) -> asyncio.Future[Found]:
        future: asyncio.Future[Found] = asyncio.get_running_loop().create_future()
        self.texts.append(text)
        self._waiting.append(future)
        return future

    def run(self) -> None:
        try:
            found = self.collection.query(
                query_texts=self.texts,
                n_results=self.n,
                where=self.where,
                include=["documents", "metadatas", "distances"],
            )
        except Exception as exc:  # noqa: BLE001 - each waiting query gets the error
            for future in self._waiting:
                if not future.done():
                    future.set_exception(exc)
            return
        empty: list[list[Any]] = [[] for _ in self.texts]
        ids: list[list[str]] = found["ids"]
        texts: list[list[Any]] = list(found.get("documents") or empty)
        metadatas: list[list[Any]] = list(found.get("metadatas") or empty)
        distances: list[list[float]] = list(found.get("distances") or empty)
        for i, future in enumerate(self._waiting):
            if not future.done():  # its caller may have been cancelled meanwhile
                future.set_result((ids[i], texts[i], metadatas[i], distances[i]))
