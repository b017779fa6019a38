"""Start one untrusted program inside fresh namespaces, with no privileges.

A standalone script (standard library only, no project imports), started by
``raytroupe.actors.tools.isolation`` as ``python -I -S _launcher.py CONFIG_JSON`` in a fresh
single-threaded process, with a status pipe open on the descriptor ``config["status_fd"]``.

As root, the launcher has the rights to build namespaces, and the target drops to
``config["uid"]``/``config["gid"]``. Otherwise (how Ray runs on cluster nodes) it first makes a
user namespace of its own, mapping only its own uid and gid onto themselves (``setgroups``
denied), which gives it the rights to build the rest inside; the target keeps that uid, and its
``execve`` leaves it no capabilities. Where neither works, the setup fails and says why.

With ``config["isolate"]`` true, three processes::

    launcher   host pid namespace; unshare([user,] net, mount, pid, ipc, uts), fork, wait
      init     pid 1 of the new pid namespace, in the launcher's process group, not dumpable:
               builds the root, forks the target, reaps every orphan, writes the target's
               status, exits; the kernel then kills whatever is left in the namespace.
               Untrusted code can neither signal, trace nor read init (so nor forge its status
               lines through ``/proc/1/fd``), nor move it out of the launcher's process group,
               and init dies with the launcher (parent-death signal): killing init, the
               launcher or the group ends the whole run, even for programs that left the group
               with setsid().
        target pid 2: rlimits, no new privileges, (as root) setgroups([]), setgid, setuid, a
               seccomp filter (no user namespaces, no keyring), chdir /tmp, exec with only the
               configured environment.

The target's root is a fresh tmpfs (``pivot_root``; the host's root is detached), read-only,
holding read-only binds of :data:`SYSTEM_PATHS` only, the scratch directory bound onto
``/tmp``, small tmpfs on ``/var/tmp`` and ``/dev/shm``, a ``/dev`` of :data:`DEVICES` and a
fresh ``/proc`` (hidepid=2). Home directories, ``/root``, ``/run``, the service's files and
Ray's temp dir do not exist there. The new network namespace has only a loopback device, and
it is down: nothing is reachable.

With ``config["isolate"]`` false (the host cannot isolate) only rlimits, privilege drop when
root, the seccomp filter, chdir to the scratch directory and the cleared environment apply, and
the launcher execs the target itself.

Lines written to the status descriptor: ``init PID`` (the host pid of init: SIGKILL it, and
the launcher reaps it and exits), then the outcome, of which the first counts: ``exit N``,
``signal N``, or ``setup REASON`` (the sandbox could not be built; exit code 125). A target that
cannot be executed reports ``exit 127`` with a message on its stderr.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import select
import signal
import sys

TYPE_CHECKING = False  # typing costs milliseconds of startup on every run; mypy still reads it
if TYPE_CHECKING:
    from typing import Any, NoReturn

SETUP_FAILED = 125
EXEC_FAILED = 127

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

CLONE_NEWUSER = 0x10000000
MNT_DETACH = 2
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64 (since Linux 5.12)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

# The only host paths the target sees (read-only), besides its scratch dir on /tmp: programs,
# libraries and /etc. Home directories, /root, /run, /var, /srv, /opt, /mnt, the Ray temp dir
# and wherever the service keeps its state do not exist in the sandbox.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
SANDBOX_TMP = "/tmp"  # noqa: S108 - the target's /tmp: its scratch directory
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# seccomp: (audit arch, clone, unshare, clone3, (add_key, request_key, keyctl)) per machine
_SYSCALLS = {
    "x86_64": (0xC000003E, 56, 272, 435, (248, 249, 250)),
    "aarch64": (0xC00000B7, 220, 97, 435, (217, 218, 219)),
}

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


class SetupError(Exception):
    """A step that builds the sandbox failed."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    result = _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(result, f"mount {target}")


def _prctl(option: int, value: int) -> None:
    zero = ctypes.c_ulong(0)
    _check(_libc.prctl(option, ctypes.c_ulong(value), zero, zero, zero), f"prctl {option}")


def _report(status_fd: int, line: str) -> None:
    try:  # noqa: SIM105 - contextlib costs milliseconds of startup on every run
        os.write(status_fd, (line.replace("\n", " ") + "\n").encode())
    except OSError:
        pass  # the reader went away: nobody is left to tell


