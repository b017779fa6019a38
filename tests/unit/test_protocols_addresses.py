import random
import re
from collections import Counter

import pytest
from pydantic import TypeAdapter, ValidationError

from raytroupe.protocols import (
    SYSTEM_ADDRESSES,
    Address,
    AddressKind,
    InvalidAddress,
    Name,
    ParsedAddress,
    parse_address,
    router_shard,
)
from raytroupe.protocols.addresses import NAME_PATTERN, reserved
from raytroupe.protocols.team import AgentSpec

ADDRESS = TypeAdapter(Address)
NAME = TypeAdapter(Name)

VALID = [
    ("researcher-1", AddressKind.DIRECT, "researcher-1"),
    ("orchestrator", AddressKind.DIRECT, "orchestrator"),
    ("a", AddressKind.DIRECT, "a"),
    ("7", AddressKind.DIRECT, "7"),
    ("A_b.c-9", AddressKind.DIRECT, "A_b.c-9"),
    ("x" * 64, AddressKind.DIRECT, "x" * 64),
    ("role:writer", AddressKind.ROLE, "writer"),
    ("role:" + "r" * 64, AddressKind.ROLE, "r" * 64),
    ("topic:news.sports", AddressKind.TOPIC, "news.sports"),
    ("topic:0", AddressKind.TOPIC, "0"),
    ("role", AddressKind.DIRECT, "role"),
    ("topic", AddressKind.DIRECT, "topic"),
]

INVALID = [
    "",
    "role:",
    "topic:",
    ":x",
    "a b",
    " a",
    "a ",
    "x" * 65,
    "role:" + "x" * 65,
    "queue:x",
    "ROLE:x",
    "Role:x",
    "role:role:x",
    "role:topic:x",
    "topic:a b",
    "-a",
    ".a",
    "_a",
    "role:-a",
    "a/b",
    "agent/a",
    "a:b",
    "é",
    "naïve",
    "a\tb",
    "a\nb",
    "\na",
    "a*",
    "a@b",
]


@pytest.mark.parametrize(("address", "kind", "name"), VALID)
def test_parse_valid_address(address, kind, name):
    parsed = parse_address(address)
    assert parsed == ParsedAddress(kind, name)
    assert parsed.kind is kind
    assert parsed.name == name


@pytest.mark.parametrize(("address", "kind", "name"), VALID)
def test_address_type_accepts_valid_address(address, kind, name):
    assert ADDRESS.validate_python(address) == address


@pytest.mark.parametrize("address", INVALID)
def test_parse_rejects_invalid_address(address):
    with pytest.raises(InvalidAddress, match="invalid address"):
        parse_address(address)


@pytest.mark.parametrize("address", INVALID)
def test_address_type_rejects_invalid_address(address):
    with pytest.raises(ValidationError):
        ADDRESS.validate_python(address)


@pytest.mark.parametrize("value", [None, 1, 1.5, ["a"], {"a": 1}])
def test_address_type_rejects_non_strings(value):
    with pytest.raises(ValidationError):
        ADDRESS.validate_python(value)


@pytest.mark.parametrize("name", ["a", "writer-1", "x" * 64, "A.b_c-d"])
def test_name_type_accepts_bare_names(name):
    assert NAME.validate_python(name) == name


@pytest.mark.parametrize("name", ["", "role:writer", "topic:x", "x" * 65, "a b", "-a", "a/b"])
def test_name_type_rejects_prefixed_or_bad_names(name):
    with pytest.raises(ValidationError):
        NAME.validate_python(name)


@pytest.mark.parametrize("name", sorted(SYSTEM_ADDRESSES))
def test_system_addresses_are_direct_valid_names(name):
    assert NAME.validate_python(name) == name
    assert parse_address(name) == ParsedAddress(AddressKind.DIRECT, name)


def test_system_addresses_are_the_documented_set():
    assert {"router", "orchestrator", "llm", "driver", "memory", "tools"} == SYSTEM_ADDRESSES


def test_address_kind_values():
    assert {k.value for k in AddressKind} == {"direct", "role", "topic"}
    assert AddressKind("role") is AddressKind.ROLE


def test_name_length_boundaries_property():
    for length in range(70):
        name = "n" * length
        ok = 1 <= length <= 64
        assert (re.fullmatch(NAME_PATTERN, name) is not None) is ok
        for address in (name, f"role:{name}", f"topic:{name}"):
            if ok:
                assert parse_address(address).name == name
            else:
                with pytest.raises(InvalidAddress, match="invalid address"):
                    parse_address(address)


def test_parse_address_agrees_with_address_type_property():
    rng = random.Random(20240601)  # noqa: S311 - a seeded, reproducible test input
    alphabet = "aZ09_.-: /é\t@"
    prefixes = ["", "role:", "topic:", "queue:", ":"]
    for _ in range(2000):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 70)))
        address = rng.choice(prefixes) + body
        try:
            ADDRESS.validate_python(address)
        except ValidationError:
            type_ok = False
        else:
            type_ok = True
        try:
            parsed = parse_address(address)
        except InvalidAddress:
            parse_ok = False
        else:
            parse_ok = True
            prefix = "" if parsed.kind is AddressKind.DIRECT else f"{parsed.kind.value}:"
            assert prefix + parsed.name == address
        assert type_ok is parse_ok, address


@pytest.mark.parametrize("address", ["router\n", "role:writer\n", "topic:news\n"])
def test_parse_address_rejects_trailing_newline(address):
    with pytest.raises(ValidationError):
        ADDRESS.validate_python(address)
    with pytest.raises(InvalidAddress, match="invalid address"):
        parse_address(address)


@pytest.mark.parametrize("name", ["tools-0", "tools-17", "llm-0", "llm-3", "router", "llm"])
def test_an_agent_cannot_take_a_system_actors_name(name):
    """An inline team's agent named tools-0 would replace the sandbox's router registration."""
    assert reserved(name)
    with pytest.raises(ValidationError, match="reserved for a system actor"):
        AgentSpec(name=name, role="worker")


@pytest.mark.parametrize("name", ["tools-x", "llm-0a", "my-tools-0", "llama-0", "tools"[:4]])
def test_names_that_only_look_alike_stay_free(name):
    assert not reserved(name)
    assert AgentSpec(name=name, role="worker").name == name


def test_a_sender_has_one_router_shard_and_senders_spread():
    assert router_shard("anyone", 1) == 0
    senders = [f"agent-{n}" for n in range(4000)]
    spread = Counter(router_shard(s, 4) for s in senders)
    assert set(spread) == {0, 1, 2, 3}
    assert min(spread.values()) > 800  # ~1000 each
    assert all(router_shard(s, 4) == router_shard(s, 4) for s in senders[:50])
    # CRC-32, not hash(): the same in every process whatever PYTHONHASHSEED is
    assert router_shard("researcher", 8) == 6
    # numbered system actors take the shards in turn
    assert [router_shard(f"orchestrator-{k}", 3) for k in (1, 2, 3)] == [1, 2, 0]
    assert router_shard("orchestrator", 3) == 0
    assert [router_shard(f"llm-{k}", 2) for k in range(4)] == [0, 1, 0, 1]
