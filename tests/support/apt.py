"""Debian packages the test tiers need (Chromium, sshd, rsync), installed with apt when missing.

The project's own files install them on a fresh machine: a test asks for the programs it runs,
and whatever is missing is installed as root from Debian's package registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from tests.support.host_guard import note_installed, system_names

APT_TIMEOUT_S = 600


def ensure_programs(packages: Mapping[str, str], *, purpose: str) -> None:
    """Install the Debian package of each missing program (``{program path or name: package}``).

    Raises:
        RuntimeError: a program is missing and cannot be installed here (not root, no apt).
    """
    missing = sorted({pkg for program, pkg in packages.items() if not _present(program)})
    if not missing:
        return
    wanted = " ".join(missing)
    if os.geteuid() != 0:
        raise RuntimeError(f"{purpose} need Debian's {wanted}: apt-get install {wanted}")
    apt = shutil.which("apt-get")
    if apt is None:
        raise RuntimeError(f"{purpose} need Debian's {wanted}, and there is no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "-q", "--no-install-recommends", *missing]

    accounts = system_names()

    def run(command: list[str], *, check: bool) -> int:
        done = subprocess.run(
            command, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=check
        )
        return done.returncode

    try:
        if run(install, check=False):  # the package lists of a fresh machine may be empty
            run([apt, "update", "-q"], check=True)
            run(install, check=True)
    finally:  # sshd's account, by openssh-server: made on purpose, for the session's guard
        note_installed(accounts, f"{wanted} (apt, for {purpose})")
    still = sorted(program for program in packages if not _present(program))
    if still:
        raise RuntimeError(f"installed {wanted}, and still no {', '.join(still)}")


def _present(program: str) -> bool:
    if os.sep in program:
        return os.access(program, os.X_OK)
    return shutil.which(program) is not None
