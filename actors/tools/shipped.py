"""Function tools shipped by drivers: kept by content digest, loaded where they are called.

A driver's ``@raytroupe.tool`` functions travel to every sandbox pickled by value; each is
known by the SHA-256 of its bytes. The bytes are kept in the sandboxes' state store (the
cluster's PostgreSQL, or the node's SQLite), so a sandbox restarted elsewhere loads them
again when a granted agent calls one. A team says which digest each of its function names
is (``TeamSpec.functions``): two teams may ship different functions of one name.

Only a driver ships code (it holds the cluster already): nothing reachable over HTTP calls
:meth:`ShippedTools.put`, and the API refuses teams that name shipped functions.
"""

from __future__ import annotations

import base64
from concurrent.futures import Executor
from pathlib import Path
from typing import Final

from ray import cloudpickle

from raytroupe.actors.state import Migration, first, open_database, upsert
from raytroupe.actors.tools.builtins import Runner
from raytroupe.actors.tools.functions import load_shipped
from raytroupe.protocols import ConfigError, ToolDef
from raytroupe.protocols.functions import ShippedFunction, digest_of

__all__ = ["MAX_SHIPPED_BYTES", "ShippedTools", "digest_of"]

MAX_SHIPPED_BYTES: Final = 4_000_000
"""The largest pickled function a sandbox takes (a function, not its data)."""

_MIGRATIONS: tuple[Migration, ...] = (
    ("CREATE TABLE IF NOT EXISTS shipped (digest TEXT PRIMARY KEY, name TEXT, payload TEXT)",),
)


class ShippedTools:
    """The shipped functions a sandbox knows, by digest; loaded on first use."""

    def __init__(self, location: str | Path, executor: Executor) -> None:
        self._db = open_database(location, "shipped", _MIGRATIONS)
        self._executor = executor
        self._loaded: dict[str, tuple[ToolDef, Runner]] = {}

    def put(self, name: str, digest: str, payload: bytes) -> ToolDef:
        """Keep and load one shipped function; its definition.

        Raises:
            ConfigError: the bytes are not the digest's, too large, not a shipped function
                of that name, or the function has no usable schema.
        """
        if len(payload) > MAX_SHIPPED_BYTES:
            raise ConfigError(
                f"function tool {name!r} is {len(payload)} bytes pickled; the most is "
                f"{MAX_SHIPPED_BYTES} (ship the function, not its data)",
                tool=name,
            )
        if digest_of(payload) != digest:
            raise ConfigError(f"function tool {name!r}: its bytes are not {digest}", tool=name)
        definition = self._load(name, digest, payload)[0]
        with self._db.transaction() as tx:
            encoded = base64.b64encode(payload).decode("ascii")
            tx.execute(
                upsert("shipped", ("digest", "name", "payload"), key=("digest",)),
                (digest, name, encoded),
            )
        return definition

    def get(self, digest: str) -> tuple[ToolDef, Runner] | None:
        """The loaded tool of ``digest`` (from the store after a restart); None if unknown."""
        if digest not in self._loaded:
            row = first(self._db.execute("SELECT name, payload FROM shipped WHERE digest = ?",
                                         (digest,)))  # fmt: skip
            if row is None:
                return None
            self._load(str(row[0]), digest, base64.b64decode(str(row[1])))
        return self._loaded[digest]

    def _load(self, name: str, digest: str, payload: bytes) -> tuple[ToolDef, Runner]:
        if digest not in self._loaded:
            try:
                shipped = cloudpickle.loads(payload)
            except Exception as exc:  # noqa: BLE001 - whatever unpickling the driver's code raises
                raise ConfigError(
                    f"function tool {name!r} does not load here: {type(exc).__name__}: {exc} "
                    "(a module it needs may be missing on this node)",
                    tool=name,
                ) from None
            if not isinstance(shipped, ShippedFunction) or shipped.name != name:
                raise ConfigError(f"{digest} is not the function tool {name!r}", tool=name)
            self._loaded[digest] = load_shipped(shipped, self._executor, digest)
        return self._loaded[digest]

    def close(self) -> None:
        """Close the store."""
        self._db.close()
