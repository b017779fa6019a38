"""The `ray up` tier changes no account it did not make.

On an Ubuntu cloud VM the owner logs in as ``ubuntu``, the name the cluster configs give as
``ssh_user``. The SSH nodes of the cluster tier (tests/support/ssh_nodes.py) are logged in as
that name, but each is a throwaway account of its own with a fresh random name, seen as
``ssh_user`` only inside its sshd's mount namespace. Here the host has its own ``ubuntu`` (made
by this test with a known key, password hash and ``.bashrc`` when the host has none, and removed
after; a real one is only read): after the nodes have been made, logged into and taken down,
its rows in /etc/passwd, /etc/shadow, /etc/group and /etc/gshadow and every file of its home are
byte for byte as before, and nothing of the nodes is left.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ssh_nodes import ssh_nodes

LOGIN = "ubuntu"
KNOWN_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK6b3vQ0b0a1Zc2hvc3Qta2V5LW9mLXRoZS1vd25lcg owner@laptop\n"
)
KNOWN_HASH = (  # `openssl passwd -6 -salt raytroupeknown the-owner-s-password`
    "$6$raytroupeknown$7PWRpFKyBDml8R23IrNSxgB.YvQ8xNHMB4s4o9QTkeMvg8ybYkg2mzrewuOkauLRbMW0Kdv6"
    "Q4ydvpnggBBHF1"
)
KNOWN_BASHRC = "# the owner's own shell set-up\nexport EDITOR=vi\n"
ACCOUNT_FILES = ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow")


@pytest.fixture
def owner() -> Iterator[pwd.struct_passwd]:
    """The host's ``ubuntu``: this host's own, or one made here as a cloud image has it."""
    try:
        existing = pwd.getpwnam(LOGIN)
    except KeyError:
        existing = None
    if existing is not None:
        yield existing
        return
    made = ["--create-home", "--shell", "/bin/bash", "--password", KNOWN_HASH, "--user-group"]
    subprocess.run(["/usr/sbin/useradd", *made, LOGIN], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(LOGIN)
        home = Path(entry.pw_dir)
        (home / ".ssh").mkdir(mode=0o700)
        (home / ".ssh" / "authorized_keys").write_text(KNOWN_KEY)
        (home / ".ssh" / "authorized_keys").chmod(0o600)
        (home / ".bashrc").write_text(KNOWN_BASHRC)
        for path in (home / ".ssh", home / ".ssh" / "authorized_keys", home / ".bashrc"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        yield entry
    finally:
        subprocess.run(["/usr/sbin/userdel", "--remove", LOGIN], capture_output=True, check=False)


def _snapshot(entry: pwd.struct_passwd) -> dict[str, object]:
    """Every row that names the account, and every file under its home: mode, owner, bytes."""
    rows = {
        name: [row for row in Path(name).read_text().splitlines() if row.split(":")[0] == LOGIN
               or LOGIN in row.split(":")[-1].split(",")]
        for name in ACCOUNT_FILES if Path(name).exists()
    }  # fmt: skip
    files: dict[str, tuple[int, int, int, bytes | int]] = {}
    home = Path(entry.pw_dir)
    for path in [home, *sorted(home.rglob("*"))]:
        info = path.lstat()
        content: bytes | int = info.st_size
        if path.is_file() and not path.is_symlink() and info.st_size <= 1 << 20:
            content = path.read_bytes()
        files[str(path)] = (info.st_mode, info.st_uid, info.st_gid, content)
    return {"rows": rows, "files": files}


def test_the_cluster_tier_leaves_an_existing_ubuntu_account_byte_for_byte(
    owner: pwd.struct_passwd, tmp_path: Path
) -> None:
    before = _snapshot(owner)
    with ssh_nodes(tmp_path / "nodes", ssh_user=LOGIN, count=2) as made:
        accounts = [node.account for node in made.nodes]
        homes = set()
        for node in made.nodes:
            ran = made.ssh(node, 'id -un; id -u; id -G; echo "$HOME"; head -1 ~/.bashrc')
            log = tmp_path / "nodes" / f"sshd.{made.nodes.index(node)}.log"
            assert ran.returncode == 0, (ran.stderr, log.read_text())
            name, uid, groups, home, first = ran.stdout.splitlines()
            assert name == LOGIN  # the launcher sees `ubuntu` ...
            assert int(uid) == node.uid != owner.pw_uid  # ... which is the node's own account
            assert groups.split() == [str(pwd.getpwuid(node.uid).pw_gid)]  # and no host groups
            assert home != owner.pw_dir
            assert first == f"export RAY_TMPDIR={node.ray_tmpdir}"
            homes.add(home)
        assert len(homes) == 1  # one home path on every node, as cluster_synced_files need
    assert _snapshot(owner) == before
    for account in accounts:
        with pytest.raises(KeyError):
            pwd.getpwnam(account)
    assert not Path(homes.pop()).exists()
