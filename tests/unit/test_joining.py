"""Which Ray a driver or the CLI joins when the caller names none: ``$RAY_ADDRESS`` as set."""

import os

from raytroupe.runtime.cli._connect import resolve_address
from raytroupe.runtime.joining import env_address


def test_a_blank_ray_address_is_no_address_and_leaves_the_environment(monkeypatch):
    """``RAY_ADDRESS= python job.py``: Ray itself refuses "" ("Invalid address format")."""
    for blank in ("", "  "):
        monkeypatch.setenv("RAY_ADDRESS", blank)
        assert env_address() is None
        assert "RAY_ADDRESS" not in os.environ  # Ray reads it too, and its processes


def test_a_set_ray_address_is_the_address_and_an_unset_one_none(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert env_address() == "127.0.0.1:6379"
    assert os.environ["RAY_ADDRESS"] == "127.0.0.1:6379"
    monkeypatch.delenv("RAY_ADDRESS")
    assert env_address() is None


def test_the_cli_with_a_blank_ray_address_and_no_up_joins_nothing_named(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_ADDRESS", "")
    assert resolve_address(None, tmp_path / "state") is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert resolve_address(None, tmp_path / "state") == "10.0.0.5:6379"
    assert resolve_address("127.0.0.1:1234", tmp_path / "state") == "127.0.0.1:1234"
