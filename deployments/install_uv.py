"""Install uv from a Python package index, with nothing but the node's ``python3``.

The cluster configs run it on every node before anything else::

    python3 ~/troupe-src/deployments/install_uv.py --version 0.9.9

It reads the index's simple API (PEP 691 JSON, or PEP 503 HTML from mirrors that serve only
that), picks the wheel built for this machine, checks the SHA-256 the index publishes, and
unpacks the ``uv`` binary into ``~/.local/bin``. The index is ``$UV_INDEX_URL``,
``$PIP_INDEX_URL`` or PyPI, so a node that reaches only a local mirror works the same. Every
failure exits non-zero with the reason: a node whose setup cannot get uv stops there.

Standard library only, Python 3.8 and later: it runs before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import re
import stat
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

PYPI = "https://pypi.org/simple/"
TIMEOUT_S = 60
_HREF = re.compile(r'href="([^"]+)"')
# manylinux for glibc systems, musllinux for Alpine; the machine names wheels use
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


class InstallError(Exception):
    """uv could not be installed; the message says why."""


def _web(url: str) -> str:
    """``url`` if it is http(s): an index page may not send us to ``file:`` or elsewhere."""
    if urllib.parse.urlsplit(url).scheme not in {"https", "http"}:
        raise InstallError(f"not an http(s) URL: {url!r}")
    return url


def wheel_files(index_url: str, version: str) -> dict[str, tuple[str, str]]:
    """``{wheel file name: (absolute URL, sha256)}`` of ``uv==version`` on the index."""
    page = urllib.parse.urljoin(index_url.rstrip("/") + "/", "uv/")
    request = urllib.request.Request(  # noqa: S310 - checked by _web
        _web(page),
        headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
            body = response.read()
            kind = response.headers.get("Content-Type", "")
    except OSError as exc:
        raise InstallError(f"cannot read the package index at {page}: {exc}") from exc
    if "json" in kind:
        listed = [
            (entry["filename"], entry["url"], entry.get("hashes", {}).get("sha256", ""))
            for entry in json.loads(body)["files"]
        ]
    else:
        listed = []
        for href in _HREF.findall(body.decode("utf-8", "replace")):
            url, _, fragment = href.replace("&amp;", "&").partition("#")
            name = urllib.parse.unquote(url.rsplit("/", 1)[-1])
            digest = fragment[len("sha256=") :] if fragment.startswith("sha256=") else ""
            listed.append((name, url, digest))
    prefix = f"uv-{version}-"
    return {
        name: (urllib.parse.urljoin(page, url), digest)
        for name, url, digest in listed
        if name.startswith(prefix) and name.endswith(".whl")
    }


def pick_wheel(names: list[str], machine: str, *, musl: bool) -> str:
    """The wheel of ``names`` built for this Linux ``machine`` (glibc, or musl if ``musl``)."""
    arch = _ARCH.get(machine.lower())
    if arch is None:
        raise InstallError(f"no uv wheel for the machine type {machine!r}")
    family = "musllinux" if musl else "manylinux"
    for name in sorted(names):
        tags = name[: -len(".whl")].split("-")[-1].split(".")
        if any(tag.startswith(family) and tag.endswith("_" + arch) for tag in tags):
            return name
    raise InstallError(f"the index lists no {family} {arch} wheel of uv among {sorted(names)}")


def unpack(wheel: bytes, expected_sha256: str, target: Path) -> Path:
    """Check the wheel's digest and write its ``uv`` binary to ``target/uv`` (mode 755)."""
    digest = hashlib.sha256(wheel).hexdigest()
    if not expected_sha256:
        raise InstallError("the index publishes no sha256 for the wheel: refusing to install it")
    if digest != expected_sha256:
        raise InstallError(f"sha256 mismatch: the index says {expected_sha256}, got {digest}")
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        members = [n for n in archive.namelist() if re.fullmatch(r"uv-[^/]+\.data/scripts/uv", n)]
        if len(members) != 1:
            raise InstallError("the wheel holds no uv binary")
        data = archive.read(members[0])
    target.mkdir(parents=True, exist_ok=True)
    path = target / "uv"
    partial = target / ".uv.partial"
    partial.write_bytes(data)
    partial.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    partial.replace(path)  # atomic: a half-written uv is never on the PATH
    return path


def install(version: str, index_url: str, target: Path) -> Path:
    """Download, check and unpack ``uv==version``; the installed binary's path."""
    files = wheel_files(index_url, version)
    if not files:
        raise InstallError(f"the index at {index_url} lists no wheel of uv {version}")
    musl = platform.libc_ver()[0] != "glibc"
    name = pick_wheel(list(files), platform.machine(), musl=musl)
    url, digest = files[name]
    try:
        with urllib.request.urlopen(_web(url), timeout=TIMEOUT_S) as response:  # noqa: S310
            wheel = response.read()
    except OSError as exc:
        raise InstallError(f"cannot download {url}: {exc}") from exc
    return unpack(wheel, digest, target)


def main(argv: list[str] | None = None) -> int:
    """The command line: install, then say where (exit 0), or why not (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", required=True, help="the uv release, e.g. 0.9.9")
    parser.add_argument("--target", type=Path, default=Path.home() / ".local" / "bin")
    parser.add_argument(
        "--index-url",
        default=os.environ.get("UV_INDEX_URL") or os.environ.get("PIP_INDEX_URL") or PYPI,
    )
    args = parser.parse_args(argv)
    try:
        path = install(args.version, args.index_url, args.target)
    except InstallError as exc:
        sys.stderr.write(f"install_uv: {exc}\n")
        return 1
    sys.stdout.write(f"installed uv {args.version} at {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
