"""Escape attempts against the isolation layer, run as real child processes (no Ray).

Every attempt must be blocked. Skipped as a whole where the host cannot isolate (the probe says
why); the fail-closed tests at the end run everywhere.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from raytroupe.actors.tools import isolation
from raytroupe.actors.tools.isolation import Isolation, ResourceLimits, RunResult
from raytroupe.protocols.errors import SandboxUnavailable, ToolError

REPO = Path(__file__).resolve().parents[2]
HOST_TMP = Path("/tmp")  # noqa: S108 - the host's /tmp, which the sandbox must not reach
SANDBOX_TMP = "/tmp"  # noqa: S108 - inside the sandbox: its scratch directory
PRIVATE_TMPFS = ("/var/tmp", "/dev/shm")  # noqa: S108 - hidden by the sandbox's own tmpfs
ISO = Isolation()
ROOT = os.geteuid() == 0  # else the launcher builds a user namespace; programs keep our uid
SANDBOX_UID = ISO.uid if ROOT else os.geteuid()


@pytest.fixture
def iso():
    ok, reason = ISO.probe()
    if not ok:  # the product refuses untrusted code here; the suite must not pass silently
        pytest.fail(f"this host cannot isolate, so the escape suite cannot run: {reason}")
    return ISO


@pytest.fixture
def spawned(monkeypatch):
    """The launcher processes started during the test (their pids are their process groups)."""
    procs = []
    real = asyncio.create_subprocess_exec

    async def spy(*args, **kwargs):
        proc = await real(*args, **kwargs)
        procs.append(proc)
        return proc

    monkeypatch.setattr(isolation.asyncio, "create_subprocess_exec", spy)
    return procs


def py(iso: Isolation, code: str, scratch: Path, **limits) -> RunResult:
    return asyncio.run(
        iso.run_python(textwrap.dedent(code), scratch=scratch, limits=ResourceLimits(**limits))
    )


def assert_group_gone(pgid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue  # exited meanwhile
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_probe_reports_namespaces(iso):
    ok, reason = iso.probe()
    assert ok
    assert "namespaces" in reason


def test_runs_unprivileged_in_its_own_pid_namespace(iso, tmp_path):
    result = py(
        iso,
        """
        import os
        status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
        print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups(), os.getpid())
        print(status["CapEff"].strip(), status["NoNewPrivs"].strip(), sorted(os.listdir("/proc")))
        """,
        tmp_path,
    )
    assert result.exit_code == 0, result
    assert result.isolation == "namespaces"
    ids, caps = result.stdout.splitlines()
    uid, euid, gid, groups, pid = ids.split(" ", 4)
    assert (int(uid), int(euid)) == (SANDBOX_UID, SANDBOX_UID)
    if ROOT:
        assert (gid, groups) == (str(ISO.gid), "[]")
    assert int(pid) < 10  # a fresh pid namespace
    assert caps.startswith("0000000000000000 1 [")
    if ROOT:
        assert "'1'" not in caps  # init (root) is hidden by hidepid


def test_init_cannot_be_read_or_traced(iso, tmp_path):
    """Without root, init runs as the program's own uid: it must not be reachable all the same.

    Init holds the status pipe, whose lines decide the run's outcome: writing ``exit 0`` to it
    through ``/proc/1/fd`` would forge a result.
    """
    result = py(
        iso,
        """
        import ctypes, os
        for path in ("/proc/1/fd", "/proc/1/environ", "/proc/1/mem", "/proc/1/root"):
            try:
                os.listdir(path) if path.endswith(("fd", "root")) else open(path, "rb").read(1)
                print(path, "read")
            except OSError as exc:
                print(path, type(exc).__name__)
        libc = ctypes.CDLL(None, use_errno=True)
        print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH
        ctypes.set_errno(0)
        print("kill", libc.kill(1, 9), ctypes.get_errno())
        """,
        tmp_path,
    )
    assert result.exit_code == 0, result
    lines = result.stdout.splitlines()
    for line in lines[:4]:
        assert line.split()[1] in {"PermissionError", "FileNotFoundError"}, result.stdout
    assert lines[4] in {f"ptrace -1 {errno.EPERM}", f"ptrace -1 {errno.ESRCH}"}, result.stdout
    # a signal init does not handle is dropped: no error, and init (so the run) lives on
    assert lines[5] in {"kill 0 0", f"kill -1 {errno.EPERM}", f"kill -1 {errno.ESRCH}"}


def test_user_namespaces_and_keyring_refused_while_threads_and_children_work(iso, tmp_path):
    result = py(
        iso,
        """
        import ctypes, os, subprocess, threading
        libc = ctypes.CDLL(None, use_errno=True)
        print("userns", libc.unshare(0x10000000), ctypes.get_errno())
        keyctl = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
        if keyctl:
            print("keyctl", libc.syscall(keyctl, 0, -3, 0), ctypes.get_errno())
        thread = threading.Thread(target=print, args=("thread ok",))
        thread.start()
        thread.join()
        print(subprocess.run(["/bin/echo", "child ok"], capture_output=True, text=True).stdout)
        """,
        tmp_path,
    )
    assert result.exit_code == 0, result
    assert f"userns -1 {errno.EPERM}" in result.stdout
    if os.uname().machine in {"x86_64", "aarch64"}:
        assert f"keyctl -1 {errno.EPERM}" in result.stdout
    assert "thread ok" in result.stdout
    assert "child ok" in result.stdout


def test_loopback_tcp_connect_blocked(iso, tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        result = py(
            iso,
            f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
                print("connected")
            except OSError as exc:
                print("blocked", exc.errno)
            """,
            tmp_path,
        )
        listener.settimeout(0)  # the run is over: a connection would be queued by now
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert result.stdout.startswith("blocked"), result


