"""Tool grants: which tools each agent may call, and whom it may delegate to, in SQLite."""

from __future__ import annotations

import json
from pathlib import Path

from actors.sqlite import open_sqlite, transaction

__all__ = ["Grants"]


def _names(row: tuple[str] | None) -> frozenset[str]:
    return frozenset(json.loads(row[0])) if row else frozenset()


class Grants:
    """Which tools each agent may call, and whom it may delegate to.

    Kept in SQLite, so that a restarted sandbox still knows. A grant from before peers were
    kept has none: the agent may delegate to nobody until its team is provisioned again (as
    every job does).
    """

    def __init__(self, path: Path) -> None:
        self._db = open_sqlite(
            path,
            "CREATE TABLE IF NOT EXISTS grants (agent TEXT PRIMARY KEY, tools TEXT);"
            "CREATE TABLE IF NOT EXISTS peers (agent TEXT PRIMARY KEY, names TEXT)",
            wal=False,
        )
        self._cache: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    def set(self, agent: str, tools: list[str], peers: list[str]) -> None:
        """Replace what ``agent`` may call and whom it may ask."""
        if self._load(agent) == (frozenset(tools), frozenset(peers)):
            return  # every job re-grants its team's tools: skip the write (a sync to disk)
        with transaction(self._db):
            self._db.execute(
                "INSERT OR REPLACE INTO grants VALUES (?, ?)", (agent, json.dumps(tools))
            )
            self._db.execute(
                "INSERT OR REPLACE INTO peers VALUES (?, ?)", (agent, json.dumps(peers))
            )
        self._cache[agent] = (frozenset(tools), frozenset(peers))

    def get(self, agent: str) -> frozenset[str]:
        """The tools ``agent`` may call."""
        return self._load(agent)[0]

    def peers(self, agent: str) -> frozenset[str]:
        """The agents ``agent`` may delegate or hand off to."""
        return self._load(agent)[1]

    def _load(self, agent: str) -> tuple[frozenset[str], frozenset[str]]:
        if agent not in self._cache:
            tools = self._db.execute("SELECT tools FROM grants WHERE agent = ?", (agent,))
            peers = self._db.execute("SELECT names FROM peers WHERE agent = ?", (agent,))
            self._cache[agent] = (_names(tools.fetchone()), _names(peers.fetchone()))
        return self._cache[agent]

    def close(self) -> None:
        """Close the file."""
        self._db.close()
