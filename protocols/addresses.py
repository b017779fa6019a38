"""Addresses: who an envelope is for.

An address is one of

- ``<name>``        one actor: an agent (``researcher-1``) or a system actor (``orchestrator``);
- ``role:<name>``   any agent holding that role, load-balanced by the router;
- ``topic:<name>``  every subscriber of a topic (broadcast).

Names are 1-64 characters of letters, digits, ``_``, ``.`` and ``-``, starting with a letter
or digit, so that they are safe in Ray actor names (``agent/<name>``), logs and URLs.
"""

from __future__ import annotations

import re
import zlib
from enum import StrEnum
from typing import Annotated, Final, NamedTuple

from pydantic import StringConstraints

from raytroupe.protocols.errors import InvalidAddress

__all__ = [
    "LLM_POOL",
    "NAME_PATTERN",
    "SYSTEM_ADDRESSES",
    "Address",
    "AddressKind",
    "Name",
    "ParsedAddress",
    "job_shard",
    "orchestrator_address",
    "parse_address",
    "reserved",
    "router_shard",
]

NAME_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"
_ADDRESS_RE: Final = re.compile(rf"(?:(role|topic):)?({NAME_PATTERN})")

Name = Annotated[str, StringConstraints(pattern=rf"^{NAME_PATTERN}$")]
"""A bare actor, role or topic name."""

Address = Annotated[str, StringConstraints(pattern=rf"^(?:(?:role|topic):)?{NAME_PATTERN}$")]
"""A validated recipient or sender address (see the module docstring)."""

SYSTEM_ADDRESSES: Final = frozenset({"router", "orchestrator", "llm", "driver", "memory", "tools"})
"""Addresses of system actors and the driver; agents may not take these names."""

LLM_POOL: Final = "role:llm"
"""Where model calls go: the least busy replica of the LLM pool (addresses ``llm-0``,
``llm-1``, ...: actors ``llm/0``, ``llm/1``, ...)."""

_REPLICA_RE: Final = re.compile(r"(?:llm|tools|orchestrator)-[0-9]+")
"""Names of system actors that come in numbers: LLM pool replicas, tool sandboxes and
orchestrator shards."""


def reserved(name: str) -> bool:
    """Whether ``name`` belongs to a system actor (an agent taking it would replace it)."""
    return name in SYSTEM_ADDRESSES or _REPLICA_RE.fullmatch(name) is not None


def router_shard(sender: str, shards: int) -> int:
    """Which of ``shards`` router shards routes the envelopes ``sender`` sends.

    Each actor sends through one shard, whatever it sends to: a client's batch of requests
    (one Ray call) stays one batch, its envelopes reach each recipient in the order it sent
    them, and an envelope it sends again meets the shard that saw it first (de-duplication
    stays exact). Senders spread over the shards, and so does role traffic (every model call
    goes to ``role:llm``). System actors that come in numbers take them in turn (``n`` of
    ``orchestrator-<n>``, ``llm-<n>``, ``tools-<n>``; ``orchestrator`` is shard 0 of its
    kind); any other sender goes by CRC-32 of its name, not ``hash()``: every process must
    agree.
    """
    if shards <= 1:
        return 0
    if sender == "orchestrator":
        return 0
    numbered = _REPLICA_RE.fullmatch(sender)
    if numbered is not None:
        return int(sender.rsplit("-", 1)[1]) % shards
    return zlib.crc32(sender.encode()) % shards


_SHARD_DIGITS: Final = 4
"""An orchestrator shard number has at most this many digits (config caps shards at 64)."""


def job_shard(job_id: str, shards: int) -> int:
    """The orchestrator shard (of ``shards``) that owns the job ``job_id``.

    A job's id names its shard: ``job-<hex>-<k>`` is shard ``k``'s, ``job-<hex>`` shard 0's
    (every id of one shard, and of earlier releases). An id naming a shard that does not
    exist (a cluster now running fewer shards, or a made-up id) belongs to shard 0, which
    resumes such jobs, or answers that there is no such job.
    """
    head, _, tail = job_id.rpartition("-")
    if not head.startswith("job-") or not tail.isdigit() or len(tail) > _SHARD_DIGITS:
        return 0
    shard = int(tail)
    return shard if shard < shards else 0


def orchestrator_address(job_id: str | None) -> str:
    """Where envelopes about the job ``job_id`` go: the router address of its shard."""
    shard = 0 if job_id is None else job_shard(job_id, 10_000)
    return "orchestrator" if shard == 0 else f"orchestrator-{shard}"


class AddressKind(StrEnum):
    """How the router resolves an address."""

    DIRECT = "direct"
    ROLE = "role"
    TOPIC = "topic"


class ParsedAddress(NamedTuple):
    """An address split into its kind and name."""

    kind: AddressKind
    name: str


def parse_address(address: str) -> ParsedAddress:
    """Split ``address`` into kind and name.

    Raises:
        InvalidAddress: the address is not of one of the three forms.
    """
    match = _ADDRESS_RE.fullmatch(address)
    if match is None:
        raise InvalidAddress(
            f"invalid address {address!r}: expected NAME, role:NAME or topic:NAME", address=address
        )
    prefix, name = match.groups()
    if prefix is None:
        return ParsedAddress(AddressKind.DIRECT, name)
    return ParsedAddress(AddressKind(prefix), name)
