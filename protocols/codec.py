"""The one wire codec: msgpack bytes with a schema version.

Layout (version 2): a msgpack map ``{"v": 2, "h": <header>, "p": <payload bytes>}``: the
envelope's routing and context fields as a map, and its payload as msgpack bytes of its own.
A router can so raise ``hops`` and pass an envelope on without encoding its payload again
(:meth:`Routed.with_hop`). Version 1 (``{"v": 1, "m": <AgentMessage>}``) is still read.
Decoding never raises anything but :class:`MalformedEnvelope` or
:class:`UnsupportedSchemaVersion`.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack
from pydantic import ValidationError

from raytroupe.protocols.envelope import AgentMessage
from raytroupe.protocols.errors import InvalidInput, MalformedEnvelope, UnsupportedSchemaVersion

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "Routed",
    "decode",
    "decode_routed",
    "encode",
]

SCHEMA_VERSION: Final = 2
READABLE_VERSIONS: Final = (1, 2)
MAX_ENVELOPE_BYTES: Final = 16 * 1024 * 1024

_UNPACK_ERRORS: Final = (
    ValueError,
    TypeError,
    msgpack.ExtraData,
    msgpack.FormatError,
    msgpack.StackError,
)


def _pack(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def _sized(data: bytes) -> bytes:
    if len(data) > MAX_ENVELOPE_BYTES:
        raise InvalidInput("envelope too large", size=len(data), limit=MAX_ENVELOPE_BYTES)
    return data


def encode(message: AgentMessage) -> bytes:
    """Serialize ``message`` to versioned msgpack bytes.

    Raises:
        InvalidInput: the encoded envelope would exceed ``MAX_ENVELOPE_BYTES``.
    """
    header = message.model_dump(mode="json", exclude={"payload"})
    payload = _pack(message.payload.model_dump(mode="json"))
    return _sized(_pack({"v": SCHEMA_VERSION, "h": header, "p": payload}))


class Routed:
    """An envelope as a router holds it: the validated message, and its wire parts."""

    __slots__ = ("_header", "_payload", "message")

    def __init__(
        self, message: AgentMessage, header: dict[str, Any] | None, payload: bytes | None
    ) -> None:
        self.message = message
        self._header = header
        self._payload = payload

    def with_hop(self) -> bytes:
        """The envelope's bytes, routed once more (its payload bytes are reused as they are)."""
        if self._header is None or self._payload is None:  # read from version 1
            return encode(self.message.with_hop())
        header = {**self._header, "hops": self.message.hops + 1}
        return _pack({"v": SCHEMA_VERSION, "h": header, "p": self._payload})


def decode(data: bytes) -> AgentMessage:
    """Parse versioned msgpack bytes into an ``AgentMessage``.

    Raises:
        MalformedEnvelope: not bytes, too large, not msgpack, not an envelope, or invalid fields.
        UnsupportedSchemaVersion: a well-formed envelope of another schema version.
    """
    return decode_routed(data).message


def decode_routed(data: bytes) -> Routed:
    """Parse envelope bytes, keeping the parts a router passes on (see :class:`Routed`).

    Raises:
        MalformedEnvelope, UnsupportedSchemaVersion: as :func:`decode`.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedEnvelope(f"expected bytes, got {type(data).__name__}")
    if len(data) > MAX_ENVELOPE_BYTES:
        raise MalformedEnvelope("envelope too large", size=len(data), limit=MAX_ENVELOPE_BYTES)
    outer = _unpack(data, "a msgpack envelope")
    if not isinstance(outer, dict) or "v" not in outer:
        raise MalformedEnvelope("not an envelope: expected a map with a version 'v'")
    version = outer["v"]
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise UnsupportedSchemaVersion(
            f"envelope schema version {version!r} is not supported (this build reads "
            f"{', '.join(map(str, READABLE_VERSIONS))})",
            version=version if isinstance(version, int | str) else repr(version),
            supported=list(READABLE_VERSIONS),
        )
    if version == 1:
        if set(outer) != {"v", "m"}:
            raise MalformedEnvelope("not an envelope: version 1 has keys 'v' and 'm'")
        return Routed(_validated(outer["m"]), None, None)
    header, payload = outer.get("h"), outer.get("p")
    if set(outer) != {"v", "h", "p"} or not isinstance(header, dict):
        raise MalformedEnvelope("not an envelope: expected keys 'v', 'h' (a map) and 'p'")
    if not isinstance(payload, bytes):
        raise MalformedEnvelope("not an envelope: the payload 'p' must be msgpack bytes")
    if "payload" in header:
        raise MalformedEnvelope("not an envelope: the header carries a payload")
    message = _validated({**header, "payload": _unpack(payload, "a msgpack payload")})
    return Routed(message, header, payload)


def _unpack(data: bytes | bytearray | memoryview, what: str) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True)
    except _UNPACK_ERRORS as e:
        raise MalformedEnvelope(f"not {what}: {e}") from None


def _validated(inner: Any) -> AgentMessage:
    try:
        return AgentMessage.model_validate(inner)
    except ValidationError as e:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in e.errors(include_url=False)[:10]
        ]
        raise MalformedEnvelope(
            f"invalid envelope: {'; '.join(problems)}", problems=problems
        ) from None
