"""The HTTP application's configuration and its API keys: made, hashed, read, looked up."""

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from raytroupe.deployments.config import APIConfig, APIKey
from raytroupe.deployments.keys import KeyRing, hash_key, keys_from_env, new_key
from raytroupe.protocols import ConfigError

HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


def _key(name="alice", key="rt-alice", **fields):
    return APIKey(name=name, hash=hash_key(key), tenant=fields.pop("tenant", "acme"), **fields)


# APIKey and APIConfig


def test_an_api_key_holds_a_hash():
    key = _key(admin=True, rate_limit="10/second")
    assert HASH.match(key.hash)
    assert key.admin is True
    assert key.rate_limit == "10/second"
    assert _key().admin is False
    assert _key().rate_limit is None


@pytest.mark.parametrize(
    "value",
    [
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 65,
        "sha256:" + "A" * 64,
        "sha512:" + "a" * 64,
        "a" * 64,
        "sha256:" + "g" * 64,
    ],
)
def test_a_hash_must_be_sha256_and_64_lowercase_hex_digits(value):
    with pytest.raises(ValidationError, match="sha256"):
        APIKey(name="a", hash=value, tenant="t")


def test_a_plaintext_key_given_as_hash_is_refused_without_echoing_it():
    plaintext = new_key()
    with pytest.raises(ConfigError) as caught:
        APIConfig.from_mapping({"api_keys": [{"name": "a", "hash": plaintext, "tenant": "t"}]})
    assert "api_keys.0.hash" in str(caught.value)
    assert "never the key itself" in str(caught.value)
    assert plaintext not in str(caught.value)
    assert all(plaintext not in p for p in caught.value.detail["problems"])


@pytest.mark.parametrize("tenant", ["", "has space", "slash/y", "x" * 65])
def test_a_tenant_must_be_a_plain_name(tenant):
    with pytest.raises(ValidationError, match="tenant"):
        _key(tenant=tenant)


@pytest.mark.parametrize("rate", ["fast", "2/fortnight", "", "-1/minute", "per minute"])
def test_bad_rate_strings_are_refused(rate):
    with pytest.raises(ValidationError, match="is not a rate"):
        _key(rate_limit=rate)
    with pytest.raises(ValidationError, match="is not a rate"):
        APIConfig(rate_limit=rate)


@pytest.mark.parametrize("rate", ["120/minute", "10/second", "1000 per hour", "5/2 minutes"])
def test_rate_strings_the_limits_library_reads_are_accepted(rate):
    assert APIConfig(rate_limit=rate).rate_limit == rate
    assert _key(rate_limit=rate).rate_limit == rate


def test_api_config_defaults():
    config = APIConfig()
    assert config.api_keys == ()
    assert config.api_keys_env == "TROUPE_API_KEYS"
    assert config.anonymous_tenant is None
    assert config.rate_limit == "600/minute"
    assert config.max_body_bytes == 8 * 1024 * 1024


def test_the_llm_config_comes_from_the_setting_else_the_variable_else_none():
    env = {"TROUPE_LLM_CONFIG": "~/.troupe/llm.yaml"}
    assert APIConfig().llm_config_env == "TROUPE_LLM_CONFIG"
    assert APIConfig().llm_config_path({}) is None  # the offline model
    named = APIConfig().llm_config_path(env)
    assert named == Path.home() / ".troupe" / "llm.yaml"  # `~` expanded
    explicit = APIConfig(llm_config="/etc/troupe/llm.yaml")
    assert str(explicit.llm_config_path(env)) == "/etc/troupe/llm.yaml"  # the setting wins
    assert APIConfig(llm_config_env=None).llm_config_path(env) is None
    assert APIConfig(llm_config_env="OTHER").llm_config_path(env) is None


def test_a_variable_that_names_no_file_is_a_config_error():
    with pytest.raises(ConfigError, match="TROUPE_LLM_CONFIG is set but names no LLM config"):
        APIConfig().llm_config_path({"TROUPE_LLM_CONFIG": "  "})


@pytest.mark.parametrize("size", [0, -1, 256 * 1024 * 1024 + 1])
def test_the_body_limit_is_bounded(size):
    with pytest.raises(ValidationError, match="max_body_bytes"):
        APIConfig(max_body_bytes=size)