def test_abstract_unix_socket_blocked(iso, tmp_path):
    name = f"\0troupe-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)
        listener.listen(8)
        result = py(
            iso,
            f"""
            import socket
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect({name!r})
                print("connected")
            except OSError as exc:
                print("blocked", exc.errno)
            """,
            tmp_path,
        )
        listener.settimeout(0)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert result.stdout.startswith("blocked"), result


def test_writes_outside_scratch_do_not_reach_the_host(iso, tmp_path):
    tag = uuid.uuid4().hex
    home = Path.home()  # root's, or the service user's: writable by the program's uid without root
    refused = [f"/etc/troupe-{tag}", str(home / f"troupe-{tag}"), str(REPO / f"troupe-{tag}")]
    if Path("/run/lock").is_dir():  # world-writable on the host: only the read-only root stops it
        refused.append(f"/run/lock/troupe-{tag}")
    private = [f"{base}/troupe-{tag}" for base in PRIVATE_TMPFS]
    try:
        result = py(
            iso,
            f"""
            import json
            outcome = {{}}
            for path in {refused + private!r}:
                try:
                    with open(path, "w") as handle:
                        handle.write("x")
                    outcome[path] = "written"
                except OSError as exc:
                    outcome[path] = type(exc).__name__
            print(json.dumps(outcome))
            """,
            tmp_path,
        )
        outcome = json.loads(result.stdout)
        for path in refused:
            # refused: by permissions, the read-only root, or (for a repo checked out under
            # /tmp, as CI does) because the sandbox's /tmp is its scratch, not the host's
            assert outcome[path] in {"PermissionError", "OSError", "FileNotFoundError"}, (
                path,
                outcome,
            )
        for path in private:
            assert outcome[path] == "written"  # into the sandbox's own tmpfs
        for path in refused + private:
            assert not Path(path).exists(), path
    finally:
        for path in refused + private:
            Path(path).unlink(missing_ok=True)


def test_tmp_writes_land_in_scratch_only(iso, tmp_path):
    name = f"troupe-{uuid.uuid4().hex}"
    result = py(
        iso,
        f"""
        import os
        os.makedirs("/tmp/sub")
        with open("/tmp/{name}", "w") as handle:
            handle.write("in scratch")
        with open("/tmp/sub/{name}", "w") as handle:
            handle.write("nested")
        print(os.getcwd(), os.environ["HOME"])
        """,
        tmp_path,
    )
    assert result.stdout.split() == [SANDBOX_TMP, SANDBOX_TMP], result
    assert (tmp_path / name).read_text() == "in scratch"
    assert (tmp_path / "sub" / name).read_text() == "nested"
    assert not (HOST_TMP / name).exists()


