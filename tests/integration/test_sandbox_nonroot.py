"""The escape suite again, as an ordinary user: the sandbox of a node where Ray is not root.

Cluster nodes run Ray as an ordinary account, where the launcher builds its namespaces inside a
user namespace of its own (see ``actors/tools/_launcher.py``). This runs
``test_sandbox_escapes.py`` in a child pytest as ``nobody``, in a mount namespace where the
checkout and the virtual environment are bound under a directory that account can read (a
checkout may sit below ``/root`` or a private temporary directory, as CI's does), with this
Python's version of an interpreter ``nobody`` can run. Nothing in the child is root: the
launcher, its namespaces and the programs run as ``nobody``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.system  # system tier: the escape suite again as a non-root user

REPO = Path(__file__).resolve().parents[2]
SUITE = "tests/integration/test_sandbox_escapes.py"
NOBODY = 65534
ROOT_ONLY = {"test_bad_uid_is_a_tool_error"}  # a uid to drop to is root's choice
CHILD_TIMEOUT_S = 600


def _program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if found is None:
        pytest.fail(f"running the escape suite without root needs {name!r} (util-linux)")
    return found


def _relative(path: str, prefix: str) -> str:
    return os.path.relpath(Path(path).resolve(), Path(prefix).resolve())


@pytest.fixture
def place():
    """A directory ``nobody`` can enter (removed after), with a home of its own inside."""
    top = Path(tempfile.mkdtemp(prefix="raytroupe-nonroot-"))
    try:
        top.chmod(0o755)
        for name in ("repo", "venv"):
            (top / name).mkdir()
        (top / "home").mkdir(mode=0o700)
        os.chown(top / "home", NOBODY, NOBODY)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _interpreter() -> str:
    """This Python's version, as a binary ``nobody`` can run with its libraries (this one may
    live under ``/root``, as pyenv's do, and load its libpython from there)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = (sys._base_executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}")
    for candidate in candidates:
        try:
            ran = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2])"], user=NOBODY,
                group=NOBODY, extra_groups=[], capture_output=True, text=True, timeout=60,
                cwd="/", env={"PATH": "/usr/bin:/bin"}, check=False,
            )  # fmt: skip
        except OSError:
            continue
        if ran.returncode == 0 and ran.stdout.strip() == str(sys.version_info[:2]):
            return candidate
    pytest.fail(f"no {version} that uid {NOBODY} can run (install Debian's {version})")


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="this session is not root: test_sandbox_escapes.py above already ran without root",
)
def test_escape_suite_passes_as_a_non_root_user(place):
    venv = Path(sys.prefix).resolve()
    site = [place / "venv" / _relative(p, venv) for p in sys.path if p.startswith(str(venv))]
    binds = ((REPO, place / "repo"), (venv, place / "venv"))
    mounts = " && ".join(f'mount --bind "${i * 2 + 1}" "${i * 2 + 2}"' for i in range(2))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(place / "home"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(map(str, [place / "repo", *site])),
    }
    command = [
        _program("unshare"), "--mount", "--propagation", "private", "--",
        "sh", "-c", f'{mounts} && shift 4 && exec "$@"', "sh",
        *(str(path) for pair in binds for path in pair),
        _program("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        _interpreter(), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n0",
        # schemathesis's plugin imports a module at the session's end, which pytest rewrites
        # with ast.parse: after the suite's deep-recursion escapes, Debian's Python 3.11.2
        # raised "SystemError: AST constructor recursion depth mismatch" there once (a bug of
        # that CPython, seen 2026-12-06), failing a run whose tests had all passed
        "-p", "no:schemathesis",
        "--noconftest", f"--basetemp={place / 'home' / 'pytest'}", SUITE,
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=place / "repo", env=env, capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-6000:]
    summary = re.search(r"(\d+) passed(?:, (\d+) skipped)? in ", report)
    assert summary, report[-3000:]
    skipped = re.findall(r"SKIPPED \[\d+\] \S+?:\d+: (.*)", report)
    assert len(skipped) == len(ROOT_ONLY), report[-3000:]
    assert all("no uid to drop to" in reason for reason in skipped), skipped
    assert int(summary.group(1)) >= 20, report[-3000:]  # the suite ran, not a stray file
    # the non-root-only fail-closed test ran (it is skipped as root)
    assert "test_fails_closed_where_user_namespaces_are_refused" not in " ".join(skipped)
