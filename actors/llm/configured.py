"""The aliases a pool was configured with since it started, kept across its restarts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from raytroupe.actors.endpoint import RestartStore
from raytroupe.protocols import ModelSpec

__all__ = ["ConfiguredAliases"]


class ConfiguredAliases:
    """What :meth:`LLMAdapterPool.configure` added, and which of it the operator configured.

    Args:
        store: where it is kept (under Ray: ``GcsRestartStore("llm")``); None keeps nothing.
    """

    def __init__(self, store: RestartStore | None) -> None:
        self._store = store
        self.models: dict[str, ModelSpec] = {}
        self.operator: set[str] = set()

    async def load(self) -> bool:
        """Read back what was kept; False when nothing is kept (no store)."""
        if self._store is None:
            return False
        saved = await asyncio.to_thread(self._store.load) or _Saved()
        if isinstance(saved, dict):  # kept by a pool from before operator aliases were kept
            saved = _Saved(models=saved)
        self.models = dict(saved.models)
        self.operator = set(saved.operator)
        return True

    def operators(self) -> Iterator[ModelSpec]:
        """The specs the operator configured (their hosts and key variables are trusted)."""
        return (s for a, s in self.models.items() if a in self.operator)

    def keep(self, changed: Mapping[str, ModelSpec], *, operator: bool) -> None:
        """Add ``changed`` (the operator's, when ``operator``) and keep it."""
        if operator:
            self.operator.update(changed)
        if changed:
            self.models.update(changed)
            self._save()

    def forget(self, alias: str) -> None:
        """Remove ``alias`` (kept again only if it was there)."""
        self.operator.discard(alias)
        if self.models.pop(alias, None) is not None:
            self._save()

    def _save(self) -> None:
        if self._store is not None:
            self._store.save(_Saved(dict(self.models), tuple(sorted(self.operator))))


@dataclass(frozen=True)
class _Saved:
    """What the pool keeps across restarts.

    The aliases configured since it started, and which of them the operator configured
    (their hosts and key variables are trusted).
    """

    models: dict[str, ModelSpec] = field(default_factory=dict)
    operator: tuple[str, ...] = ()