def test_from_yaml_reads_keys_and_limits(tmp_path):
    path = tmp_path / "api.yaml"
    path.write_text(
        "api_keys:\n"
        f"  - name: ci\n    hash: {hash_key('rt-ci')}\n    tenant: build\n    admin: true\n"
        "rate_limit: 10/second\n"
        "max_body_bytes: 1024\n"
        "anonymous_tenant: local\n",
        encoding="utf-8",
    )
    config = APIConfig.from_yaml(path)
    assert [(k.name, k.tenant, k.admin) for k in config.api_keys] == [("ci", "build", True)]
    assert KeyRing(config.api_keys).find("rt-ci") == config.api_keys[0]
    assert (config.rate_limit, config.max_body_bytes) == ("10/second", 1024)
    assert config.anonymous_tenant == "local"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("max_body_bytes: 0\n", "max_body_bytes"),
        ("rate_limit: quickly\n", "rate_limit"),
        ("rate_limt: 5/minute\n", "rate_limt"),
        ("api_keys:\n  - name: a\n    hash: nope\n    tenant: t\n", "api_keys.0.hash"),
    ],
)
def test_from_yaml_names_the_bad_field_and_the_file(tmp_path, text, field):
    path = tmp_path / "api.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        APIConfig.from_yaml(path)
    assert str(path) in str(caught.value)
    assert field in str(caught.value)
    assert any(p.startswith(f"{field}:") for p in caught.value.detail["problems"])


def test_from_yaml_refuses_a_missing_file_and_a_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="cannot read API config file"):
        APIConfig.from_yaml(tmp_path / "missing.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a mapping"):
        APIConfig.from_yaml(path)


def test_from_mapping_takes_none_as_the_defaults():
    assert APIConfig.from_mapping(None) == APIConfig()


# keys


def test_new_keys_are_long_unique_and_prefixed():
    keys = {new_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(k.startswith("rt-") and len(k) >= 40 for k in keys)


def test_hash_key_is_sha256_hex_and_deterministic():
    assert hash_key("rt-x") == hash_key("rt-x")
    assert hash_key("rt-x") != hash_key("rt-y")
    assert HASH.match(hash_key("rt-x"))
    # the well-known digest of the empty string
    assert hash_key("") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_keys_from_env_reads_tenant_key_and_admin_entries():
    environ = {"KEYS": "acme:rt-one, ops:rt-two:admin ,, globex:rt-three,"}
    keys = keys_from_env("KEYS", environ)
    assert [(k.name, k.tenant, k.admin) for k in keys] == [
        ("env-1", "acme", False),
        ("env-2", "ops", True),
        ("env-4", "globex", False),
    ]
    assert [k.hash for k in keys] == [hash_key(k) for k in ("rt-one", "rt-two", "rt-three")]
    ring = KeyRing(keys)
    assert ring.find("rt-two") == keys[1]
    assert ring.find("rt-two ") is None


def test_keys_from_env_without_the_variable_or_with_only_separators_is_empty():
    assert keys_from_env("KEYS", {}) == []
    assert keys_from_env("KEYS", {"KEYS": ""}) == []
    assert keys_from_env("KEYS", {"KEYS": " , ,"}) == []


def test_keys_from_env_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("RAYTROUPE_TEST_KEYS", "acme:rt-from-env")
    assert KeyRing(keys_from_env("RAYTROUPE_TEST_KEYS")).find("rt-from-env") is not None


@pytest.mark.parametrize(
    "entry",
    [
        "rt-secret-only",
        ":rt-secret",
        "acme:",
        "acme:rt-secret:root",
        "acme:rt-secret:ADMIN",
        "acme:rt-secret:admin:extra",
    ],
)
def test_malformed_env_entries_are_config_errors_that_never_show_the_key(entry):
    environ = {"KEYS": f"ok:rt-fine,{entry}"}
    with pytest.raises(ConfigError) as caught:
        keys_from_env("KEYS", environ)
    assert "entry 2" in str(caught.value)
    assert caught.value.detail == {"variable": "KEYS", "entry": 2}
    assert "secret" not in str(caught.value)
    assert "rt-fine" not in str(caught.value)


@pytest.mark.parametrize(
    "entry",
    ["bad tenant:rt-secret", "x" * 65 + ":rt-secret", "rt-secret/key+b64:acme"],
    ids=["space-in-tenant", "tenant-too-long", "key-and-tenant-swapped"],
)
def test_an_env_entry_with_an_unusable_tenant_is_a_config_error(entry):
    # keys_from_env promises ConfigError for bad entries, never showing a key; the tenant is
    # validated by APIKey, whose ValidationError shows the input (a key, if the two were swapped)
    with pytest.raises(ConfigError) as caught:
        keys_from_env("KEYS", {"KEYS": entry})
    assert "secret" not in str(caught.value)


def test_a_key_ring_refuses_the_same_key_twice():
    with pytest.raises(ConfigError, match="'alice' and 'bob' are the same key"):
        KeyRing([_key("alice", "rt-same"), _key("bob", "rt-same", tenant="other")])


def test_a_key_ring_finds_keys_by_plaintext():
    alice, bob = _key("alice", "rt-alice"), _key("bob", "rt-bob", tenant="globex")
    ring = KeyRing([alice, bob])
    assert len(ring) == 2
    assert ring.find("rt-alice") is alice
    assert ring.find("rt-bob") is bob
    assert ring.find("rt-carol") is None
    assert ring.find(alice.hash) is None
    assert len(KeyRing([])) == 0
