"""What a test session leaves of the host: the account's home and the machine's accounts as
they were.

Tests write only under temporary directories: examples, drivers, ``troupe up`` and browsers
get a home of their own. To hold every test to that, the session takes a :class:`HostState` when
it starts and again when it ends, and fails naming each difference (``tests/conftest.py``):

- every entry under ``$HOME`` (its type, size, mode, modification time and link target), but
  for :data:`CACHES`, which installs and tests fill on purpose;
- the machine's user and group names: a throwaway account (``tests/support/ssh_nodes.py``,
  ``tests/support/postgres.py``) is gone by the end, and no existing one went away.

A process left running after its test can still write later; this catches what is done by the
time the session ends.

Two exceptions, both written down as they happen. The system accounts and groups that a
package installed by the tests makes (``sshd``, by openssh-server: ``tests/support/apt.py``)
are listed apart, not as failures: the tiers install those packages on a fresh machine on
purpose. And a session started by a test of another (a drill in a process of its own, a
session under test) guards nothing: the outer one, which spans it, does; the inner one would
see the outer's throwaway accounts come and go (:data:`NOTES_ENV`).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CACHES = (
    ".cache/raytroupe",  # the test weights and the llama.cpp wheel (tests/support/weights.py)
    ".cache/pip",
    ".cache/uv",
    ".npm",
)
"""Under the home, what the project's installs and its tests' fixtures fill on purpose."""

NOTES_ENV = "RAYTROUPE_HOST_GUARD_NOTES"
"""Set by the session that guards the host (and inherited by every process it starts): the
file where package installs note the system accounts and groups they made."""

SYSTEM_ID_MAX = 999
"""Debian's system accounts and groups (``SYS_UID_MAX``); ``useradd`` gives the throwaway
accounts ids above it."""

TOOLCHAINS = (".pyenv", ".rustup", ".cargo", ".m2")
"""Under the home, installed toolchains: their top entries are compared, not the ~250,000
files below them (~5 s to list on 2 cores), which nothing of the project's writes."""


@dataclass(frozen=True)
class HostState:
    """The home's entries and the machine's account and group names, at one moment."""

    home: Path
    entries: dict[str, tuple[object, ...]]
    users: frozenset[str]
    groups: frozenset[str]

    @classmethod
    def take(cls, home: Path | None = None) -> HostState:
        """The state now (``home``: the account's, ``$HOME``)."""
        root = Path(home or os.path.expanduser("~"))
        entries: dict[str, tuple[object, ...]] = {}
        _walk(root, "", entries, {*CACHES}, {*TOOLCHAINS})
        return cls(
            root,
            entries,
            frozenset(p.pw_name for p in pwd.getpwall()),
            frozenset(g.gr_name for g in grp.getgrall()),
        )

    def changes_since(
        self, before: HostState, installed: Mapping[str, str] | None = None
    ) -> list[str]:
        """What differs from ``before``, one line each, sorted.

        ``installed``: ``"account <name>"`` or ``"group <name>"`` that a package install made
        (:func:`read_notes`), for what; those are not differences.
        """
        made = installed or {}
        found = []
        for path in sorted(self.entries.keys() | before.entries.keys()):
            was, now = before.entries.get(path), self.entries.get(path)
            if was == now:
                continue
            shown = f"~/{path}"
            if was is None:
                found.append(f"created {shown}")
            elif now is None:
                found.append(f"removed {shown}")
            else:
                found.append(f"changed {shown}")
        for kind, was_names, now_names in (
            ("account", before.users, self.users),
            ("group", before.groups, self.groups),
        ):
            found += [
                f"{kind} {n} left behind"
                for n in sorted(now_names - was_names)
                if f"{kind} {n}" not in made
            ]
            found += [f"{kind} {n} removed" for n in sorted(was_names - now_names)]
        return found


def system_names() -> frozenset[str]:
    """The system accounts and groups now, as ``"account <name>"`` / ``"group <name>"``."""
    return frozenset(
        [f"account {p.pw_name}" for p in pwd.getpwall() if p.pw_uid <= SYSTEM_ID_MAX]
        + [f"group {g.gr_name}" for g in grp.getgrall() if g.gr_gid <= SYSTEM_ID_MAX]
    )


def note_installed(before: frozenset[str], purpose: str) -> None:
    """Note the system accounts and groups made since ``before`` (:func:`system_names`) by a
    package install for ``purpose``, for the session that guards the host, if one does."""
    notes = os.environ.get(NOTES_ENV)
    if not notes:
        return
    with open(notes, "a", encoding="utf-8") as f:
        f.writelines(f"{name}\t{purpose}\n" for name in sorted(system_names() - before))


def read_notes(path: Path) -> dict[str, str]:
    """What :func:`note_installed` noted in ``path``: ``{"account sshd": purpose}``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def _walk(
    directory: Path,
    prefix: str,
    into: dict[str, tuple[object, ...]],
    skip: set[str],
    shallow: set[str],
) -> None:
    try:
        listing = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in listing:
        relative = f"{prefix}{entry.name}"
        if relative in skip:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # gone between the listing and here
            continue
        if stat.S_ISLNK(info.st_mode):
            into[relative] = ("link", os.readlink(entry.path))
        elif stat.S_ISDIR(info.st_mode):
            # a directory's own time changes with what it lists, which is compared entry by entry
            into[relative] = ("dir", stat.S_IMODE(info.st_mode))
            if relative not in shallow:
                _walk(Path(entry.path), f"{relative}/", into, skip, shallow)
        else:
            into[relative] = ("file", info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode))