def test_host_secrets_unreadable(iso, tmp_path):
    """Not even the files of the service's own user: without root the program has its uid."""
    tag = uuid.uuid4().hex
    host_tmp = HOST_TMP / f"troupe-host-{tag}"
    host_tmp.write_text("host file")
    own = Path.home() / f".troupe-secret-{tag}"  # the service's user's home: e.g. its keys
    own.write_text("the service's own secret")
    own.chmod(0o600)
    try:
        result = py(
            iso,
            f"""
            import os
            for attempt in (lambda: open("/etc/shadow").read(), lambda: os.listdir("/root"),
                            lambda: open("/root/.bashrc").read(), lambda: open({str(host_tmp)!r}),
                            lambda: open({str(own)!r}).read(), lambda: os.listdir({str(REPO)!r}),
                            lambda: os.listdir("/run"), lambda: os.listdir("/home")):
                try:
                    attempt()
                    print("read")
                except OSError as exc:
                    print(type(exc).__name__)
            print(sorted(os.listdir("/tmp")))
            """,
            tmp_path,
        )
    finally:
        host_tmp.unlink()
        own.unlink()
    lines = result.stdout.splitlines()
    assert lines[0] == "PermissionError", result  # /etc is there (read-only), shadow is not ours
    # the rest of the host does not exist in the sandbox: home directories, the checkout of
    # the service, /run (sockets), the host's /tmp (Ray's session dir by default)
    assert lines[1:8] == ["FileNotFoundError"] * 7, result
    assert re.fullmatch(r"\['main-[0-9a-f]{16}\.py'\]", lines[8])  # only the program itself


def test_parent_environment_not_visible(iso, tmp_path, monkeypatch):
    monkeypatch.setenv("TROUPE_SECRET_X", "s3cr3t")
    result = py(
        iso,
        """
        import glob, os
        print(sorted(os.environ))
        for path in ["/proc/1/environ", "/proc/self/environ", *glob.glob("/proc/[0-9]*/environ")]:
            try:
                print(path, open(path, "rb").read())
            except OSError as exc:
                print(path, type(exc).__name__)
        """,
        tmp_path,
    )
    assert result.exit_code == 0, result
    assert "s3cr3t" not in result.stdout + result.stderr
    assert set(eval(result.stdout.splitlines()[0])) <= {"HOME", "LANG", "LC_CTYPE", "PATH"}  # noqa: S307 - our own repr of a list of names


def test_fork_bomb_is_stopped_and_nothing_survives(iso, tmp_path, spawned):
    result = py(
        iso,
        """
        import os
        r, w = os.pipe()
        forked, error = 0, None
        for _ in range(10000):
            try:
                pid = os.fork()
            except OSError as exc:
                error = exc.errno
                break
            if pid == 0:
                os.read(r, 1)  # blocks for good: w stays open here; only the kernel ends it
                os._exit(0)
            forked += 1
        print(forked, error)
        """,
        tmp_path,
        processes=32,
    )
    assert result.exit_code == 0, result
    assert not result.timed_out
    forked, error = result.stdout.split()
    assert int(forked) < 32
    assert int(error) == errno.EAGAIN
    assert_group_gone(spawned[0].pid)


def test_memory_limit(iso, tmp_path):
    result = py(
        iso,
        """
        try:
            big = bytearray(2 * 1024**3)
            print("big allocated")
        except MemoryError:
            print("big MemoryError")
        small = bytearray(50 * 1024**2)
        small[-1] = 1
        print("small ok")
        """,
        tmp_path,
        memory_mb=256,
    )
    assert result.stdout.split("\n")[:2] == ["big MemoryError", "small ok"], result


def test_wall_timeout_kills_an_endless_loop(iso, tmp_path, spawned):
    result = py(iso, "while True:\n    pass\n", tmp_path, wall_s=2.0, cpu_s=60)
    assert result.timed_out
    assert result.duration_s < 4.0
    assert result.exit_code is None
    assert result.signal == signal.SIGKILL
    assert_group_gone(spawned[0].pid)


