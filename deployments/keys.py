"""API keys: made, hashed and looked up. Only hashes are ever kept."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterable, Mapping
from typing import Final

from pydantic import ValidationError

from raytroupe.deployments.config import APIKey
from raytroupe.protocols import ConfigError

__all__ = ["KeyRing", "hash_key", "keys_from_env", "new_key"]

_PREFIX: Final = "rt-"


def new_key() -> str:
    """A new random API key (256 bits), to hand to a client once."""
    return _PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The form a key is stored in: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def keys_from_env(variable: str, environ: Mapping[str, str] | None = None) -> list[APIKey]:
    """Keys given in an environment variable as ``tenant:key[:admin]``, comma-separated.

    The plaintext is hashed at once and not kept.

    Raises:
        ConfigError: an entry is not ``tenant:key`` or ``tenant:key:admin`` (the message
            names the entry's position, never its key).
    """
    raw = (os.environ if environ is None else environ).get(variable, "")
    keys = []
    for n, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        fields = entry.split(":")
        admin = len(fields) == 3 and fields[2] == "admin"  # noqa: PLR2004 - tenant:key:admin
        if len(fields) not in (2, 3) or not all(fields[:2]) or (len(fields) == 3 and not admin):  # noqa: PLR2004
            raise ConfigError(
                f"${variable}: entry {n} must be 'tenant:key' or 'tenant:key:admin'",
                variable=variable,
                entry=n,
            )
        try:
            key = APIKey(name=f"env-{n}", hash=hash_key(fields[1]), tenant=fields[0], admin=admin)
        except ValidationError:  # its message would quote the entry, key and all
            raise ConfigError(
                f"${variable}: entry {n} has an unusable tenant (letters, digits, '_.-', "
                "at most 64)",
                variable=variable,
                entry=n,
            ) from None
        keys.append(key)
    return keys


class KeyRing:
    """The API keys a server accepts, by hash."""

    def __init__(self, keys: Iterable[APIKey]) -> None:
        self._by_hash: dict[str, APIKey] = {}
        for key in keys:
            if key.hash in self._by_hash:
                raise ConfigError(
                    f"API keys {self._by_hash[key.hash].name!r} and {key.name!r} are the same key"
                )
            self._by_hash[key.hash] = key

    def __len__(self) -> int:
        return len(self._by_hash)

    def find(self, presented: str) -> APIKey | None:
        """The key matching ``presented``, or None."""
        return self._by_hash.get(hash_key(presented))
