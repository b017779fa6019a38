"""A real headless Chromium for browser tests: Debian's, installed with apt when missing.

Playwright drives it by path; ``playwright install`` is never run (it downloads a browser).
"""

from __future__ import annotations

import shutil
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