def test_cpu_limit_ends_a_busy_loop(iso, tmp_path):
    result = py(iso, "while True:\n    pass\n", tmp_path, cpu_s=1, wall_s=20.0)
    assert not result.timed_out
    assert result.signal in {signal.SIGXCPU, signal.SIGKILL}, result


def test_output_over_the_cap_is_truncated(iso, tmp_path):
    result = py(
        iso,
        'import sys\nsys.stdout.write("x" * 1_000_000)\nsys.stderr.write("e" * 10)\n',
        tmp_path,
        output_bytes=1000,
    )
    assert result.exit_code == 0, result  # the rest was drained, so the writer never blocked
    assert result.stdout == "x" * 1000
    assert result.stdout_truncated
    assert result.stderr == "e" * 10
    assert not result.stderr_truncated


def test_stdin_is_passed(iso, tmp_path):
    result = asyncio.run(iso.run(["/bin/cat"], scratch=tmp_path, stdin=b"hello sandbox\n"))
    assert (result.exit_code, result.stdout) == (0, "hello sandbox\n")
    undecodable = asyncio.run(iso.run(["/bin/cat"], scratch=tmp_path, stdin=b"\xffok"))
    assert undecodable.stdout == "\ufffdok"
    unread = asyncio.run(iso.run(["/bin/true"], scratch=tmp_path, stdin=b"x" * (8 * 2**20)))
    assert unread.exit_code == 0
    assert not unread.timed_out


def test_file_size_limit(iso, tmp_path):
    result = py(
        iso,
        """
        try:
            with open("/tmp/big.bin", "wb") as handle:
                handle.write(b"\\0" * (17 * 2**20))
            print("written")
        except OSError as exc:
            print("refused", exc.errno)
        with open("/tmp/small.bin", "wb") as handle:
            handle.write(b"\\0" * 2**20)
        print("small ok")
        """,
        tmp_path,
        file_mb=16,
    )
    assert result.stdout.split("\n")[:2] == [f"refused {errno.EFBIG}", "small ok"], result
    assert (tmp_path / "big.bin").stat().st_size <= 16 * 2**20


def test_unknown_program_exits_127(iso, tmp_path):
    result = asyncio.run(iso.run(["/nonexistent/troupe-tool"], scratch=tmp_path))
    assert result.exit_code == 127
    assert "cannot execute" in result.stderr


def test_cancelled_run_leaves_no_process(iso, tmp_path, spawned):
    marker = f"troupe-cancel-{uuid.uuid4().hex}"
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    fifo.chmod(0o666)
    code = textwrap.dedent(
        """
        import os
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()  # leaves the process group: only the pid namespace still holds it
            fd = os.open("/tmp/ready", os.O_WRONLY)
            os.write(fd, b"ready")
            os.close(fd)
        os.read(r, 1)  # never returns: w is open in this very process
        """
    )

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        ready = loop.create_future()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            task = asyncio.create_task(
                iso.run([iso.python, "-I", "-S", "-c", code, marker], scratch=tmp_path)
            )
            await asyncio.wait_for(ready, timeout=30)
            assert os.read(fd, 16) == b"ready"
            assert len(processes_with(marker)) == 4  # launcher, init, program, its child
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            loop.remove_reader(fd)
            os.close(fd)

    asyncio.run(scenario())
    assert_group_gone(spawned[0].pid)
    assert processes_with(marker) == []


def test_concurrent_runs_from_a_worker_thread_stay_apart(iso, tmp_path):
    async def many() -> list[RunResult]:
        runs = [
            iso.run_python(
                f"import os\nopen('mine', 'w').write('{i}')\nprint(sorted(os.listdir()))",
                scratch=tmp_path / str(i),
            )
            for i in range(6)
        ]
        return await asyncio.gather(*runs)

    with ThreadPoolExecutor(1) as pool:  # Ray runs async actors' loops off the main thread
        results = pool.submit(asyncio.run, many()).result(timeout=60)
    for i, result in enumerate(results):
        assert re.fullmatch(r"\['main-[0-9a-f]{16}\.py', 'mine'\]", result.stdout.strip()), result
        assert (tmp_path / str(i) / "mine").read_text() == str(i)