def _status_line(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        return f"signal {os.WTERMSIG(wait_status)}"
    return f"exit {os.waitstatus_to_exitcode(wait_status)}"


def _set_limits(limits: dict[str, int]) -> None:
    for name, key in (
        ("RLIMIT_AS", "as_bytes"),
        ("RLIMIT_FSIZE", "fsize_bytes"),
        ("RLIMIT_NOFILE", "nofile"),
        ("RLIMIT_NPROC", "nproc"),
    ):
        value = int(limits[key])
        resource.setrlimit(getattr(resource, name), (value, value))
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _seccomp() -> None:
    """Refuse user namespaces, the kernel keyring, other ABIs and x32: kernel attack surface.

    ``unshare``/``clone`` with ``CLONE_NEWUSER`` fail with EPERM; ``clone3`` (whose flags a
    filter cannot read) answers ENOSYS, and libc falls back to ``clone``.
    """
    known = _SYSCALLS.get(os.uname().machine)
    if known is None:
        return  # unknown syscall numbers: namespaces, uid and rlimits still hold
    arch, clone, unshare, clone3, keyring = known
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny, nosys = 0x7FFF0000, 0x50000 | errno.EPERM, 0x50000 | errno.ENOSYS
    flags_at, deny_at, nosys_at = 11, 14, 15  # absolute indices of the targets below
    program = [  # (code, jump-if-true to, jump-if-false to, k); jumps are absolute here
        (ld, 0, 0, 4),  # 0: arch
        (jeq, 2, deny_at, arch),  # 1
        (ld, 0, 0, 0),  # 2: syscall number
        (jge, deny_at, 4, 0x40000000),  # 3: x32
        (jeq, nosys_at, 5, clone3),  # 4
        (jeq, deny_at, 6, keyring[0]),  # 5
        (jeq, deny_at, 7, keyring[1]),  # 6
        (jeq, deny_at, 8, keyring[2]),  # 7
        (jeq, flags_at, 9, unshare),  # 8
        (jeq, flags_at, 10, clone),  # 9
        (ret, 0, 0, allow),  # 10
        (ld, 0, 0, 16),  # 11: low half of the first argument (flags)
        (jset, deny_at, 13, CLONE_NEWUSER),  # 12
        (ret, 0, 0, allow),  # 13
        (ret, 0, 0, deny),  # 14
        (ret, 0, 0, nosys),  # 15
    ]
    filters = (_SockFilter * len(program))()
    for index, (code, true_to, false_to, k) in enumerate(program):
        jumps = (true_to - index - 1, false_to - index - 1) if code in (jeq, jge, jset) else (0, 0)
        filters[index] = _SockFilter(code, jumps[0], jumps[1], k)
    fprog = _SockFprog(len(program), filters)
    zero = ctypes.c_ulong(0)
    mode = ctypes.c_ulong(SECCOMP_MODE_FILTER)
    _check(_libc.prctl(PR_SET_SECCOMP, mode, ctypes.byref(fprog), zero, zero), "seccomp")


def _drop_privileges(uid: int, gid: int) -> None:
    if os.geteuid() != 0:
        return  # not root: nothing to drop, nothing we could switch to
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
        raise SetupError("privileges were not dropped")


def _exec(config: dict[str, Any], status_fd: int, cwd: str) -> NoReturn:
    """Become the target: limits, no privileges, cleared environment. Never returns."""
    try:
        _set_limits(config["limits"])
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        os.chdir(cwd)  # before the drop: a scratch dir below a private parent stays usable
        _drop_privileges(int(config["uid"]), int(config["gid"]))
        _seccomp()
    except Exception as exc:  # noqa: BLE001 - any failure before exec is reported, never run past
        _report(status_fd, f"setup {type(exc).__name__}: {exc}")
        os._exit(SETUP_FAILED)
    argv = [str(arg) for arg in config["argv"]]
    env = {str(key): str(value) for key, value in config["env"].items()}
    try:
        os.execvpe(argv[0], argv, env)  # noqa: S606 - exec of the sandboxed argv is the point
    except (OSError, ValueError) as exc:
        os.write(2, f"cannot execute {argv[0]!r}: {exc}\n".encode())
    os._exit(EXEC_FAILED)


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _restrict(target: str, attrs: int, *, recursive: bool) -> None:
    """Add mount attributes (read-only, nosuid, nodev) to ``target`` (and its submounts).

    ``mount_setattr`` only adds: a remount would have to repeat every flag the kernel locked
    on a mount copied into a user namespace, and visit each submount of a recursive bind.
    """
    attr = _MountAttr(attrs, 0, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    result = _libc.syscall(
        ctypes.c_long(SYS_MOUNT_SETATTR),
        ctypes.c_int(AT_FDCWD),
        target.encode(),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(result, f"mount_setattr {target} (Linux 5.12 or later is needed)")


def _pivot_root(new_root: str) -> None:
    """Make ``new_root`` the root and detach the old one: nothing of it stays reachable."""
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise SetupError(f"pivot_root: unknown syscall number on {os.uname().machine}")
    os.chdir(new_root)
    _check(_libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount the old root")
    os.chdir("/")


def _bind(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)


def _build_root(scratch: str, tmpfs_mb: int) -> None:
    """Build the target's file system on a fresh tmpfs and pivot into it.

    Read-only: :data:`SYSTEM_PATHS` (symbolic links stay links) and the root itself. Writable:
    ``/tmp`` (the scratch dir), small private tmpfs on ``/var/tmp`` and ``/dev/shm``. ``/dev``
    holds only :data:`DEVICES`; ``/proc`` is a fresh one of the new pid namespace.
    """
    scratch_fd = os.open(scratch, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = SANDBOX_TMP  # a mount point that always exists; the host's /tmp is hidden after
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            os.symlink(os.readlink(path), root + path)
        elif os.path.isdir(path):
            os.mkdir(root + path)
            _bind(path, root + path)
            _restrict(root + path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                      recursive=True)  # fmt: skip
    tmpfs_options = f"size={tmpfs_mb}m,mode=1777"
    for path in (SANDBOX_TMP, "/var", "/var/tmp", "/dev", "/dev/shm", "/proc"):  # noqa: S108 - new root
        os.mkdir(root + path, 0o755)
        if path == "/dev":
            _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
            for name in DEVICES:
                if os.path.exists(f"/dev/{name}"):
                    os.close(os.open(f"{root}/dev/{name}", os.O_CREAT | os.O_WRONLY, 0o644))
                    _mount(f"/dev/{name}", f"{root}/dev/{name}", None, MS_BIND)
            for name, link in DEV_LINKS:
                os.symlink(link, f"{root}/dev/{name}")
    _bind(f"/proc/self/fd/{scratch_fd}", root + SANDBOX_TMP)
    os.close(scratch_fd)
    _restrict(root + SANDBOX_TMP, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, recursive=True)
    for path in ("/var/tmp", "/dev/shm"):  # noqa: S108 - private tmpfs of the new root
        _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options)
    # while the host's /proc is still there: an unprivileged proc mount needs one fully visible
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    _pivot_root(root)
    for path in ("/", "/dev"):
        _restrict(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, recursive=False)


def _init(config: dict[str, Any], status_fd: int, alive_fd: int) -> NoReturn:
    """Pid 1 of the new namespace: build the mounts, run the target, report its status."""
    try:
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if select.select([alive_fd], [], [], 0)[0]:
            os._exit(SETUP_FAILED)  # the launcher died before the parent-death signal was set
        _prctl(PR_SET_DUMPABLE, 0)  # the target (same uid in a user namespace) cannot trace it
        _build_root(str(config["scratch"]), int(config["tmpfs_mb"]))
        target = os.fork()
    except Exception as exc:  # noqa: BLE001 - any failure while building is reported, never run past
        _report(status_fd, f"setup {type(exc).__name__}: {exc}")
        os._exit(SETUP_FAILED)
    if target == 0:
        try:
            os.close(alive_fd)
            _exec(config, status_fd, SANDBOX_TMP)
        finally:
            os._exit(SETUP_FAILED)  # a forked child never returns into the caller's code
    os.close(0)  # the target alone reads stdin; init keeps no other end of it open
    while True:
        pid, wait_status = os.waitpid(-1, 0)
        if pid == target:
            _report(status_fd, _status_line(wait_status))
            os._exit(0)


def _map_own_ids(uid: int, gid: int) -> None:
    """Map the caller's uid and gid to themselves in its new user namespace (no other ids)."""
    for path, text in (
        ("/proc/self/setgroups", "deny"),  # required before an unprivileged gid map
        ("/proc/self/uid_map", f"{uid} {uid} 1"),
        ("/proc/self/gid_map", f"{gid} {gid} 1"),
    ):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _launch(config: dict[str, Any], status_fd: int) -> int:
    flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    uid, gid = os.geteuid(), os.getegid()
    userns = uid != 0  # not root: a user namespace of our own grants the rights to build
    names = "user, net, mount, pid, ipc, uts" if userns else "net, mount, pid, ipc, uts"
    try:
        _check(_libc.unshare(flags | (CLONE_NEWUSER if userns else 0)), f"unshare({names})")
        if userns:
            _map_own_ids(uid, gid)
    except (SetupError, OSError) as exc:
        reason = f"{exc} (user namespaces disabled?)" if userns else str(exc)
        _report(status_fd, f"setup {reason}")
        os.write(2, f"raytroupe-launcher: {reason}\n".encode())
        return SETUP_FAILED
    alive_r, alive_w = os.pipe()  # both ends close on exec; init sees EOF if we die
    init = os.fork()
    if init == 0:
        try:
            os.close(alive_w)
            _init(config, status_fd, alive_r)
        finally:
            os._exit(SETUP_FAILED)  # a forked child never returns into the caller's code
    os.close(alive_r)
    os.close(0)
    _report(status_fd, f"init {init}")  # killing init (not us) ends the run with nothing left
    _, wait_status = os.waitpid(init, 0)
    if os.WIFSIGNALED(wait_status):
        _report(status_fd, _status_line(wait_status))  # killed: the target had no say
    return 0


def main(argv: list[str]) -> int:
    """Run the configuration in ``argv[1]``; the exit code only matters without a status."""
    config: dict[str, Any] = json.loads(argv[1])
    status_fd = int(config["status_fd"])
    os.set_inheritable(status_fd, False)  # noqa: FBT003 - positional-only; the target must never see it
    if not config["argv"]:
        _report(status_fd, "setup empty argv")
        return SETUP_FAILED
    if not config["isolate"]:
        _exec(config, status_fd, str(config["scratch"]))
    return _launch(config, status_fd)


if __name__ == "__main__":
    os._exit(main(sys.argv))  # nothing is buffered (os.write only): skip interpreter teardown
