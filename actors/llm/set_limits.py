"""Spend limits an admin sets while the cluster runs, beside the operator's configured ones.

``LLMConfig.spend_limits`` are the operator's: changed in the configuration only. An admin
puts or drops others at run time (``PUT``/``DELETE /v1/spend-limits/{name}``): each is kept
in the pool's shared state (a row per limit, SQLite or PostgreSQL) and the replica that takes
the change hands the whole set to its peers, so every replica counts the next call under it;
a replica that starts (again) reads the set back. A set limit is a window as a configured one
is (:mod:`raytroupe.protocols.spend`): what was spent before it was set counts, since every
window's account records spend only under a limit of that name.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from raytroupe.actors.llm.state import PoolState
from raytroupe.actors.llm.windows import SpendWindows
from raytroupe.protocols import Conflict, QuotaExceeded, SpendLimitNotFound
from raytroupe.protocols.spend import MAX_SPEND_LIMITS, SpendLimit, SpendLimitInfo

__all__ = ["SetLimits"]


class SetLimits:
    """The configured spend limits and those set at run time, held by ``windows``."""

    def __init__(self, configured: Mapping[str, SpendLimit], windows: SpendWindows) -> None:
        self._configured = {
            name: SpendLimitInfo(name=name, limit=limit, source="config")
            for name, limit in configured.items()
        }
        self._set: dict[str, SpendLimitInfo] = {}
        self._windows = windows

    def load(self, state: PoolState) -> None:
        """Read back the limits set at run time (a replica starting, again or anew)."""
        self.adopt(
            SpendLimitInfo(
                name=name, limit=SpendLimit.model_validate_json(spec), source="set",
                set_by=by or None, set_at=at,
            )
            for name, spec, by, at in state.set_limits()
        )  # fmt: skip

    def adopt(self, infos: Iterable[SpendLimitInfo]) -> None:
        """Hold ``infos`` as the limits set at run time (another replica's, just changed)."""
        self._set = {info.name: info for info in infos if info.source == "set"}
        self._windows.replace(
            {name: info.limit for name, info in {**self._set, **self._configured}.items()}
        )

    def put(self, name: str, limit: SpendLimit, by: str, state: PoolState | None) -> SpendLimitInfo:
        """Set (or change) the limit ``name``; it binds the next call.

        Raises:
            Conflict: ``name`` is a configured limit's (change it in the configuration).
            QuotaExceeded: as many limits as a pool holds are set already.
        """
        if name in self._configured:
            raise Conflict(
                f"spend limit {name!r} is the operator's configuration's: change it there",
                field="name",
            )
        if name not in self._set and len(self._set) >= MAX_SPEND_LIMITS:
            raise QuotaExceeded(
                f"at most {MAX_SPEND_LIMITS} spend limits are set at run time",
                quota="spend_limits", limit=MAX_SPEND_LIMITS,
            )  # fmt: skip
        info = SpendLimitInfo(name=name, limit=limit, source="set", set_by=by, set_at=time.time())
        if state is not None:
            state.set_limit(name, limit.model_dump_json(), by)
        self.adopt([*(i for n, i in self._set.items() if n != name), info])
        return info

    def delete(self, name: str, state: PoolState | None) -> SpendLimitInfo:
        """Drop the limit ``name`` set at run time; what it was.

        Raises:
            Conflict: ``name`` is a configured limit's.
            SpendLimitNotFound: no limit of that name was set.
        """
        if name in self._configured:
            raise Conflict(
                f"spend limit {name!r} is the operator's configuration's: change it there",
                field="name",
            )
        info = self._set.get(name)
        if info is None:
            raise SpendLimitNotFound(f"no spend limit {name!r} is set", name=name)
        if state is not None:
            state.set_limit(name, None)
        self.adopt(i for n, i in self._set.items() if n != name)
        return info

    def listed(self, tenant: str | None = None) -> list[SpendLimitInfo]:
        """Every limit in force (of ``tenant``, if given): the configured ones, then the set."""
        every = [*self._configured.values(), *sorted(self._set.values(), key=lambda i: i.name)]
        return [i for i in every if tenant is None or i.limit.tenant == tenant]

    def set_here(self) -> list[SpendLimitInfo]:
        """The limits set at run time, as this replica holds them (what its peers adopt)."""
        return list(self._set.values())