REFUSED_USERNS = """
import asyncio, sys
from pathlib import Path
from raytroupe.actors.tools import _launcher
from raytroupe.actors.tools.isolation import Isolation
from raytroupe.protocols.errors import SandboxUnavailable

_launcher._prctl(_launcher.PR_SET_NO_NEW_PRIVS, 1)
_launcher._seccomp()  # no user namespaces for this process, as a container's profile may say
iso = Isolation()
print(*iso.probe(), sep="|")
try:
    asyncio.run(iso.run(["/bin/true"], scratch=Path(sys.argv[1])))
    print("ran")
except SandboxUnavailable as exc:
    print("refused:", exc)
"""


@pytest.mark.skipif(
    ROOT, reason="root needs no user namespace: test_sandbox_nonroot.py runs this without root"
)
def test_fails_closed_where_user_namespaces_are_refused(tmp_path):
    if os.uname().machine not in {"x86_64", "aarch64"}:
        pytest.fail(f"the launcher's seccomp filter knows no syscalls of {os.uname().machine}")
    path = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    done = subprocess.run(
        [sys.executable, "-c", REFUSED_USERNS, str(tmp_path / "scratch")],
        cwd=REPO, env={**os.environ, "PYTHONPATH": path},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    probe, outcome = done.stdout.splitlines()
    assert probe.startswith("False|"), probe
    assert "unshare(user, net, mount, pid, ipc, uts)" in probe
    assert "Operation not permitted" in probe
    assert outcome.startswith("refused: refusing to run untrusted code"), outcome
    assert not (tmp_path / "scratch").exists() or not any((tmp_path / "scratch").iterdir())


def test_sandbox_setup_failure_fails_closed(tmp_path, monkeypatch):
    fake = tmp_path / "launcher.py"
    fake.write_text(
        "import json, os, sys\n"
        "config = json.loads(sys.argv[1])\n"
        "os.write(config['status_fd'], b'setup mount /proc: denied\\n')\n"
        "sys.exit(125)\n"
    )
    monkeypatch.setattr(isolation, "LAUNCHER", fake)
    iso = Isolation()
    monkeypatch.setattr(iso, "probe", lambda: (True, "pretend"))
    with pytest.raises(SandboxUnavailable, match="mount /proc: denied"):
        asyncio.run(iso.run(["/bin/true"], scratch=tmp_path / "scratch"))


@pytest.mark.skipif(not ROOT, reason="without root there is no uid to drop to: programs keep ours")
def test_bad_uid_is_a_tool_error(tmp_path, monkeypatch):
    iso = Isolation(uid=2**40)
    monkeypatch.setattr(iso, "probe", lambda: (True, "pretend"))
    with pytest.raises(ToolError, match="scratch"):
        asyncio.run(iso.run(["/bin/true"], scratch=tmp_path))


def test_probe_failure_refuses_to_run(tmp_path, monkeypatch):
    iso = Isolation()
    monkeypatch.setattr(iso, "probe", lambda: (False, "no namespaces on this host"))
    with pytest.raises(SandboxUnavailable, match="no namespaces on this host") as caught:
        asyncio.run(iso.run(["/bin/echo", "hi"], scratch=tmp_path))
    assert isinstance(caught.value, ToolError)
    assert caught.value.detail["reason"] == "no namespaces on this host"


def test_probe_failure_with_allow_unisolated_runs_unisolated(tmp_path, monkeypatch):
    iso = Isolation(allow_unisolated=True)
    monkeypatch.setattr(iso, "probe", lambda: (False, "no namespaces on this host"))
    monkeypatch.setenv("TROUPE_SECRET_X", "s3cr3t")
    result = asyncio.run(
        iso.run(
            ["/bin/sh", "-c", 'echo "hi $HOME $TROUPE_SECRET_X"; cat'],
            scratch=tmp_path,
            stdin=b"in",
        )
    )
    assert result.isolation == "none"
    assert result.exit_code == 0, result
    assert result.stdout == f"hi {tmp_path.resolve()} \nin"
    timed = asyncio.run(
        iso.run(["/bin/sh", "-c", "sleep 30"], scratch=tmp_path, limits=ResourceLimits(wall_s=1.0))
    )
    assert timed.timed_out
    assert timed.isolation == "none"
