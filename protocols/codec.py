"""The one wire codec: msgpack bytes with a schema version.

Layout: a msgpack map ``{"v": SCHEMA_VERSION, "m": <AgentMessage as JSON-compatible data>}``.
Decoding never raises anything but :class:`MalformedEnvelope` or
:class:`UnsupportedSchemaVersion`.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack
from pydantic import ValidationError

from protocols.envelope import AgentMessage
from protocols.errors import InvalidInput, MalformedEnvelope, UnsupportedSchemaVersion

__all__ = ["MAX_ENVELOPE_BYTES", "SCHEMA_VERSION", "decode", "encode"]

SCHEMA_VERSION: Final = 1
MAX_ENVELOPE_BYTES: Final = 16 * 1024 * 1024


def encode(message: AgentMessage) -> bytes:
    """Serialize ``message`` to versioned msgpack bytes.

    Raises:
        InvalidInput: the encoded envelope would exceed ``MAX_ENVELOPE_BYTES``.
    """
    data: bytes = msgpack.packb(
        {"v": SCHEMA_VERSION, "m": message.model_dump(mode="json")}, use_bin_type=True
    )
    if len(data) > MAX_ENVELOPE_BYTES:
        raise InvalidInput("envelope too large", size=len(data), limit=MAX_ENVELOPE_BYTES)
    return data


def decode(data: bytes) -> AgentMessage:
    """Parse versioned msgpack bytes into an ``AgentMessage``.

    Raises:
        MalformedEnvelope: not bytes, too large, not msgpack, not an envelope, or invalid fields.
        UnsupportedSchemaVersion: a well-formed envelope of another schema version.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedEnvelope(f"expected bytes, got {type(data).__name__}")
    if len(data) > MAX_ENVELOPE_BYTES:
        raise MalformedEnvelope("envelope too large", size=len(data), limit=MAX_ENVELOPE_BYTES)
    try:
        outer: Any = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise MalformedEnvelope(f"not a msgpack envelope: {e}") from None
    if not isinstance(outer, dict) or "v" not in outer or "m" not in outer:
        raise MalformedEnvelope("not an envelope: expected a map with keys 'v' and 'm'")
    version = outer["v"]
    if type(version) is not int or version != SCHEMA_VERSION:
        raise UnsupportedSchemaVersion(
            f"envelope schema version {version!r} is not supported (this build reads "
            f"{SCHEMA_VERSION})",
            version=version if isinstance(version, int | str) else repr(version),
            supported=[SCHEMA_VERSION],
        )
    try:
        return AgentMessage.model_validate(outer["m"])
    except ValidationError as e:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in e.errors(include_url=False)[:10]
        ]
        raise MalformedEnvelope(
            f"invalid envelope: {'; '.join(problems)}", problems=problems
        ) from None
