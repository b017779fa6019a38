"""Machines for ``ray up`` on one host: real sshd servers on loopback, one account per "node".

A cluster launcher needs machines it reaches over SSH as ``auth.ssh_user``. Here each node is
an sshd bound to its own loopback address (127.0.0.2, 127.0.0.3, ...) on port 22, with a
throwaway host key, a throwaway client key and a throwaway non-root account of its own, with a
fresh random name (``rt<hex>n<k>``): the test never logs in as, writes to, or changes an account
it did not make, whatever ``ssh_user`` is called and whether or not the host has one by that name
(an Ubuntu VM's own ``ubuntu`` account stays as it was).

Each node's sshd runs in a mount namespace whose ``/etc/passwd``, ``/etc/shadow`` and
``/etc/group`` are copies in which ``ssh_user`` is that node's account: its uid and gid, no
password (``*``), no supplementary groups, and a home path shared by every node (a fresh
directory under the temp dir) on which the account's own home is mounted. As on real machines,
the launcher sees one user name and one home path everywhere (Ray's ``cluster_synced_files``
rely on it), and the nodes' Rays are different Unix users with their own files: ``ray stop``
on one cannot stop another's. Nothing may add or remove an account while the nodes run: the
host replacing /etc/passwd takes the namespaces' copies away (the tests of this tier make none).

Each account's ``~/.bashrc`` starts with ``RAY_TMPDIR`` (each node its own Ray temp dir, as
separate machines have). Its sshd, and so the node, has this process's open-files limits.
Packages (openssh-server, rsync) come from apt when missing; needs root. Everything is undone
on exit: sshd stopped by PID, processes still left under the accounts killed by PID (the test
asserts there are none first, with :meth:`Node.processes`), the accounts deleted with their
homes, the shared home path removed.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.support.apt import ensure_programs

SSHD = "/usr/sbin/sshd"
PORT = 22
START_S = 20.0
STOP_S = 10.0


@dataclass(frozen=True)
class Node:
    """One machine: where its sshd listens and the account its logins become."""

    address: str
    account: str
    uid: int
    home: Path
    ray_tmpdir: Path
    before: frozenset[int]
    """PIDs the account ran when the node was made: not the test's."""

    def processes(self) -> dict[int, str]:
        """``{pid: command line}`` of the account's processes since the node was made."""
        return {pid: cmd for pid, cmd in _processes_of(self.uid).items() if pid not in self.before}


