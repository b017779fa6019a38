"""A real headless Chromium for browser tests: Debian's, installed with apt when missing.

Playwright drives it by path; ``playwright install`` is never run (it downloads a browser).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.apt import ensure_programs

CHROMIUM = "/usr/bin/chromium"


def ensure_chromium() -> str:
    """The path of Debian's chromium, installed now (as root, from apt) if it is missing.

    Raises:
        RuntimeError: it is missing and cannot be installed here.
    """
    ensure_programs({"chromium": "chromium"}, purpose="the browser tests")
    return shutil.which("chromium") or CHROMIUM


FLAGS = (
    "--no-sandbox",  # Chromium's own sandbox refuses to run as root
    "--disable-gpu",
    # no calls home: this machine's closed network refuses them, many at a time
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


@contextmanager
def headless_browser() -> Iterator[Any]:
    """A headless Chromium (Playwright's ``Browser``), closed afterwards."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - only the browser tests

    path = ensure_chromium()
    # a home of its own: Chromium keeps crash reports in ~/.config/chromium and GTK's settings
    # cache in ~/.cache/dconf, in the account's home otherwise
    with tempfile.TemporaryDirectory(prefix="chromium-home-") as home, sync_playwright() as pw:
        env = {**os.environ, "HOME": home, "XDG_CONFIG_HOME": f"{home}/.config",
               "XDG_CACHE_HOME": f"{home}/.cache"}  # fmt: skip
        browser = pw.chromium.launch(executable_path=path, args=list(FLAGS), env=env)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def headless_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A page of a headless Chromium, closed (with the browser) afterwards."""
    with headless_browser() as browser:
        yield browser.new_page(viewport={"width": width, "height": height})
