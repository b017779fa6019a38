"""The session's guard of the host (``tests/support/host_guard.py``): what it sees, and that a
session whose test writes into the home fails, naming the file."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.host_guard import (
    NOTES_ENV,
    HostState,
    note_installed,
    read_notes,
    system_names,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_file_made_changed_or_removed_under_the_home_is_named_and_caches_are_not(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA owner\n")
    (home / ".bashrc").write_text("export A=1\n")
    (home / ".profile").write_text("\n")
    (home / ".pyenv" / "versions").mkdir(parents=True)
    (home / ".cache" / "raytroupe").mkdir(parents=True)
    os.symlink("/nowhere", home / ".link")
    before = HostState.take(home)

    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA owner\nssh-rsa BBBB x\n")
    (home / ".profile").unlink()
    (home / ".config" / "chromium").mkdir(parents=True)
    (home / ".bashrc").chmod(0o600)
    (home / ".link").unlink()
    os.symlink("/elsewhere", home / ".link")
    (home / ".cache" / "raytroupe" / "model.gguf").write_bytes(b"weights")  # a cache: allowed
    (home / ".pyenv" / "versions" / "3.11").mkdir()  # below a toolchain's top: not listed

    assert HostState.take(home).changes_since(before) == [
        "changed ~/.bashrc",
        "created ~/.config",
        "created ~/.config/chromium",
        "changed ~/.link",
        "removed ~/.profile",
        "changed ~/.ssh/authorized_keys",
    ]
    assert HostState.take(home).changes_since(HostState.take(home)) == []


def test_an_account_left_behind_or_one_removed_is_named(tmp_path):
    before = HostState.take(tmp_path)
    after = dataclasses.replace(
        before,
        users=(before.users - {"root"}) | {"rt1a2bn0"},
        groups=before.groups | {"rt1a2bn0"},
    )
    assert after.changes_since(before) == [
        "account rt1a2bn0 left behind",
        "account root removed",
        "group rt1a2bn0 left behind",
    ]


def test_a_system_account_made_by_a_package_the_tests_installed_is_noted_not_failed(
    tmp_path, monkeypatch
):
    assert {"account root", "group root"} <= system_names()  # ids 0: system ones
    before = HostState.take(tmp_path)
    notes = tmp_path / "notes"
    monkeypatch.setenv(NOTES_ENV, str(notes))
    system = frozenset({"account root", "group root"})  # what system_names() gave before
    monkeypatch.setattr(
        "tests.support.host_guard.system_names",
        lambda: system | {"account rtpkgd", "group rtpkgd-cert"},  # as openssh-server makes sshd
    )
    note_installed(system, "openssh-server (apt, for the ray up tier)")
    installed = read_notes(notes)
    assert installed == {
        "account rtpkgd": "openssh-server (apt, for the ray up tier)",
        "group rtpkgd-cert": "openssh-server (apt, for the ray up tier)",
    }
    after = dataclasses.replace(
        before,
        users=before.users | {"rtpkgd", "rt1a2bn0"},
        groups=before.groups | {"rtpkgd-cert"},
    )
    # the package's names are expected; a throwaway account left beside them still fails
    assert after.changes_since(before, installed) == ["account rt1a2bn0 left behind"]
    assert after.changes_since(before) == [
        "account rt1a2bn0 left behind",
        "account rtpkgd left behind",
        "group rtpkgd-cert left behind",
    ]


@pytest.mark.system  # system tier: three real pytest sessions under xdist (docs/testing.md)
def test_a_session_whose_test_writes_into_the_home_fails_naming_the_file(tmp_path):
    """A real pytest session, under xdist as the tiers run, with the guard of tests/conftest.py
    and a home of its own; the same session without the write passes."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(
        "from tests.conftest import pytest_sessionfinish, pytest_sessionstart  # noqa: F401\n"
    )
    (project / "test_writer.py").write_text(
        "import os\nfrom pathlib import Path\n\n\n"
        "def test_writes():\n"
        "    if os.environ['WRITE'] == '1':\n"
        "        (Path.home() / '.config').mkdir()\n"
        "        (Path.home() / '.config' / 'left.txt').write_text('x')\n"
    )
    home = tmp_path / "home"
    home.mkdir()

    def session(write: str, outer: Path | None = None) -> subprocess.CompletedProcess[str]:
        inherited = {k: v for k, v in os.environ.items() if k != NOTES_ENV}
        if outer is not None:  # started by a test of a session that guards the host
            inherited[NOTES_ENV] = str(outer)
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "."],
            cwd=project,
            env={**inherited, "HOME": str(home), "PYTHONPATH": str(ROOT), "WRITE": write},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    clean = session("0")
    dirty = session("1")

    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "the tests changed the host" not in clean.stdout
    assert dirty.returncode == 1, dirty.stdout + dirty.stderr
    assert "the tests changed the host" in dirty.stdout
    assert "created ~/.config/left.txt" in dirty.stdout
    assert "1 passed" in dirty.stdout  # the test itself passed: the guard failed the session
    assert list(home.iterdir()) == [home / ".config"]  # only what the writer made

    # inside another session's test, the session leaves the guarding to the outer one
    shutil.rmtree(home / ".config")
    inner = session("1", outer=tmp_path / "outer-notes")
    assert inner.returncode == 0, inner.stdout + inner.stderr
    assert "the tests changed the host" not in inner.stdout
    assert (home / ".config" / "left.txt").exists()