@dataclass(frozen=True)
class Nodes:
    """The machines, and the key the launcher logs in with."""

    ssh_user: str
    key: Path
    nodes: tuple[Node, ...]
    login_home: Path
    """``ssh_user``'s home path on every node, as the nodes' processes see it (each node's own
    home is mounted there)."""

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> tuple[Node, ...]:
        return self.nodes[1:]

    def ssh(
        self, node: Node, command: str, *, stdin: str = "", timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """``command`` run on ``node`` over SSH as ``ssh_user``, logged in as the launcher is
        (on a worker, that is its own account, home and files), with ``stdin`` as its input."""
        options = ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
                   "-o", "StrictHostKeyChecking=no",
                   "-o", "UserKnownHostsFile=/dev/null"]  # fmt: skip
        return subprocess.run(
            [_program("ssh"), "-i", str(self.key), *options, f"{self.ssh_user}@{node.address}",
             command],
            input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip


@contextmanager
def ssh_nodes(root: Path, ssh_user: str, count: int = 2) -> Iterator[Nodes]:
    """``count`` nodes on 127.0.0.2.. reachable as ``ssh_user`` with the yielded key."""
    if os.geteuid() != 0:
        raise RuntimeError("the ray up tier makes accounts and runs sshd: it needs root")
    ensure_programs(
        {SSHD: "openssh-server", "rsync": "rsync", "ssh": "openssh-client"},
        purpose="the ray up tests",
    )
    # from 127.0.0.2: Ray takes 127.0.0.1 for "this machine" and advertises another interface
    addresses = [f"127.0.0.{k + 2}" for k in range(count)]
    for address in addresses:
        _port_free(address)
    root.mkdir(parents=True, exist_ok=True)
    key = root / "id_ed25519"
    host_key = root / "host_ed25519"
    for path in (key, host_key):
        subprocess.run([_program("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                       check=True, capture_output=True)  # fmt: skip
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    tag = secrets.token_hex(3)
    with ExitStack() as undo:
        # the home path ``ssh_user`` has on every node: made here, each node's home mounted on it
        login_home = Path(tempfile.mkdtemp(prefix=f"rt{tag}-home-"))
        login_home.chmod(0o755)
        undo.callback(shutil.rmtree, login_home, ignore_errors=True)
        # every account first: making one rewrites /etc/passwd, and the host replacing a file
        # that a namespace has a bind mount on takes that mount away
        entries = [_account(f"rt{tag}n{k}", undo) for k in range(count)]
        nodes = []
        for k, (address, entry) in enumerate(zip(addresses, entries, strict=True)):
            tmpdir = Path(tempfile.gettempdir()) / f"raytroupe-ray-{entry.pw_name}"
            node = Node(address, entry.pw_name, entry.pw_uid, Path(entry.pw_dir), tmpdir,
                        frozenset(_processes_of(entry.pw_uid)))  # fmt: skip
            _provision(node, key.with_suffix(".pub"))
            undo.callback(shutil.rmtree, node.ray_tmpdir, ignore_errors=True)
            undo.callback(_keep_logs, node, root / f"ray-logs.{node.account}")
            undo.callback(_kill_processes, node)  # runs before its account is deleted
            config = _sshd_config(root, k, address, ssh_user, host_key)
            binds = (
                *_files_as(ssh_user, entry, login_home, root / f"etc.{k}"),
                (node.home, login_home),
            )
            sshd = _start_sshd(config, root / f"sshd.{k}.log", binds)
            undo.callback(_stop, sshd)
            _wait_listening(address, sshd, root / f"sshd.{k}.log")
            nodes.append(node)
        yield Nodes(ssh_user, key, tuple(nodes), login_home)


def _program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if found is None:
        raise RuntimeError(f"the ray up tests need {name!r}, which is not installed")
    return found


def _port_free(address: str) -> None:
    with socket.socket() as probe:
        # as sshd binds: a connection of a node made just before, in TIME_WAIT, is no listener
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, PORT))
        except OSError as exc:
            raise RuntimeError(
                f"{address}:{PORT} is taken ({exc}): stop what listens there"
            ) from exc


def _account(name: str, undo: ExitStack) -> pwd.struct_passwd:
    """A new account ``name`` (no password: ``*``, which sshd takes for a key, unlike a locked
    ``!``), deleted on exit with its home. One that exists already is never used."""
    with suppress(KeyError):
        pwd.getpwnam(name)
        raise RuntimeError(f"an account {name!r} exists already: the tests use only their own")
    subprocess.run([_program("useradd"), "--create-home", "--shell", "/bin/bash", "--password",
                    "*", "--user-group", name], check=True, capture_output=True)  # fmt: skip
    undo.callback(subprocess.run, [_program("userdel"), "--remove", name], capture_output=True)
    return pwd.getpwnam(name)


def _provision(node: Node, public_key: Path) -> None:
    """The key in authorized_keys; RAY_TMPDIR in ~/.bashrc (its own Ray temp dir)."""
    ssh_dir = node.home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text(public_key.read_text())
    authorized.chmod(0o600)
    bashrc = node.home / ".bashrc"
    lines = bashrc.read_text().splitlines() if bashrc.exists() else []
    bashrc.write_text("\n".join([f"export RAY_TMPDIR={node.ray_tmpdir}", *lines]) + "\n")
    for path in (ssh_dir, authorized, bashrc):
        os.chown(path, node.uid, pwd.getpwuid(node.uid).pw_gid)


def _files_as(
    login: str, entry: pwd.struct_passwd, home: Path, folder: Path
) -> tuple[tuple[Path, Path], ...]:
    """Copies of /etc/passwd, /etc/shadow and /etc/group in which ``login`` is ``entry``'s uid
    and gid with ``home``, no password and no supplementary groups (a host's own account of that
    name, and its groups, are not the node's), as ``(copy, original)`` pairs to bind."""
    folder.mkdir(mode=0o700)
    rows = {
        "passwd": f"{login}:x:{entry.pw_uid}:{entry.pw_gid}::{home}:/bin/bash",
        "shadow": f"{login}:*:19000:0:99999:7:::",
    }
    pairs = []
    for name in ("passwd", "shadow", "group"):
        original = Path("/etc") / name
        kept = [row for row in original.read_text().splitlines() if row.split(":")[0] != login]
        if name == "group":  # the login is nobody's member
            kept = [_without_member(row, login) for row in kept]
        else:  # before the account's own row: the uid's name is ``login`` (``id -un``)
            own = [row.split(":")[0] for row in kept].index(entry.pw_name)
            kept.insert(own, rows[name])
        copy = folder / name
        copy.write_text("\n".join(kept) + "\n")
        copy.chmod(0o600 if name == "shadow" else 0o644)
        pairs.append((copy, original))
    return tuple(pairs)


def _without_member(row: str, login: str) -> str:
    fields = row.split(":")
    if len(fields) == 4:
        fields[3] = ",".join(m for m in fields[3].split(",") if m and m != login)
    return ":".join(fields)


def _sshd_config(root: Path, k: int, address: str, login: str, host_key: Path) -> Path:
    path = root / f"sshd.{k}.conf"
    path.write_text(
        f"ListenAddress {address}\nPort {PORT}\nHostKey {host_key}\n"
        f"PidFile {root / f'sshd.{k}.pid'}\nAllowUsers {login}\n"
        "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin no\n"
    )
    return path


def _start_sshd(
    config: Path, log: Path, binds: tuple[tuple[Path, Path], ...] = ()
) -> subprocess.Popen[bytes]:
    """sshd in the foreground (its PID is ours to stop), in a mount namespace of its own where
    each ``(source, target)`` of ``binds`` is bind-mounted."""
    sshd = [SSHD, "-D", "-e", "-f", str(config)]
    if binds:  # exec all the way down: the PID we hold is sshd's
        mounts = " && ".join(
            f'mount --bind "${{{2 * i + 1}}}" "${{{2 * i + 2}}}"' for i in range(len(binds))
        )
        sshd = [_program("unshare"), "--mount", "--propagation", "private", "--",
                "sh", "-c", f'{mounts} && shift {2 * len(binds)} && exec "$@"', "sh",
                *(str(path) for pair in binds for path in pair), *sshd]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(sshd, stdout=out, stderr=subprocess.STDOUT)


def _wait_listening(address: str, sshd: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if sshd.poll() is not None:
            raise RuntimeError(f"sshd on {address} exited: {log.read_text()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex((address, PORT)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"sshd on {address} did not listen within {START_S} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_S)


def _keep_logs(node: Node, to: Path) -> None:
    """The node's Ray logs, kept with the test's files (its temp dir is removed next)."""
    logs = node.ray_tmpdir / "ray" / "session_latest" / "logs"
    if logs.is_dir():
        shutil.copytree(logs, to, dirs_exist_ok=True, ignore_dangling_symlinks=True)


def _processes_of(uid: int) -> dict[int, str]:
    """``{pid: command line}`` of the processes whose real uid is ``uid`` (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        uids = next(
            (line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), []
        )
        if uids and int(uids[0]) == uid:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def _kill_processes(node: Node) -> None:
    """Whatever still runs under the node's account (the test has asserted there is none)."""
    deadline = time.monotonic() + STOP_S
    while (left := node.processes()) and time.monotonic() < deadline:
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
