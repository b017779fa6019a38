"""deployments/install_uv.py: uv from a package index, checked, with the node's python3 only.

A real HTTP index on loopback serves the simple API (PEP 691 JSON or PEP 503 HTML) and wheels
built here; the script runs as the cluster configs run it, in a process of its own.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import stat
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from raytroupe.deployments.install_uv import InstallError, _web, pick_wheel, unpack, wheel_files

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deployments" / "install_uv.py"
VERSION = "0.9.9"
GLIBC_X86 = f"uv-{VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
GLIBC_ARM = f"uv-{VERSION}-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
MUSL_X86 = f"uv-{VERSION}-py3-none-musllinux_1_1_x86_64.whl"
NAMES = [
    f"uv-{VERSION}-py3-none-macosx_11_0_arm64.whl",
    GLIBC_X86,
    GLIBC_ARM,
    MUSL_X86,
    f"uv-{VERSION}-py3-none-win_amd64.whl",
    f"uv-{VERSION}.tar.gz",
]


def _wheel(binary: bytes = b"#!/bin/sh\necho uv-from-test\n") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"uv-{VERSION}.data/scripts/uv", binary)
        archive.writestr(f"uv-{VERSION}.dist-info/METADATA", "Name: uv\n")
    return buffer.getvalue()


class _Index(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}
    style = "json"
    sha_override: str | None = None

    def do_GET(self) -> None:
        if self.path == "/simple/uv/":
            self._page()
        elif self.path.startswith("/files/") and self.path[7:] in self.files:
            self._send(200, "application/octet-stream", self.files[self.path[7:]])
        else:
            self._send(404, "text/plain", b"no")

    def _page(self) -> None:
        def digest(name: str) -> str:
            return self.sha_override or hashlib.sha256(self.files.get(name, b"")).hexdigest()

        if self.style == "json":
            body = {"files": [{"filename": n, "url": f"../../files/{n}",
                               "hashes": {"sha256": digest(n)}} for n in NAMES]}  # fmt: skip
            self._send(200, "application/vnd.pypi.simple.v1+json", json.dumps(body).encode())
        else:
            links = "".join(f'<a href="/files/{n}#sha256={digest(n)}">{n}</a>' for n in NAMES)
            self._send(200, "text/html", f"<html><body>{links}</body></html>".encode())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def index() -> Iterator[str]:
    _Index.files = {name: _wheel() for name in (GLIBC_X86, GLIBC_ARM, MUSL_X86)}
    _Index.style, _Index.sha_override = "json", None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize(
    ("machine", "musl", "expected"),
    [("x86_64", False, GLIBC_X86), ("AMD64", False, GLIBC_X86), ("aarch64", False, GLIBC_ARM),
     ("arm64", False, GLIBC_ARM), ("x86_64", True, MUSL_X86)],
)  # fmt: skip
def test_the_wheel_for_this_machine_is_picked(machine, musl, expected):
    assert pick_wheel(NAMES, machine, musl=musl) == expected


def test_an_unknown_machine_or_a_missing_build_is_an_error():
    with pytest.raises(InstallError, match="riscv64"):
        pick_wheel(NAMES, "riscv64", musl=False)
    with pytest.raises(InstallError, match="musllinux aarch64"):
        pick_wheel([GLIBC_ARM], "aarch64", musl=True)


@pytest.mark.parametrize("style", ["json", "html"])
def test_both_index_formats_list_the_wheels_with_absolute_urls_and_digests(index, style):
    _Index.style = style
    files = wheel_files(index, VERSION)
    assert set(files) == {n for n in NAMES if n.endswith(".whl")}
    url, digest = files[GLIBC_X86]
    assert url == f"{index.removesuffix('/simple/')}/files/{GLIBC_X86}"
    assert digest == hashlib.sha256(_wheel()).hexdigest()
    assert wheel_files(index, "0.0.1") == {}


def test_a_wheel_whose_digest_differs_is_refused_and_nothing_is_written(tmp_path):
    wheel = _wheel()
    with pytest.raises(InstallError, match="sha256 mismatch"):
        unpack(wheel, "0" * 64, tmp_path / "bin")
    with pytest.raises(InstallError, match="no sha256"):
        unpack(wheel, "", tmp_path / "bin")
    assert not (tmp_path / "bin").exists()


def test_a_checked_wheel_puts_an_executable_uv_in_place(tmp_path):
    wheel = _wheel(b"binary")
    path = unpack(wheel, hashlib.sha256(wheel).hexdigest(), tmp_path / "bin")
    assert path == tmp_path / "bin" / "uv"
    assert path.read_bytes() == b"binary"
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert sorted(p.name for p in path.parent.iterdir()) == ["uv"]  # no partial file left


def test_only_http_urls_are_fetched():
    assert _web("https://pypi.org/simple/uv/") == "https://pypi.org/simple/uv/"
    for url in ("file:///etc/passwd", "ftp://mirror/uv/", "/simple/uv/"):
        with pytest.raises(InstallError, match="not an http"):
            _web(url)


def _script(index: str, target: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "UV_INDEX_URL": index}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--version", VERSION, "--target", str(target), *extra],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.skipif(sys.platform != "linux", reason="the nodes are Linux machines")
def test_the_script_installs_from_the_index_named_in_the_environment(index, tmp_path):
    done = _script(index, tmp_path / "bin")
    assert done.returncode == 0, done.stderr
    assert f"installed uv {VERSION} at {tmp_path / 'bin' / 'uv'}" in done.stdout
    ran = subprocess.run([str(tmp_path / "bin" / "uv")], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert ran.stdout == "uv-from-test\n"


def test_the_script_fails_loudly_on_a_tampered_index(index, tmp_path):
    _Index.sha_override = "f" * 64
    done = _script(index, tmp_path / "bin")
    assert done.returncode == 1
    assert "install_uv: sha256 mismatch" in done.stderr
    assert not (tmp_path / "bin" / "uv").exists()


def test_the_script_fails_loudly_when_the_index_cannot_be_reached(tmp_path):
    done = _script("http://127.0.0.1:9/simple/", tmp_path / "bin")  # discard port: refused
    assert done.returncode == 1
    assert "cannot read the package index" in done.stderr
