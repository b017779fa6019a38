"""Which Ray a driver or the CLI joins when the caller names none: ``$RAY_ADDRESS`` as set, or
a Ray running on this machine whose GCS answers."""

import os
import socket

from ray._private import services

from raytroupe.runtime.cli._connect import resolve_address
from raytroupe.runtime.joining import answering, env_address, running_here


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


def _record(monkeypatch, tmp_path, address: str) -> None:
    """``address`` as the last ``ray start`` on this machine left it; no GCS process runs."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(address + "\n")
    # the scan for GCS processes: none here (a laptop after its Ray was killed or rebooted)
    monkeypatch.setattr(services, "find_gcs_addresses", frozenset)


def test_a_record_of_a_ray_that_stopped_is_no_ray_to_join(monkeypatch, tmp_path):
    """Ray's own ``address="auto"`` would wait without end for the GCS the record names."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed when the block ends: nothing listens there
    _record(monkeypatch, tmp_path, f"127.0.0.1:{port}")
    assert services.get_ray_address_from_environment("auto", None) == f"127.0.0.1:{port}"
    assert not answering(f"127.0.0.1:{port}")
    assert running_here() is None


def test_a_ray_whose_gcs_answers_is_joined(monkeypatch, tmp_path):
    with socket.socket() as gcs:
        gcs.bind(("127.0.0.1", 0))
        gcs.listen()
        address = f"127.0.0.1:{gcs.getsockname()[1]}"
        _record(monkeypatch, tmp_path, address)
        assert running_here() == address


def test_no_record_and_no_gcs_is_no_ray(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setattr(services, "find_gcs_addresses", frozenset)
    assert running_here() is None
