"""Tool grants: which tools each agent may call, and whom it may delegate to."""

from __future__ import annotations

import json
from pathlib import Path

from raytroupe.actors.state import Migration, first, open_database, upsert

__all__ = ["Grants"]


_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS grants (agent TEXT PRIMARY KEY, tools TEXT)",
        "CREATE TABLE IF NOT EXISTS peers (agent TEXT PRIMARY KEY, names TEXT)",
    ),
)


def _names(rows: list[tuple[str]]) -> frozenset[str]:
    row = first(rows)
    return frozenset(json.loads(row[0])) if row else frozenset()


class Grants:
    """Which tools each agent may call, and whom it may delegate to.

    Kept in the state store, so that a restarted sandbox still knows (on another node too,
    when the store is the cluster's PostgreSQL). A grant from before peers were
    kept has none: the agent may delegate to nobody until its team is provisioned again (as
    every job does).
    """

    def __init__(self, location: str | Path) -> None:
        self._db = open_database(location, "grants", _MIGRATIONS)
        self._cache: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    def set(self, agent: str, tools: list[str], peers: list[str]) -> None:
        """Replace what ``agent`` may call and whom it may ask."""
        if self._load(agent) == (frozenset(tools), frozenset(peers)):
            return  # every job re-grants its team's tools: skip the write (a sync to disk)
        with self._db.transaction() as tx:
            tx.execute(
                upsert("grants", ("agent", "tools"), key=("agent",)),
                (agent, json.dumps(tools)),
            )
            tx.execute(
                upsert("peers", ("agent", "names"), key=("agent",)),
                (agent, json.dumps(peers)),
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
            self._cache[agent] = (_names(tools), _names(peers))
        return self._cache[agent]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
