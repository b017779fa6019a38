"""A local Ray started by runtime.connect() listens on loopback only."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in (PROC / str(pid) / "fd").iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def _listeners() -> dict[str, str]:
    """inode -> local address of every listening TCP socket on the machine."""
    found = {}
    for table in ("tcp", "tcp6"):
        for line in (PROC / "net" / table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != LISTEN:
                continue
            address_hex = cols[1].split(":")[0]
            raw = bytes.fromhex(address_hex)
            # /proc/net shows each 32-bit word in host (little-endian) order
            words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
            found[cols[9]] = str(ipaddress.ip_address(b"".join(words)))
    return found


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def test_local_ray_listens_on_loopback_only(rt):
    ray_pids = _descendants(os.getpid())
    assert ray_pids, "the session's Ray runs no child process of this test process"
    listeners = _listeners()
    seen = {}
    for pid in ray_pids:
        for inode in _socket_inodes(pid) & listeners.keys():
            seen[(pid, inode)] = listeners[inode]
    assert seen, "no listening socket found among Ray's processes"
    exposed = {
        (pid, _cmdline(pid)): addr
        for (pid, _), addr in seen.items()
        if not _is_loopback(addr) and not _serve_replica_grpc(pid, addr)
    }
    assert not exposed, f"Ray processes listen beyond loopback: {exposed}"


def _serve_replica_grpc(pid: int, address: str) -> bool:
    """The one listener Ray does not let us bind to loopback (a known, documented exception).

    Ray Serve 2.60 replicas start an inter-deployment gRPC server on ``[::]:0``, hard-coded
    (ray/serve/_private/replica.py, ``_on_initialized``); the HTTP proxy itself is on
    127.0.0.1. The README says so. Anything else listening beyond loopback fails the test.
    """
    return address == "::" and _cmdline(pid).startswith("ray::ServeReplica:")


def _cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"
