"""A real headless Chromium for browser tests: Debian's, installed with apt when missing.

Playwright drives it by path; ``playwright install`` is never run (it downloads a browser).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = "/usr/bin/chromium"
APT_TIMEOUT_S = 600


def ensure_chromium() -> str:
    """The path of Debian's chromium, installed now (as root, from apt) if it is missing.

    Raises:
        RuntimeError: it is missing and cannot be installed here.
    """
    if shutil.which("chromium"):
        return shutil.which("chromium") or CHROMIUM
    if os.geteuid() != 0:
        raise RuntimeError("the browser tests need Debian's chromium: apt-get install chromium")
    apt = shutil.which("apt-get")
    if apt is None:
        raise RuntimeError("the browser tests need Debian's chromium, and there is no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "-q", "--no-install-recommends", "chromium"]

    def run(command: list[str], *, check: bool) -> int:
        done = subprocess.run(
            command, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=check
        )
        return done.returncode

    if run(install, check=False):  # the package lists of a fresh machine may be empty
        run([apt, "update", "-q"], check=True)
        run(install, check=True)
    return shutil.which("chromium") or CHROMIUM


@contextmanager
def headless_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A page of a headless Chromium, closed (with the browser) afterwards."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - only the browser tests

    path = ensure_chromium()
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium's own sandbox refuses to run as root
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()
