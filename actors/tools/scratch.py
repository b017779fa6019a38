"""A job's scratch directory, below a root that this user alone owns and may write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from raytroupe.actors.tools.config import default_scratch_root
from raytroupe.protocols import ToolInfrastructureError

__all__ = ["scratch_dir"]


def scratch_dir(root: Path, job_id: str | None) -> Path:
    """The job's scratch directory, made if missing, below a root of this user's alone.

    Raises:
        ToolInfrastructureError: the root (or, by default, its ``raytroupe-<uid>`` parent)
            is a symlink, another user's or writable by others; or a directory cannot be
            made.
    """
    path = root / (job_id or "no-job")
    try:
        _make_private(root)
        # by default its raytroupe-<uid> parent must be ours too: its owner could swap root
        for directory in (root.parent, root) if root == default_scratch_root() else (root,):
            _owned_dir(directory)
        _make_private(path)
    except OSError as exc:
        raise ToolInfrastructureError(
            f"cannot prepare the scratch directory {path}: {exc}", path=str(path)
        ) from exc
    return path


def _make_private(path: Path) -> None:
    """``mkdir -p path``, each directory made with mode 0700 (which a umask can only narrow).

    Whatever is there already is left as it is, for ``_owned_dir`` to judge.
    """
    if not os.path.lexists(path):
        _make_private(path.parent)
        path.mkdir(mode=0o700, exist_ok=True)


def _owned_dir(path: Path) -> None:
    """Refuse ``path`` unless it is a real directory of this user that nobody else may write.

    Whoever owns or may write a scratch root could swap a job's directory for one of theirs,
    or read what the tools leave there: a root made first by someone else is refused, not used.

    Raises:
        ToolInfrastructureError: it is a symlink, not a directory, another user's, or writable
            by group or others.
        OSError: it cannot be looked at.
    """
    found, me = os.lstat(path), os.geteuid()
    mode = stat.S_IMODE(found.st_mode)
    if stat.S_ISLNK(found.st_mode):
        why = "is a symlink"
    elif not stat.S_ISDIR(found.st_mode):
        why = "is not a directory"
    elif found.st_uid != me:
        why = "belongs to another user"
    elif mode & 0o022:
        why = "is writable by group or others"
    else:
        return
    raise ToolInfrastructureError(
        f"refusing the scratch directory {path}: it {why} (owner uid {found.st_uid}, mode "
        f"{mode:#o}); remove it, or set ToolsConfig.scratch_root to a directory that only uid "
        f"{me} can write",
        path=str(path),
        owner_uid=found.st_uid,
        mode=f"{mode:#o}",
    )
